// Package client is an HTTP client for sbgate generated from openapi.yaml by oapi-codegen. The
// load tool and the tests use it, which proves the document describes the server truthfully.
// Never edit the .gen.go files; change openapi.yaml and run `go generate ./...`.
package client

//go:generate go tool oapi-codegen -config client.cfg.yaml ../../openapi.yaml

// Package api is generated from openapi.yaml by oapi-codegen: the chi router, the parameter
// binding and the ServerInterface that handlers implements. Never edit the .gen.go files; change
// openapi.yaml and run `go generate ./...`.
package api

//go:generate go tool oapi-codegen -config server.cfg.yaml ../openapi.yaml

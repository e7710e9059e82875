// Package api is generated from openapi.yaml by oapi-codegen: the chi router, the parameter
// binding, the ServerInterface that handlers/rest implements, and the models of the JSON bodies that
// handlers/rest encode and decode. server.overlay.yaml adjusts the Go shape of a few models (raw
// BrokerProperties, field order) without changing what openapi.yaml documents. Never edit the
// .gen.go files; change openapi.yaml (or the overlay) and run `go generate ./...`.
package api

//go:generate go tool oapi-codegen -config server.cfg.yaml ../openapi.yaml

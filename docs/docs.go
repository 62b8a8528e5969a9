// Package docs embeds the documents the worker serves: the OpenAPI document
// of its API (GET /v1/openapi.yaml).
package docs

import _ "embed"

// OpenAPI is docs/openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte

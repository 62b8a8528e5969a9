// Package spectest loads docs/openapi.yaml for the tests that hold the API,
// the CLI and the document to one another (kin-openapi). Only tests import
// it, so the worker's binary does not carry kin-openapi.
package spectest

import (
	"context"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/sutra-run/worker/docs"
)

// Load returns the spec the worker embeds, validated, and a router that
// finds the operation of a request; loaded once per test binary.
var Load = sync.OnceValues(func() (*Spec, error) {
	doc, err := openapi3.NewLoader().LoadFromData(docs.OpenAPI)
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, err
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, err
	}
	return &Spec{Doc: doc, Router: router}, nil
})

// Spec is the loaded document and its router.
type Spec struct {
	Doc    *openapi3.T
	Router routers.Router
}

package rest_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// specDir is where a developer may put Camunda's OpenAPI description of
// the REST API v2 (rest-api.yaml, from the camunda/camunda repository at
// the 8.8 line): it is not committed here. With it, every call of these
// tests is validated against it; without it they check Sutra's own
// expectations only, and Camunda's clients, run with strict validation of
// every answer (camunda_rest_node_test.go), stay the contract test.
const specDir = "../../../shared/camunda-rest-api-v2"

// contract validates requests and answers against Camunda's spec.
type contract struct {
	router routers.Router
}

func loadContract(t *testing.T) *contract {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(specDir, "*.yaml"))
	if len(files) == 0 {
		t.Logf("no Camunda REST API v2 spec in %s: the answers are not validated against it (the Node clients' strict validation is)", specDir)
		return &contract{}
	}
	loader := openapi3.NewLoader()
	loader.IsExternalRefsAllowed = true
	doc, err := loader.LoadFromFile(files[0])
	if err != nil {
		t.Fatalf("loading %s: %v", files[0], err)
	}
	// The spec's servers name Camunda's host: match any.
	doc.Servers = nil
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatalf("routing %s: %v", files[0], err)
	}
	return &contract{router: router}
}

// check validates one call's answer, when a spec is loaded. A problem of
// the listener (401, 403, 404 of a path the spec does not have) is checked
// by the tests themselves.
func (c *contract) check(t *testing.T, req *http.Request, body []byte, resp *http.Response, out []byte) {
	t.Helper()
	if c.router == nil {
		return
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		return // not an operation of the spec: an unknown path's 404
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	err = openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header, Body: io.NopCloser(bytes.NewReader(out)),
		Options: &openapi3filter.Options{IncludeResponseStatus: false},
	})
	if err != nil {
		t.Errorf("%s %s answered %d %s, which Camunda's spec refuses: %v", req.Method, req.URL.Path, resp.StatusCode, out, err)
	}
}

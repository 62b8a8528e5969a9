package console

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"
)

func get(h http.Handler, path string, header ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestWithoutTheBundleEveryPathSaysHowToBuildIt(t *testing.T) {
	h := newHandler(fstest.MapFS{"README": {Data: []byte("built here")}})
	for _, path := range []string{"/ui/", "/ui/app.js", "/ui/instances/i-1"} {
		w := get(h, path)
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "make console") {
			t.Errorf("%s: %d %q, want 200 with how to build the console", path, w.Code, w.Body.String())
		}
	}
}

func TestDeepLinksServeThePageAndAssetsThemselves(t *testing.T) {
	h := newHandler(fstest.MapFS{
		"index.html": {Data: []byte("<!doctype html>page")},
		"app.js":     {Data: []byte("console.log(1)")},
		"app.css":    {Data: []byte("body{}")},
		// The licences of what the bundle holds (scripts/console.sh).
		"third-party-notices.txt": {Data: []byte("bpmn-js@1")},
	})
	cases := []struct{ path, body, contentType string }{
		{"/ui/", "<!doctype html>page", "text/html; charset=utf-8"},
		{"/ui/instances/i-1", "<!doctype html>page", "text/html; charset=utf-8"},
		{"/ui/processes/shop", "<!doctype html>page", "text/html; charset=utf-8"},
		{"/ui/incidents", "<!doctype html>page", "text/html; charset=utf-8"},
		{"/ui/app.js", "console.log(1)", "text/javascript; charset=utf-8"},
		{"/ui/app.css", "body{}", "text/css; charset=utf-8"},
		{"/ui/third-party-notices.txt", "bpmn-js@1", "text/plain; charset=utf-8"},
	}
	for _, c := range cases {
		w := get(h, c.path)
		if w.Code != http.StatusOK || w.Body.String() != c.body || w.Header().Get("Content-Type") != c.contentType {
			t.Errorf("%s: %d %q %q, want 200 %q %q", c.path, w.Code, w.Header().Get("Content-Type"), w.Body.String(), c.contentType, c.body)
		}
		if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "script-src 'self';") {
			t.Errorf("%s: Content-Security-Policy %q lets more than the page's origin in", c.path, csp)
		}
		if cc := w.Header().Get("Cache-Control"); cc != "no-cache" {
			t.Errorf("%s: Cache-Control %q, want no-cache (revalidated by ETag)", c.path, cc)
		}
	}
	etag := get(h, "/ui/app.js").Header().Get("ETag")
	if w := get(h, "/ui/app.js", "If-None-Match", etag); w.Code != http.StatusNotModified {
		t.Errorf("a revalidation with the current ETag: %d, want 304", w.Code)
	}
}

func TestTextAssetsGoGzippedToClientsThatAcceptIt(t *testing.T) {
	h := newHandler(fstest.MapFS{
		"index.html":  {Data: []byte("<!doctype html>page")},
		"app.js":      {Data: []byte(strings.Repeat("console.log(1);", 100))},
		"favicon.ico": {Data: []byte{0, 0, 1, 0}},
	})
	cases := []struct {
		path, accept, encoding string
	}{
		{"/ui/app.js", "gzip, deflate, br", "gzip"},
		{"/ui/app.js", "br;q=1.0, gzip;q=0.5", "gzip"},
		{"/ui/app.js", "*", "gzip"},
		{"/ui/app.js", "gzip;q=0", ""},
		{"/ui/app.js", "", ""},
		{"/ui/instances/a%2Fb", "gzip", "gzip"},
		{"/favicon.ico", "gzip", ""},
	}
	for _, c := range cases {
		w := get(h, c.path, "Accept-Encoding", c.accept)
		if w.Code != http.StatusOK || w.Header().Get("Content-Encoding") != c.encoding {
			t.Errorf("%s with Accept-Encoding %q: %d, Content-Encoding %q, want 200 %q", c.path, c.accept, w.Code, w.Header().Get("Content-Encoding"), c.encoding)
		}
	}
	plain, zipped := get(h, "/ui/app.js"), get(h, "/ui/app.js", "Accept-Encoding", "gzip")
	if plain.Header().Get("ETag") == zipped.Header().Get("ETag") {
		t.Errorf("the gzipped and plain app.js share the ETag %s", plain.Header().Get("ETag"))
	}
	if v := zipped.Header().Get("Vary"); v != "Accept-Encoding" {
		t.Errorf("Vary %q, want Accept-Encoding", v)
	}
	if w := get(h, "/favicon.ico"); w.Header().Get("Content-Type") != "image/x-icon" {
		t.Errorf("/favicon.ico: %d %q, want image/x-icon", w.Code, w.Header().Get("Content-Type"))
	}
	if w := get(newHandler(fstest.MapFS{"index.html": {Data: []byte("page")}}), "/favicon.ico"); w.Code != http.StatusNotFound {
		t.Errorf("/favicon.ico of a bundle without one: %d, want 404", w.Code)
	}
}

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

// Package console serves the web console at /ui/ on the API listener: a
// page and its assets, bundled from console/web by scripts/console.sh (make
// console) and embedded in the binary. They hold no data and are served
// without credentials; the page asks for a token and reads and acts only
// through the public /v1 API, like any client (docs/console.md).
//
// A binary built without the bundle serves, under /ui/, a page that says how
// to build it.
package console

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"
)

// dist is the bundle; only its README is committed, so a checkout that has
// not run make console still compiles.
//
//go:embed all:dist
var dist embed.FS

// Prefix is where the console is served.
const Prefix = "/ui/"

// Favicon is the path browsers ask for an icon on every first load; the
// handler serves the bundle's favicon.ico there.
const Favicon = "/favicon.ico"

// securityPolicy lets the page load and call nothing but its own origin: no
// CDN, no external font, no inline script or style (bpmn-js and form-js set
// styles through the DOM, which the policy allows; the browser tests check
// that no page meets a refusal). The one exception is by hash: the bpmn.io
// watermark dmn-js draws beside a decision table (and its lightbox) places
// itself with style attributes, and its licence forbids changing that code,
// so style-src-attr admits exactly those attribute values and no others.
const securityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; " + dmnWatermarkStyles +
	"img-src 'self' data:; font-src 'self' data:; connect-src 'self'; object-src 'none'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// dmnWatermarkStyles are the SHA-256 hashes of the style attributes of
// dmn-js-shared's lib/util/PoweredByUtil.js (the link, its logo, the
// lightbox, its backdrop, its notice and its link).
const dmnWatermarkStyles = "style-src-attr 'unsafe-hashes' 'sha256-r3vOsuepBDg6tz/cOusiNJ9Y4Lp9hGQTT7pzDks1Xxc=' " +
	"'sha256-CA/eh4+2R0J7cEQ14gBMtx834RIOjzMUqCM+evtrkp4=' 'sha256-JpvvTIK7ulxf/3oA+AUuVbO9Labs8npGWGm9X9nGIWw=' " +
	"'sha256-9OIpRRx0bq4t4s2zyqbocMNwedniLDaxLB+FlLIjNgM=' 'sha256-GAdrtwahSjGXI0UQQnfyEVtPn+wfgQxvyrjyQuByfuU=' " +
	"'sha256-ZG9bHUWWXDZyu7zfItuLwGK+cah/hweM0RfXpZpxZVM='; "

// Handler serves the embedded bundle.
func Handler() http.Handler {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // "dist" is a valid path: fs.Sub cannot fail on it
	}
	return newHandler(sub)
}

// asset is one file of the bundle, read once, and gzipped once on the
// first request that accepts it (a text asset: the bundle is about a third
// of its size gzipped).
type asset struct {
	body        []byte
	etag        string
	contentType string
	gzipped     *gzipped
}

type gzipped struct {
	once sync.Once
	body []byte
	etag string
}

// compressed is a's body gzipped and its ETag; a.gzipped is set.
func (a *asset) compressed() *gzipped {
	g := a.gzipped
	g.once.Do(func() {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression) // a valid level: no error
		_, _ = zw.Write(a.body)                                  // a bytes.Buffer does not fail
		_ = zw.Close()
		g.body = buf.Bytes()
		g.etag = strings.TrimSuffix(a.etag, `"`) + `-gzip"`
	})
	return g
}

type handler struct {
	assets map[string]*asset
	index  *asset
}

func newHandler(fsys fs.FS) *handler {
	h := &handler{assets: map[string]*asset{}}
	_ = fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		a := &asset{body: body, etag: `"` + hex.EncodeToString(sum[:8]) + `"`, contentType: contentType(name)}
		if strings.HasPrefix(a.contentType, "text/") || a.contentType == "image/svg+xml" {
			a.gzipped = &gzipped{}
		}
		h.assets[name] = a
		return nil
	})
	h.index = h.assets["index.html"]
	return h
}

func contentType(name string) string {
	switch path.Ext(name) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".png":
		return "image/png"
	case ".svg":
		return "image/svg+xml"
	case ".txt":
		return "text/plain; charset=utf-8"
	case ".ico":
		return "image/x-icon"
	}
	return "application/octet-stream"
}

// ServeHTTP serves an asset by name, and the page itself for every other
// path under /ui/, so that a deep link (/ui/instances/{id}) loads the page,
// which routes on its path. Every answer is revalidated (no-cache, with an
// ETag): the asset names carry no hash, and a new binary must not be served
// an old bundle. A text asset goes gzipped to a client that accepts it.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", securityPolicy)
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "no-referrer")
	hdr.Set("X-Frame-Options", "DENY")
	if h.index == nil {
		hdr.Set("Cache-Control", "no-store")
		hdr.Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(notBuilt))
		return
	}
	name := strings.TrimPrefix(r.URL.Path, Prefix)
	if r.URL.Path == Favicon {
		name = "favicon.ico"
	}
	a, ok := h.assets[name]
	if !ok && r.URL.Path == Favicon {
		http.NotFound(w, r)
		return
	}
	if !ok || strings.HasSuffix(r.URL.Path, "/") || a.contentType == "application/octet-stream" {
		a = h.index
	}
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("Content-Type", a.contentType)
	body, etag := a.body, a.etag
	if a.gzipped != nil {
		hdr.Add("Vary", "Accept-Encoding")
		if acceptsGzip(r.Header.Values("Accept-Encoding")) {
			g := a.compressed()
			body, etag = g.body, g.etag
			hdr.Set("Content-Encoding", "gzip")
		}
	}
	hdr.Set("ETag", etag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
}

// acceptsGzip reports whether Accept-Encoding admits gzip: named (or *)
// with a weight other than 0.
func acceptsGzip(values []string) bool {
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			coding, params, _ := strings.Cut(part, ";")
			coding = strings.TrimSpace(coding)
			if coding != "gzip" && coding != "*" {
				continue
			}
			q := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
			if q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000" {
				return true
			}
		}
	}
	return false
}

const notBuilt = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sutra console: not built</title></head>
<body><h1>The console is not built into this binary</h1>
<p>This worker was built without the console's bundle. Build it with <code>make console</code>
(or <code>make build</code>, which runs it), then build the worker again.</p></body></html>
`

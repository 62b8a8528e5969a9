package app

import (
	"net/http"
	"testing"
)

// The metrics listener bounds every phase of a request and idle keep-alive
// connections: without ReadTimeout a client trickling a body holds a
// goroutine, and without IdleTimeout open connections pile up.
func TestTheMetricsListenerBoundsReadingWritingAndIdleConnections(t *testing.T) {
	s := newHTTPServer(http.NewServeMux())
	if s.ReadHeaderTimeout <= 0 || s.ReadTimeout <= 0 || s.WriteTimeout <= 0 || s.IdleTimeout <= 0 {
		t.Errorf("timeouts: read header %v, read %v, write %v, idle %v: want every one set",
			s.ReadHeaderTimeout, s.ReadTimeout, s.WriteTimeout, s.IdleTimeout)
	}
}

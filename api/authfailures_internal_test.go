package api

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sutra-run/worker/internal/clock"
	"github.com/sutra-run/worker/metrics"
)

// However many addresses fail, the record holds at most maxSources, and
// it logs at most one line every failureLogEvery, saying how many.
func TestAuthFailuresKeepBoundedMemoryAndLogAtABoundedRate(t *testing.T) {
	var log bytes.Buffer
	clk := clock.NewFake(time.Now())
	const burst = 20
	f := NewAuthFailures(metrics.New(prometheus.NewRegistry()), slog.New(slog.NewTextHandler(&log, nil)), clk, burst)
	for i := range maxSources + 5000 {
		f.Failed(SurfaceAPI, fmt.Sprintf("10.%d.%d.%d:1234", i>>16&255, i>>8&255, i&255))
	}
	if n := len(f.sources); n > maxSources {
		t.Errorf("%d sources remembered, at most %d", n, maxSources)
	}
	if n := strings.Count(log.String(), "\n"); n != 1 {
		t.Errorf("%d log lines, want 1:\n%s", n, log.String())
	}
	clk.Advance(failureLogEvery)
	f.Failed(SurfaceAPI, "[2001:db8::1]:1")
	if !strings.Contains(log.String(), fmt.Sprintf("failures=%d", maxSources+5000)) {
		t.Errorf("the second line does not count the failures since the first:\n%s", log.String())
	}
	// One IPv6 host is its /64: another address of it shares its budget.
	for range burst {
		f.Failed(SurfaceAPI, "[2001:db8::2]:1")
	}
	if _, err := f.Throttled(SurfaceAPI, "[2001:db8::3]:1"); err == nil {
		t.Errorf("another address of the same /64 is not throttled")
	}
	if _, err := f.Throttled(SurfaceAPI, "[2001:db8:0:1::1]:1"); err != nil {
		t.Errorf("another /64 is throttled: %v", err)
	}
}

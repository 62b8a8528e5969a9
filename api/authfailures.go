package api

import (
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/clock"
	"github.com/sutra-run/worker/metrics"
)

// Surfaces that check credentials, the label of
// sutra_api_auth_failures_total.
const (
	SurfaceAPI     = "api"
	SurfaceOAuth   = "oauth"
	SurfaceGateway = "gateway"
)

// Failure budget of one source address: a burst of failures
// (SUTRA_API_AUTH_FAILURE_BURST), then one per failureRefill. Past it,
// every call from the address that needs credentials is refused unchecked
// until the budget refills, so that guessing a token costs its sender
// time: about 3,600 guesses an hour rather than 11,000 a second. A call
// whose token is valid never spends the budget, and other addresses are
// never slowed. Unchecked, because a guess that is checked is answered:
// a source that keeps failing is slowed whatever it presents.
const (
	failureRefill = time.Second
	// maxSources bounds the addresses remembered (about 100 bytes each);
	// past it a full budget is forgotten first, then any.
	maxSources = 10000
	// failureLogEvery is the least time between two log lines of failures.
	failureLogEvery = 10 * time.Second
)

// AuthFailures counts the calls every surface refuses for their
// credentials, logs them at a bounded rate, and throttles a source address
// that keeps failing (per address, bounded memory). One per replica, shared
// by the API listener and the Zeebe gateway.
type AuthFailures struct {
	metrics *metrics.Metrics
	log     *slog.Logger
	clock   clock.Clock
	burst   float64 // 0: count and log, throttle nothing

	mu       sync.Mutex
	sources  map[netip.Prefix]*budget
	sweptAt  time.Time
	loggedAt time.Time
	unlogged int
}

// budget is a token bucket of failures: tokens at the time at.
type budget struct {
	tokens float64
	at     time.Time
}

// DefaultAuthFailureBurst is the failures a source may have at once before
// it is throttled (SUTRA_API_AUTH_FAILURE_BURST).
const DefaultAuthFailureBurst = 20

// NewAuthFailures builds the failure record of a budget of burst failures
// per source (0: no throttle); c nil is the real clock.
func NewAuthFailures(m *metrics.Metrics, log *slog.Logger, c clock.Clock, burst int) *AuthFailures {
	if c == nil {
		c = clock.Real()
	}
	return &AuthFailures{metrics: m, log: log, clock: c, burst: float64(max(burst, 0)), sources: map[netip.Prefix]*budget{}}
}

// Throttled refuses a call from addr (host:port, or a host) when its source
// spent its failure budget: the error (SUTRA.API.AUTH_THROTTLED) says when
// to retry. It is checked before the token, so that a guesser learns
// nothing while throttled; the refusal counts as a failure of surface.
func (f *AuthFailures) Throttled(surface, addr string) (retryAfter time.Duration, err error) {
	if f == nil {
		return 0, nil
	}
	src, ok := sourceOf(addr)
	if !ok || f.burst == 0 {
		return 0, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.sources[src]
	if b == nil {
		return 0, nil
	}
	now := f.clock.Now()
	f.refill(b, now)
	if b.tokens >= 1 {
		return 0, nil
	}
	f.metrics.APIAuthFailures.WithLabelValues(surface).Inc()
	retryAfter = time.Duration((1 - b.tokens) * float64(failureRefill))
	return retryAfter, fault.New(fault.APIAuthThrottled, "too many failed credentials from this address: retry in %s", retryAfter.Round(time.Second))
}

// Failed records a call of surface from addr refused for its credentials.
func (f *AuthFailures) Failed(surface, addr string) {
	if f == nil {
		return
	}
	f.metrics.APIAuthFailures.WithLabelValues(surface).Inc()
	src, ok := sourceOf(addr)
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.clock.Now()
	if ok && f.burst > 0 {
		b := f.sources[src]
		if b == nil {
			f.makeRoom(now)
			b = &budget{tokens: f.burst, at: now}
			f.sources[src] = b
		}
		f.refill(b, now)
		b.tokens = math.Max(b.tokens-1, 0)
	}
	f.unlogged++
	if now.Sub(f.loggedAt) >= failureLogEvery {
		f.log.Warn("calls refused for their credentials", "code", fault.APIUnauthorized, "surface", surface, "source", src.String(),
			"failures", f.unlogged, "detail", fmt.Sprintf("%d failures since the last line (at most one every %s)", f.unlogged, failureLogEvery))
		f.loggedAt, f.unlogged = now, 0
	}
}

// makeRoom forgets budgets that refilled (they hold nothing), at most
// once per failureRefill (a walk of the whole record), and otherwise any
// one, so that the record never passes maxSources. Called with f.mu held.
func (f *AuthFailures) makeRoom(now time.Time) {
	if len(f.sources) < maxSources {
		return
	}
	if now.Sub(f.sweptAt) >= failureRefill {
		f.sweptAt = now
		for src, b := range f.sources {
			if f.refill(b, now); b.tokens >= f.burst {
				delete(f.sources, src)
			}
		}
	}
	for src := range f.sources {
		if len(f.sources) < maxSources {
			return
		}
		delete(f.sources, src)
	}
}

func (f *AuthFailures) refill(b *budget, now time.Time) {
	if d := now.Sub(b.at); d > 0 {
		b.tokens = math.Min(f.burst, b.tokens+float64(d)/float64(failureRefill))
		b.at = now
	}
}

// sourceOf is the source a failure counts against: the IPv4 address, or
// the /64 of an IPv6 one (what one host is usually given).
func sourceOf(addr string) (netip.Prefix, bool) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Prefix{}, false
	}
	ip = ip.Unmap()
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, _ := ip.Prefix(bits)
	return p, true
}

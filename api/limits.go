package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/defaults"
)

// Limits bound what the API holds in memory and takes from the database, so
// that no caller, careless or hostile, can take a replica down or starve its
// lanes. docs/operations.md ("Limits") computes what they allow together.
type Limits struct {
	// MaxTopics caps the topics of one fetchAndLock (default 100); its body
	// is capped by FetchBodyLimit.
	MaxTopics int
	// MaxLongPolls caps the long polls waiting at once (default 256). A
	// long poll over it is served as a fetch that does not wait: it answers
	// at once, with what it locked or an empty list, which Camunda's clients
	// take as "nothing now" and poll again after their back-off.
	MaxLongPolls int
	// MaxConns caps the open connections of the listener (default 1024);
	// more wait in the kernel's accept queue.
	MaxConns int
	// MaxBody caps the body of every call but a deploy, fetchAndLock,
	// extendLock and unlock (default 1 MiB): completions, failures, BPMN
	// errors and the admin calls that carry variables.
	MaxBody int64
	// MaxBytesInFlight caps the request bytes being read and decoded at
	// once, replica-wide (default 8 MiB): a call waits up to busyWait for
	// room, then is refused (503 SUTRA.API.BUSY).
	MaxBytesInFlight int64
	// MaxDBConns caps the database connections API calls use at once
	// (default 4), so that they never take the lanes' share of the pool: a
	// call waits up to busyWait for one, then is refused (503
	// SUTRA.API.BUSY).
	MaxDBConns int
	// MaxRetryTimeout caps a failure's retryTimeout (default 24h).
	MaxRetryTimeout time.Duration
}

func (l *Limits) setDefaults() {
	defaults.Set(&l.MaxTopics, 100)
	defaults.Set(&l.MaxLongPolls, 256)
	defaults.Set(&l.MaxConns, 1024)
	defaults.Set(&l.MaxBody, 1<<20)
	defaults.Set(&l.MaxBytesInFlight, 8<<20)
	defaults.Set(&l.MaxDBConns, DefaultMaxDBConns)
	defaults.Set(&l.MaxRetryTimeout, 24*time.Hour)
}

// DefaultMaxDBConns is Limits.MaxDBConns when unset.
const DefaultMaxDBConns = 4

// busyWait is how long a call waits for room under MaxBytesInFlight or for
// a database connection under MaxDBConns before it is refused: long enough
// to ride out a burst, short enough that a client's retry is the better wait.
const busyWait = time.Second

// smallBody caps the bodies of extendLock and unlock, which carry a worker
// id and a duration.
const smallBody = 4 << 10

// FetchBodyLimit caps a fetchAndLock's body: 512 bytes per topic allowed
// (a name, a lock duration, a few variable names and definition keys), and
// 1 KiB for the rest. A long poll keeps what it decoded of it while it
// waits (about four times its size).
func FetchBodyLimit(maxTopics int) int64 { return 1<<10 + int64(maxTopics)<<9 }

// bodyLimit is the largest body route pattern takes.
func (s *Server) bodyLimit(pattern string) int64 {
	_, path, _ := strings.Cut(pattern, " ")
	switch {
	case path == "/v1/definitions":
		return s.cfg.MaxBody
	case strings.HasSuffix(path, "/fetchAndLock"):
		return FetchBodyLimit(s.cfg.Limits.MaxTopics)
	case strings.HasSuffix(path, "/extendLock"), strings.HasSuffix(path, "/unlock"):
		return smallBody
	}
	return s.cfg.Limits.MaxBody
}

// budgets are the replica-wide caps every call is served under.
type budgets struct {
	bytes *semaphore.Weighted
	db    *semaphore.Weighted
}

func newBudgets(l Limits) budgets {
	return budgets{bytes: semaphore.NewWeighted(l.MaxBytesInFlight), db: semaphore.NewWeighted(int64(l.MaxDBConns))}
}

// errBusy refuses a call that found no room under a replica-wide cap.
var errBusy = errors.New("busy")

// acquireDB takes one of the API's database connections, waiting up to
// busyWait (or until ctx ends).
func (b budgets) acquireDB(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, busyWait)
	defer cancel()
	if b.db.Acquire(ctx, 1) != nil {
		return errBusy
	}
	return nil
}

// call is what one call holds: body bytes under MaxBytesInFlight and a
// database connection under MaxDBConns. A long poll gives both back while
// it waits (idle) and takes a connection again for each fetch.
type call struct {
	b     budgets
	mu    sync.Mutex
	bytes int64
	db    bool
}

type callKey struct{}

// callOf is the budget r is served under.
func callOf(r *http.Request) *call {
	c, _ := r.Context().Value(callKey{}).(*call)
	return c
}

// idle gives back what the call holds: its body is decoded and no longer
// needed, and it uses no database connection until it fetches again.
func (c *call) idle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bytes > 0 {
		c.b.bytes.Release(c.bytes)
		c.bytes = 0
	}
	if c.db {
		c.b.db.Release(1)
		c.db = false
	}
}

// useDB takes a database connection for the call again, waiting up to
// busyWait.
func (c *call) useDB(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.db {
		return nil
	}
	if err := c.b.acquireDB(ctx); err != nil {
		return err
	}
	c.db = true
	return nil
}

// guard serves a route under its body limit and the replica-wide caps: it
// refuses a body over the route's limit before reading it (413), reserves
// its bytes (the declared length, or the limit for a chunked body), reads
// it whole, then takes a database connection, and gives both back when the
// call ends. Reading before taking the connection keeps a slow client from
// holding one.
func (s *Server) guard(pattern string, next http.HandlerFunc) http.HandlerFunc {
	limit := s.bodyLimit(pattern)
	return func(w http.ResponseWriter, r *http.Request) {
		c := &call{b: s.budgets}
		defer c.idle()
		if r.Method != http.MethodGet {
			if r.ContentLength > limit {
				s.tooLarge(w, r, limit)
				return
			}
			want := limit
			if r.ContentLength >= 0 {
				want = r.ContentLength
			}
			if want > 0 {
				ctx, cancel := context.WithTimeout(r.Context(), busyWait)
				err := s.budgets.bytes.Acquire(ctx, want)
				cancel()
				if err != nil {
					s.busy(w, r, "SUTRA_API_MAX_BYTES_IN_FLIGHT", "request bytes being read")
					return
				}
				c.bytes = want
				s.TestSignals.Reading.Signal(want)
			}
			body, err := readBody(w, r, limit)
			if err != nil {
				var tooLarge *http.MaxBytesError
				if errors.As(err, &tooLarge) {
					s.tooLarge(w, r, limit)
				} else {
					refuseCall(w, r, http.StatusBadRequest, fault.APIInvalid, fmt.Sprintf("reading the body: %v", err))
				}
				return
			}
			if extra := c.bytes - int64(len(body)); extra > 0 { // a chunked body reserved the limit
				s.budgets.bytes.Release(extra)
				c.bytes -= extra
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		if err := c.useDB(r.Context()); err != nil {
			s.busy(w, r, "SUTRA_API_MAX_DB_CONNS", "database connections of API calls")
			return
		}
		next(w, r.WithContext(context.WithValue(r.Context(), callKey{}, c)))
	}
}

// readBody reads r's body whole, within limit, into a buffer of the
// declared size.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	return buf.Bytes(), err
}

func (s *Server) tooLarge(w http.ResponseWriter, r *http.Request, limit int64) {
	refuseCall(w, r, http.StatusRequestEntityTooLarge, fault.APITooLarge, fmt.Sprintf("the body is larger than %d bytes, this call's limit", limit))
}

// busy refuses a call that found no room under a replica-wide cap: 503,
// Retry-After, SUTRA.API.BUSY naming the cap.
func (s *Server) busy(w http.ResponseWriter, r *http.Request, variable, what string) {
	s.deps.Metrics.APIBusy.WithLabelValues(strings.ToLower(strings.TrimPrefix(variable, "SUTRA_API_"))).Inc()
	w.Header().Set("Retry-After", "1")
	refuseCall(w, r, http.StatusServiceUnavailable, fault.APIBusy,
		fmt.Sprintf("the replica is at its cap of %s (%s): retry", what, variable))
}

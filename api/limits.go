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

// Limits bound what the listener's calls hold in memory and take from the
// database, so that no caller, careless or hostile, can take a replica down
// or starve its lanes. docs/operations.md ("Limits") computes what they
// allow together with each protocol's own.
type Limits struct {
	// MaxConns caps the open connections of the listener (default 1024);
	// more wait in the kernel's accept queue.
	MaxConns int
	// MaxBody caps the body of a route that names no limit of its own
	// (default 1 MiB).
	MaxBody int64
	// MaxBytesInFlight caps the request bytes being read and decoded at
	// once, replica-wide (default 8 MiB): a call waits up to busyWait for
	// room, then is refused (503 SUTRA.API.BUSY).
	MaxBytesInFlight int64
	// MaxDBConns caps the database connections calls use at once (default
	// 4), so that they never take the lanes' share of the pool: a call
	// waits up to busyWait for one, then is refused (503 SUTRA.API.BUSY).
	MaxDBConns int
}

func (l *Limits) setDefaults() {
	defaults.Set(&l.MaxConns, 1024)
	defaults.Set(&l.MaxBody, 1<<20)
	defaults.Set(&l.MaxBytesInFlight, 8<<20)
	defaults.Set(&l.MaxDBConns, DefaultMaxDBConns)
}

// DefaultMaxDBConns is Limits.MaxDBConns when unset.
const DefaultMaxDBConns = 4

// busyWait is how long a call waits for room under MaxBytesInFlight or for
// a database connection under MaxDBConns before it is refused: long enough
// to ride out a burst, short enough that a client's retry is the better wait.
const busyWait = time.Second

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

// AcquireDB takes one of the database connections of calls (MaxDBConns),
// waiting up to a second (or until ctx ends), for work a protocol does
// beside its calls; release gives it back.
func (s *Server) AcquireDB(ctx context.Context) (release func(), err error) {
	if err := s.budgets.acquireDB(ctx); err != nil {
		return nil, err
	}
	return func() { s.budgets.db.Release(1) }, nil
}

func (b budgets) acquireDB(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, busyWait)
	defer cancel()
	if b.db.Acquire(ctx, 1) != nil {
		return errBusy
	}
	return nil
}

// Call is what one call holds: body bytes under MaxBytesInFlight and a
// database connection under MaxDBConns. A long poll gives both back while
// it waits (Idle) and takes a connection again for each fetch (UseDB).
type Call struct {
	b     budgets
	mu    sync.Mutex
	bytes int64
	db    bool
}

type callKey struct{}

// CallOf is what the call r holds; nil outside a route.
func CallOf(r *http.Request) *Call {
	c, _ := r.Context().Value(callKey{}).(*Call)
	return c
}

// Idle gives back what the call holds: its body is decoded and no longer
// needed, and it uses no database connection until UseDB (a long poll
// waiting, an admin call waiting for its step).
func (c *Call) Idle() {
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

// UseDB takes a database connection for the call again, waiting up to
// busyWait.
func (c *Call) UseDB(ctx context.Context) error {
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
func (s *Server) guard(p Protocol, limit int64, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c := &Call{b: s.budgets}
		defer c.Idle()
		if r.Method != http.MethodGet {
			if r.ContentLength > limit {
				s.tooLarge(w, p, limit)
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
					s.busy(w, p, "SUTRA_API_MAX_BYTES_IN_FLIGHT", "request bytes being read")
					return
				}
				c.bytes = want
				s.TestSignals.Reading.Signal(want)
			}
			body, err := readBody(w, r, limit)
			if err != nil {
				var tooLarge *http.MaxBytesError
				if errors.As(err, &tooLarge) {
					s.tooLarge(w, p, limit)
				} else {
					p.Refuse(w, http.StatusBadRequest, fault.APIInvalid, fmt.Sprintf("reading the body: %v", err))
				}
				return
			}
			if extra := c.bytes - int64(len(body)); extra > 0 { // a chunked body reserved the limit
				s.budgets.bytes.Release(extra)
				c.bytes -= extra
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		if err := c.UseDB(r.Context()); err != nil {
			s.busy(w, p, "SUTRA_API_MAX_DB_CONNS", "database connections of API calls")
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

func (s *Server) tooLarge(w http.ResponseWriter, p Protocol, limit int64) {
	p.Refuse(w, http.StatusRequestEntityTooLarge, fault.APITooLarge, fmt.Sprintf("the body is larger than %d bytes, this call's limit", limit))
}

// busy refuses a call that found no room under a replica-wide cap: 503,
// Retry-After, SUTRA.API.BUSY naming the cap.
func (s *Server) busy(w http.ResponseWriter, p Protocol, variable, what string) {
	s.deps.Metrics.APIBusy.WithLabelValues(strings.ToLower(strings.TrimPrefix(variable, "SUTRA_API_"))).Inc()
	w.Header().Set("Retry-After", "1")
	p.Refuse(w, http.StatusServiceUnavailable, fault.APIBusy,
		fmt.Sprintf("the replica is at its cap of %s (%s): retry", what, variable))
}

package usecase

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/defaults"
	"github.com/sutra-run/worker/internal/startstop"
	"github.com/sutra-run/worker/store"
)

// Ends are the calls waiting for instances to end (a start with its
// result), by instance id, a startstop service: a step of this replica
// that ends an instance wakes its waiters at once (Ended, which the lanes
// call); the look finds, every poll interval, the ends other replicas
// committed, with one statement for every waiter.
type Ends struct {
	startstop.Base
	store    EndsStore
	logger   *slog.Logger
	interval time.Duration
	mu       sync.Mutex
	waiting  map[string]map[*endWaiter]struct{}
	// calls and max cap the calls waiting at once: each holds a goroutine
	// and a place in the look until its timeout.
	calls, max int
}

// EndsStore is what the look needs (*store.Store).
type EndsStore interface {
	Ended(ctx context.Context, ids []string) ([]string, error)
}

// NewEnds builds the waiters of instances' ends: at most max calls wait
// at once (default 256, as SUTRA_GATEWAY_MAX_STREAMS); the look runs
// every interval (default 250ms).
func NewEnds(st EndsStore, logger *slog.Logger, max int, interval time.Duration) *Ends {
	defaults.Set(&max, 256)
	defaults.Set(&interval, 250*time.Millisecond)
	return &Ends{store: st, logger: logger, interval: interval, max: max, waiting: map[string]map[*endWaiter]struct{}{}}
}

// endWaiter is one waiting call. ended (capacity 1) holds a wake-up when
// its instance may have ended since the waiter last looked: a wake-up
// between a look and the wait stays there, so none is lost.
type endWaiter struct {
	id    string
	ended chan struct{}
}

// Start runs the look until Stop.
func (e *Ends) Start(ctx context.Context) error {
	return e.Run(ctx, "instance ends", func(soft, _ context.Context) { e.poll(soft) })
}

// reserve admits one more waiting call, or answers false when max wait.
func (e *Ends) reserve() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.calls >= e.max {
		return false
	}
	e.calls++
	return true
}

func (e *Ends) release() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls--
}

func (e *Ends) add(id string, w *endWaiter) {
	e.mu.Lock()
	defer e.mu.Unlock()
	w.id = id
	if e.waiting[id] == nil {
		e.waiting[id] = map[*endWaiter]struct{}{}
	}
	e.waiting[id][w] = struct{}{}
}

func (e *Ends) remove(w *endWaiter) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if ws := e.waiting[w.id]; ws != nil {
		delete(ws, w)
		if len(ws) == 0 {
			delete(e.waiting, w.id)
		}
	}
}

// Ended wakes the calls waiting for instance id's end: the lanes call it
// for each instance a step of this replica ended. It never blocks.
func (e *Ends) Ended(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for w := range e.waiting[id] {
		w.wake()
	}
}

func (e *Ends) ids() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	ids := make([]string, 0, len(e.waiting))
	for id := range e.waiting {
		ids = append(ids, id)
	}
	return ids
}

func (w *endWaiter) wake() {
	select {
	case w.ended <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// poll looks for the ends of waited-for instances that other replicas
// committed, every interval, until ctx ends.
func (e *Ends) poll(ctx context.Context) {
	t := time.NewTicker(e.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ids := e.ids()
		if len(ids) == 0 {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, e.interval+5*time.Second)
		ended, err := e.store.Ended(cctx, ids)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				e.logger.Warn("looking for ended instances failed; looking again next interval", "code", fault.Code(err), "err", err)
			}
			continue
		}
		for _, id := range ended {
			e.Ended(id)
		}
	}
}

// The refusals of a start with its result, besides StartInstance's: each
// protocol answers them as its own.
var (
	// ErrResultsFull: as many calls wait for an instance's end on this
	// replica as may (code fault.APIBusy).
	ErrResultsFull = errors.New("too many calls wait for an instance's end")
	// ErrNoResultYet: the instance has not ended within the timeout; it
	// runs on (code fault.Unavailable).
	ErrNoResultYet = errors.New("the instance has not ended within the timeout")
	// ErrResultStopping: the protocol is stopping; the instance runs on
	// (code fault.Unavailable).
	ErrResultStopping = errors.New("stopping")
	// ErrNotCompleted: the instance ended otherwise (cancelled, or
	// terminated by an uncaught error) (code fault.NotWaiting).
	ErrNotCompleted = errors.New("the instance ended, not completed")
)

type resultError struct {
	refusal *fault.Error
	is      error
}

func (e resultError) Error() string        { return e.refusal.Error() }
func (e resultError) Unwrap() error        { return e.refusal }
func (e resultError) Is(target error) bool { return target == e.is }

// Result is a start with its result.
type Result struct {
	ID, Definition string
	Version        int
	Vars           map[string]any
	// Timeout bounds the wait, from the call's start.
	Timeout time.Duration
	// Stopping closes when the protocol stops.
	Stopping <-chan struct{}
	// Limit names the cap of waiting calls in ErrResultsFull's reason.
	Limit string
}

// StartInstanceWithResult starts instance r.ID (StartInstance) and answers
// once it completed, with its variables; the instance keeps running when
// the wait ends otherwise (ErrNoResultYet, ErrResultStopping, ctx).
func (u *UseCases) StartInstanceWithResult(ctx context.Context, conn Conn, r Result) (store.KeyedInstance, error) {
	e := u.deps.Ends
	if !e.reserve() {
		return store.KeyedInstance{}, resultError{fault.New(fault.APIBusy, "%d calls wait for an instance's end on this replica already (%s); retry later, or create without a result",
			e.max, r.Limit), ErrResultsFull}
	}
	defer e.release()
	// The clock starts with the call, so the start counts.
	deadline := time.NewTimer(r.Timeout)
	defer deadline.Stop()
	// Registered before the start, so no end is missed.
	w := &endWaiter{ended: make(chan struct{}, 1)}
	e.add(r.ID, w)
	defer e.remove(w)
	if err := u.StartInstance(ctx, conn, r.ID, r.Definition, r.Version, r.Vars); err != nil {
		return store.KeyedInstance{}, err
	}
	for {
		in, err := u.deps.Store.InstanceKeys(ctx, r.ID, true)
		if err != nil {
			return in, err
		}
		if !engine.Status(in.Status).Live() {
			if in.Status != string(engine.StatusCompleted) {
				return in, resultError{fault.New(fault.NotWaiting, "instance %d ended %s, not completed", in.Key, in.Status), ErrNotCompleted}
			}
			return in, nil
		}
		select {
		case <-w.ended:
		case <-deadline.C:
			return in, resultError{fault.New(fault.Unavailable, "instance %d has not completed within the request timeout of %s; it runs on",
				in.Key, r.Timeout), ErrNoResultYet}
		case <-r.Stopping:
			return in, resultError{fault.New(fault.Unavailable, "stopping; instance %d runs on", in.Key), ErrResultStopping}
		case <-ctx.Done():
			return in, ctx.Err()
		}
	}
}

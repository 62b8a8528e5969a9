// Package startstop is the one lifecycle shape of the worker's background
// components (after river's rivershared/startstop): Start(ctx) runs the
// component's loop in a goroutine it owns, Stop(ctx) stops it within the
// deadline ctx carries, and Started/Stopped are signals tests and the app can
// wait on.
//
// A stop has two phases. Stop first cancels the loop's soft context: stop
// taking new work and finish what is in hand. When ctx's deadline passes
// first, it cancels the hard context too: abandon what is in flight (steps
// release their claims and return). Either way it waits for the loop to
// return, at most Grace past the deadline, so that one shutdown deadline
// bounds the whole process however its components behave.
package startstop

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Service is the shape every background component has.
type Service interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// Grace is how long Stop waits, after its deadline has passed and the loop's
// hard context is cancelled, for the loop to return. Final writes of a
// component (a claim release, a lease hand-back) use this budget too.
const Grace = 2 * time.Second

// ErrStopped is the cancel cause of a planned stop, so a loop can tell it
// from a failure.
var ErrStopped = errors.New("stopped")

// ErrAbandoned reports a loop that did not return within Grace after its hard
// context was cancelled; its goroutine is left behind.
var ErrAbandoned = errors.New("did not return after its hard stop")

// Base runs one component's loop. The zero value is ready to use. Stop is
// safe before Start, twice, and concurrently.
type Base struct {
	mu      sync.Mutex
	name    string
	running bool
	soft    context.CancelCauseFunc
	hard    context.CancelCauseFunc
	started chan struct{}
	stopped chan struct{}
	stopErr error
	stopOne sync.Once
}

func (b *Base) init() {
	if b.started == nil {
		b.started, b.stopped = make(chan struct{}), make(chan struct{})
	}
}

// Started is closed once Start has handed the loop to its goroutine (not
// once the loop has begun: a component that must accept work when Start
// returns sets that up in Start itself, as lanes.Pool does).
func (b *Base) Started() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.init()
	return b.started
}

// Stopped is closed once the loop returned (or was abandoned), or at once
// when Stop ran before Start.
func (b *Base) Stopped() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.init()
	return b.stopped
}

// Run starts run in a new goroutine. soft is cancelled when Stop begins,
// hard when Stop's deadline passes; neither is cancelled with ctx (only Stop
// ends the loop), but both keep ctx's values.
func (b *Base) Run(ctx context.Context, name string, run func(soft, hard context.Context)) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.init()
	if b.running || b.soft != nil {
		return fmt.Errorf("%s: already started", name)
	}
	select {
	case <-b.stopped:
		return fmt.Errorf("%s: stopped before it started", name)
	default:
	}
	b.name, b.running = name, true
	hard, hardCancel := context.WithCancelCause(context.WithoutCancel(ctx))
	soft, softCancel := context.WithCancelCause(hard)
	b.soft, b.hard = softCancel, hardCancel
	close(b.started)
	done := b.stopped
	go func() {
		defer close(done)
		run(soft, hard)
	}()
	return nil
}

// Stop stops the loop: soft stop at once, hard stop at ctx's deadline (or
// cancellation), and returns once the loop returned. The error is nil for a
// clean stop, ctx's error when the hard stop was needed, and ErrAbandoned
// when even that did not end the loop within Grace.
func (b *Base) Stop(ctx context.Context) error {
	b.mu.Lock()
	b.init()
	soft, hard, running := b.soft, b.hard, b.running
	if !running {
		b.stopOne.Do(func() { close(b.stopped) })
		b.mu.Unlock()
		return nil
	}
	b.mu.Unlock()
	soft(ErrStopped)
	select {
	case <-b.stopped:
		hard(ErrStopped)
		return b.result(nil)
	case <-ctx.Done():
	}
	hard(ErrStopped)
	grace := time.NewTimer(Grace)
	defer grace.Stop()
	select {
	case <-b.stopped:
		return b.result(fmt.Errorf("%s: hard stop at the deadline: %w", b.name, ctx.Err()))
	case <-grace.C:
		return b.result(fmt.Errorf("%s: %w", b.name, ErrAbandoned))
	}
}

// result keeps the first Stop's outcome, so a second Stop reports it too.
func (b *Base) result(err error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopErr == nil {
		b.stopErr = err
	}
	return b.stopErr
}

// StopAllParallel stops services at once, each bounded by ctx, and joins
// their errors. Use it where the order of stopping does not matter.
func StopAllParallel(ctx context.Context, services ...Service) error {
	errs := make([]error, len(services))
	var wg sync.WaitGroup
	for i, s := range services {
		wg.Go(func() { errs[i] = s.Stop(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// FinalContext is the context of a component's final writes (a lease hand
// back, a claim release) on its way out: not cancelled by the stop, bounded
// by Grace.
func FinalContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), Grace)
}

// Package startstop is the one start/stop shape of the worker's background
// components that run a single loop: Start runs it in a goroutine the
// component owns; Stop cancels it and waits for it to return. Stop is safe
// before Start and twice.
package startstop

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// Loop runs one component's loop goroutine.
type Loop struct {
	started  atomic.Bool
	stopOnce sync.Once
	cancel   context.CancelFunc
	done     chan struct{}
}

// Start runs run in a new goroutine until Stop. The loop's context is not
// cancelled with ctx: only Stop ends it, so a component finishes its own
// shutdown work.
func (l *Loop) Start(ctx context.Context, name string, run func(ctx context.Context)) error {
	if !l.started.CompareAndSwap(false, true) {
		return errors.New(name + ": already started")
	}
	ctx, l.cancel = context.WithCancel(context.WithoutCancel(ctx))
	l.done = make(chan struct{})
	go func() {
		defer close(l.done)
		run(ctx)
	}()
	return nil
}

// Stop cancels the loop and waits for it to return.
func (l *Loop) Stop() {
	if !l.started.Load() {
		return
	}
	l.stopOnce.Do(func() {
		l.cancel()
		<-l.done
	})
}

// Package testsignal lets a component tell a test that something happened,
// so the test waits for the event instead of sleeping and counting (after
// river's rivershared/testsignal). A Signal that was never Init'ed is a
// no-op: production code pays one nil check.
package testsignal

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Timeout bounds WaitOrTimeout. Generous: CI is a loaded 2-core machine and
// a signal that never comes fails the test anyway.
const Timeout = 30 * time.Second

// Signal carries values of one kind of event from a component to a test.
type Signal[T any] struct {
	on     atomic.Bool
	mu     sync.Mutex
	queue  []T
	notify chan struct{}
}

// Init switches the signal on. Only tests call it.
func (s *Signal[T]) Init() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notify = make(chan struct{}, 1)
	s.on.Store(true)
}

// Signal records v if the signal is on. It never blocks.
func (s *Signal[T]) Signal(v T) {
	if !s.on.Load() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, v)
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// WaitOrTimeout returns the next value, failing the test after Timeout.
func (s *Signal[T]) WaitOrTimeout(t testing.TB) T {
	t.Helper()
	v, ok := s.Wait(Timeout)
	if !ok {
		t.Fatalf("testsignal: no signal within %s", Timeout)
	}
	return v
}

// Wait returns the next value, or false after timeout.
func (s *Signal[T]) Wait(timeout time.Duration) (T, bool) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		if !s.on.Load() {
			panic("testsignal: Wait on a signal that was not Init'ed")
		}
		s.mu.Lock()
		if len(s.queue) > 0 {
			v := s.queue[0]
			s.queue = s.queue[1:]
			s.mu.Unlock()
			return v, true
		}
		notify := s.notify
		s.mu.Unlock()
		select {
		case <-notify:
		case <-deadline.C:
			var zero T
			return zero, false
		}
	}
}

// Drain returns every value signalled and not yet taken.
func (s *Signal[T]) Drain() []T {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queue
	s.queue = nil
	return q
}

// Until waits until cond holds: it checks cond now and again after each
// value s carries (the event that may have made it true), taking those
// values, and fails the test if cond does not hold within Timeout. It is
// for a condition read elsewhere (a row, a counter) that the component
// signals when it may have changed.
func (s *Signal[T]) Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for !cond() {
		if _, ok := s.Wait(time.Until(deadline)); !ok {
			t.Fatalf("testsignal: %s: not within %s", what, Timeout)
		}
	}
}

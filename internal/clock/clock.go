// Package clock is the time a background component schedules by: the real
// one in production, a Fake that a test moves by hand so that it never
// sleeps waiting for a poll, a renewal or a sweep to come round.
//
// A component's clock decides only when it looks. What is due or stale is
// judged by the database's clock (due_at and claimed_at against now()), the
// one clock every replica shares; a test makes a row due or a claim old by
// writing it so, then advances the component's clock to make it look.
package clock

import (
	"sync"
	"time"

	"github.com/sutra-run/worker/internal/testsignal"
)

// Clock tells the time and sets timers.
type Clock interface {
	Now() time.Time
	// NewTimer is a timer that fires once, d from now.
	NewTimer(d time.Duration) Timer
	// AfterFunc calls f once d has passed, unless stop is called first
	// (time.AfterFunc). f must not block.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// Timer is a time.Timer of a Clock. As with time.Timer since Go 1.23, a
// Reset or Stop timer never delivers a tick from before it.
type Timer interface {
	C() <-chan time.Time
	Reset(d time.Duration)
	Stop()
}

// Real is the system's clock.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

func (realClock) AfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time   { return r.t.C }
func (r realTimer) Reset(d time.Duration) { r.t.Reset(d) }
func (r realTimer) Stop()                 { r.t.Stop() }

// Fake is a clock that moves only when Advance is called.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
	funcs  []*fakeFunc

	// Set carries the duration of every timer set (NewTimer or Reset): a
	// test waits on it to know that the component is waiting, then
	// advances past that duration. Inert unless Init'ed.
	Set testsignal.Signal[time.Duration]
}

// NewFake is a fake clock reading now.
func NewFake(now time.Time) *Fake { return &Fake{now: now} }

// Now is the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Advance moves the clock on by d, fires every timer due by then and calls
// every AfterFunc due by then (before it returns, in the order set).
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	for _, t := range f.timers {
		t.fireIfDue(f.now)
	}
	var due []func()
	kept := f.funcs[:0]
	for _, fn := range f.funcs {
		switch {
		case fn.stopped:
		case !fn.at.After(f.now):
			fn.stopped = true
			due = append(due, fn.f)
		default:
			kept = append(kept, fn)
		}
	}
	f.funcs = kept
	f.mu.Unlock()
	for _, call := range due {
		call()
	}
}

// fakeFunc is an AfterFunc of a Fake; stopped belongs to the clock's mu.
type fakeFunc struct {
	at      time.Time
	f       func()
	stopped bool
}

// AfterFunc calls f once the clock has reached d from now: at once when d
// is not positive, as time.AfterFunc does.
func (f *Fake) AfterFunc(d time.Duration, fn func()) func() bool {
	f.mu.Lock()
	ff := &fakeFunc{at: f.now.Add(d), f: fn}
	if d <= 0 {
		ff.stopped = true
	} else {
		f.funcs = append(f.funcs, ff)
	}
	f.mu.Unlock()
	f.Set.Signal(d)
	if d <= 0 {
		fn()
	}
	return func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		was := !ff.stopped
		ff.stopped = true
		return was
	}
}

// NewTimer sets a timer that fires once the clock has reached d from now.
func (f *Fake) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{clock: f, c: make(chan time.Time, 1)}
	f.mu.Lock()
	f.timers = append(f.timers, t)
	f.mu.Unlock()
	t.Reset(d)
	return t
}

type fakeTimer struct {
	clock *Fake
	c     chan time.Time
	// at and armed belong to clock.mu.
	at    time.Time
	armed bool
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Reset(d time.Duration) {
	f := t.clock
	f.mu.Lock()
	t.drain()
	t.at, t.armed = f.now.Add(d), true
	t.fireIfDue(f.now)
	f.mu.Unlock()
	f.Set.Signal(d)
}

func (t *fakeTimer) Stop() {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	t.armed = false
	t.drain()
}

// fireIfDue delivers the tick of an armed timer due by now (clock.mu held).
func (t *fakeTimer) fireIfDue(now time.Time) {
	if t.armed && !t.at.After(now) {
		t.armed = false
		t.c <- now // room: a timer is drained whenever it is armed
	}
}

func (t *fakeTimer) drain() {
	select {
	case <-t.c:
	default:
	}
}

package usecase

import (
	"context"
	"time"

	"github.com/sutra-run/worker/api/taskwait"
	"github.com/sutra-run/worker/store"
)

// JobHolderPrefix marks the lock of a job a Camunda 8 worker activated,
// over the Zeebe gateway or /v2 alike: "zeebe:<worker>". A job activated
// by one may be completed by the other, as in Camunda; an /engine-rest
// worker's lock refuses a Camunda 8 outcome, and the other way round.
const JobHolderPrefix = "zeebe:"

// DefaultJobLongPoll is how long a job activation that names no request
// timeout waits for jobs, as Camunda's gateway (its long-polling timeout).
const DefaultJobLongPoll = 10 * time.Second

// fetchTimeout bounds one fetch statement.
const fetchTimeout = 30 * time.Second

// Activation is one fetch of tasks for a worker: an /engine-rest
// fetchAndLock (maybe a long poll), a Zeebe ActivateJobs long poll, or a
// Zeebe job stream.
type Activation struct {
	// Protocol labels the activation metrics (taskwait.EngineRest,
	// taskwait.Zeebe).
	Protocol string
	// Worker holds the lock of every task locked.
	Worker     string
	Asks       []store.TopicLock
	Max        int
	ByPriority bool
	// Wait is how long a long poll waits for tasks; 0: one fetch, no wait.
	Wait time.Duration
	// Stream makes the activation deliver every batch it locks, waiting
	// again after each, until ctx ends or Stopping closes.
	Stream bool
	// Slots cap the waiters of the activation's protocol. Full decides
	// what an activation that finds them all taken does: nil, one fetch
	// with no wait; an error, refused with it.
	Slots *taskwait.Slots
	Full  func() error
	// Stopping closes when the protocol stops: a long poll answers what it
	// has (nothing), a stream ends.
	Stopping <-chan struct{}
	// Conn holds the call's database connection around each fetch and
	// gives it back while the activation waits.
	Conn Conn
	// Waiting, when set, hears each time the activation starts to wait
	// (tests' signals).
	Waiting func(w *taskwait.Waiter)
}

// Activate is the one wait for tasks and jobs, whatever the protocol: it
// locks up to a.Max tasks of a.Asks and hands them to deliver; a long poll
// that finds none waits up to a.Wait for a wake-up (a task created on this
// replica, or the waiters' look) and fetches again, holding no database
// connection meanwhile; a stream delivers each batch and waits again.
//
// A long poll calls deliver once (with nothing at its deadline or when the
// protocol stops) and returns its error; ctx ending returns ctx's error. A
// stream returns nil when ctx ends or the protocol stops, or the first
// error of a fetch or of deliver (the tasks it had locked stay locked until
// their timeout, as in Zeebe).
//
// The pass-on rule (taskwait.Waiters): a waiter that used a wake-up and
// then failed, or filled a fetch over several topics (it may have taken
// another topic's task in place of the one it was woken for), passes the
// wake-up on when it leaves; a stream, which takes one batch at a time,
// passes one on after every batch it delivers, so that a backlog spreads
// over the workers of its type instead of queueing behind the first.
func (u *UseCases) Activate(ctx context.Context, a Activation, deliver func([]store.LockedTask) error) error {
	if !a.Stream && (a.Max == 0 || len(a.Asks) == 0) {
		return deliver(nil)
	}
	var w *taskwait.Waiter
	passOn := false
	if a.Stream || a.Wait > 0 {
		// Registered before the first fetch: a task created between that
		// fetch and the wait still wakes it (no lost wake-up).
		if w = u.deps.Waiters.Add(a.Asks, a.Max, a.Slots); w == nil {
			if err := a.Full(); err != nil || a.Stream {
				return err // a stream that may not wait ends
			}
		} else {
			defer func() { u.deps.Waiters.Remove(w, passOn) }()
		}
	}
	var deadline <-chan time.Time
	if !a.Stream && w != nil {
		t := time.NewTimer(a.Wait)
		defer t.Stop()
		deadline = t.C
	}
	for woken := false; ; {
		got, err := u.lock(ctx, a, w)
		if err == nil && (a.Stream && len(got) > 0 || !a.Stream && (len(got) > 0 || w == nil)) {
			err = deliver(got)
			if err == nil && !a.Stream {
				passOn = woken && len(a.Asks) > 1 && len(got) == a.Max
				return nil
			}
		}
		if err != nil {
			passOn = woken || a.Stream
			return err
		}
		a.Conn.idle()
		// A stream's batch: the rest of the backlog is another waiter's; a
		// batch handed to it left nothing behind (the tasks created with it
		// that no waiter had room for are handed on as waiters make room:
		// taskwait.Waiters.FetchAndLock).
		if len(got) > 0 && !w.TookHanded() {
			for _, ask := range a.Asks {
				u.deps.Waiters.PassOn(ask.Topic)
			}
		} else if a.Waiting != nil {
			a.Waiting(w)
		}
		select {
		case <-w.Wake():
			woken = true
		case <-deadline:
			return deliver(nil)
		case <-a.Stopping:
			if a.Stream {
				return nil
			}
			return deliver(nil)
		case <-ctx.Done():
			if a.Stream {
				return nil
			}
			return ctx.Err()
		}
	}
}

// lock runs one fetch statement for a, with one of the call's connections,
// for the tasks handed to w when it was handed some (nil: no wait), and
// counts what it locked.
func (u *UseCases) lock(ctx context.Context, a Activation, w *taskwait.Waiter) ([]store.LockedTask, error) {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	release, err := a.Conn.use(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	got, err := u.deps.Waiters.FetchAndLock(ctx, w, a.Worker, a.Asks, a.Max, a.ByPriority)
	if err != nil {
		return nil, err
	}
	for _, t := range got {
		taskwait.Locked(u.deps.Metrics, a.Protocol, t)
	}
	return got, nil
}

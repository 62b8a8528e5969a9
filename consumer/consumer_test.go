package consumer_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/sutra-run/worker/broker"
	"github.com/sutra-run/worker/consumer"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/lanes"
	"github.com/sutra-run/worker/metrics"
	"github.com/sutra-run/worker/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// lanesFunc is a Dispatcher that answers every relay at once from a script.
type lanesFunc func(r lanes.Resume, attempt int) lanes.Result

type scripted struct {
	answer   lanesFunc
	mu       sync.Mutex
	attempts map[string]int
}

func (s *scripted) Dispatch(r lanes.Resume) {
	s.mu.Lock()
	s.attempts[r.InboxID()]++
	n := s.attempts[r.InboxID()]
	s.mu.Unlock()
	go func() { r.Done(s.answer(r, n)) }() // a lane answers from its own goroutine
}

// start runs a consumer on the test's queues with answer as its lanes.
func start(t *testing.T, answer lanesFunc, tweak func(*consumer.Config)) (*consumer.Consumer, *testkit.Publisher) {
	t.Helper()
	env := testkit.New(t)
	pub := env.Publisher(t)
	return startOn(t, env, &scripted{answer: answer, attempts: map[string]int{}}, tweak), pub
}

// startOn runs a consumer on env's queues and database with ls as its lanes.
func startOn(t *testing.T, env *testkit.Env, ls *scripted, tweak func(*consumer.Config)) *consumer.Consumer {
	t.Helper()
	c := env.Config
	st, err := store.Open(testkit.Ctx(t), c.DatabaseURL, store.Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close) // after the consumer's stop
	owner := broker.New(testkit.Logger(t), broker.Config{URL: c.AMQPURL, Topology: broker.Topology{
		RelayExchange: c.RelayExchange, RelayQueue: c.RelayQueue, DeadExchange: c.DeadExchange, DeadQueue: c.DeadQueue,
	}})
	if err := owner.Start(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // after the consumer's (cleanups run last in, first out)
		if err := owner.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	cfg := consumer.Config{
		Queue: c.RelayQueue, DeadExchange: c.DeadExchange,
		RequeueBackoff: time.Millisecond, RequeueBackoffMax: 20 * time.Millisecond, MaxRetries: 5,
	}
	if tweak != nil {
		tweak(&cfg)
	}
	cons := consumer.New(consumer.Deps{
		Broker: owner, Lanes: ls, Attempts: st,
		Metrics: metrics.New(prometheus.NewRegistry()), Logger: testkit.Logger(t),
	}, cfg)
	cons.TestSignals.Init()
	if err := cons.Start(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := cons.Stop(ctx); err != nil {
			t.Error(err)
		}
	})
	return cons
}

func relay(id string) testkit.Relay {
	return testkit.Relay{MessageID: id, Body: map[string]any{"instance_id": "i-1", "message": "m"}}
}

func TestTransientFailuresOfOneRelayAreCappedThenItIsDeadLettered(t *testing.T) {
	t.Parallel()
	cons, pub := start(t, func(lanes.Resume, int) lanes.Result {
		return lanes.Result{Kind: lanes.Retry, Code: fault.Transient, Reason: lanes.ReasonTransient, Err: fault.New(fault.Transient, "deadlock detected")}
	}, nil)
	pub.Publish(relay("r-1"))
	for n := 1; n < 5; n++ {
		if rq := cons.TestSignals.Requeued.WaitOrTimeout(t); rq.MessageID != "r-1" || rq.Bounce != n {
			t.Fatalf("requeue %d = %+v", n, rq)
		}
	}
	dl := cons.TestSignals.DeadLettered.WaitOrTimeout(t)
	if dl.MessageID != "r-1" || dl.Code != fault.RetriesExhausted {
		t.Fatalf("dead letter = %+v, want r-1 with %s after 5 failures", dl, fault.RetriesExhausted)
	}
	dead := pub.DeadLetters(1, 10*time.Second)
	if len(dead) != 1 || dead[0].Code != fault.RetriesExhausted || dead[0].Reason == "" {
		t.Fatalf("dead-letter queue holds %+v", dead)
	}
}

func TestTheRetryCapCountsTheFailuresOfEveryReplica(t *testing.T) {
	t.Parallel()
	const maxRetries = 6
	env := testkit.New(t)
	pub := env.Publisher(t)
	// Two replicas' consumers on one queue and one database: the relay
	// bounces between them, each failure counted where the other sees it.
	ls := &scripted{attempts: map[string]int{}, answer: func(lanes.Resume, int) lanes.Result {
		return lanes.Result{Kind: lanes.Retry, Code: fault.Transient, Reason: lanes.ReasonTransient, Err: fault.New(fault.Transient, "deadlock detected")}
	}}
	capped := func(c *consumer.Config) { c.MaxRetries = maxRetries }
	a, b := startOn(t, env, ls, capped), startOn(t, env, ls, capped)
	pub.Publish(relay("r-1"))
	dead := pub.DeadLetters(1, 30*time.Second)
	if len(dead) != 1 || dead[0].Code != fault.RetriesExhausted {
		t.Fatalf("dead-letter queue holds %+v", dead)
	}
	ls.mu.Lock()
	failed := ls.attempts["r-1"]
	ls.mu.Unlock()
	if failed != maxRetries {
		t.Fatalf("the relay failed %d times before its dead letter, want the cap (%d) over both replicas", failed, maxRetries)
	}
	requeued := len(a.TestSignals.Requeued.Drain()) + len(b.TestSignals.Requeued.Drain())
	if requeued != maxRetries-1 {
		t.Errorf("%d requeues, want %d", requeued, maxRetries-1)
	}
	// The count goes with the dead letter (written before its ack, which a
	// stop waits for): the message published again starts afresh.
	for _, c := range []*consumer.Consumer{a, b} {
		if err := c.Stop(testkit.Ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	if n := env.Int(t, "SELECT count(*) FROM relay_attempts"); n != 0 {
		t.Errorf("%d failure counts left after the dead letter", n)
	}
}

func TestClaimRefusalsFencesAndOutagesAreNeverCapped(t *testing.T) {
	t.Parallel()
	reasons := []string{lanes.ReasonClaimHeld, lanes.ReasonFenced, lanes.ReasonUnavailable, lanes.ReasonShutdown, lanes.ReasonLaneFull}
	const tries = 20 // four times the cap
	cons, pub := start(t, func(r lanes.Resume, n int) lanes.Result {
		if n > tries {
			return lanes.Result{Kind: lanes.Applied}
		}
		if reason := reasons[n%len(reasons)]; reason != lanes.ReasonClaimHeld {
			return lanes.Result{Kind: lanes.Retry, Code: fault.Unavailable, Reason: reason}
		}
		return lanes.Result{Kind: lanes.Refused, Code: fault.ClaimHeld, Reason: lanes.ReasonClaimHeld}
	}, nil)
	pub.Publish(relay("r-1"))
	for n := 1; n <= tries; n++ {
		if rq := cons.TestSignals.Requeued.WaitOrTimeout(t); rq.Bounce != n {
			t.Fatalf("requeue %d = %+v", n, rq)
		}
	}
	if id := cons.TestSignals.Acked.WaitOrTimeout(t); id != "r-1" {
		t.Fatalf("acked %q", id)
	}
	if dl := cons.TestSignals.DeadLettered.Drain(); len(dl) != 0 {
		t.Fatalf("dead-lettered %+v: a relay that was only refused was capped", dl)
	}
}

func TestRequeueDelayDoublesPerBounceUpToItsCap(t *testing.T) {
	t.Parallel()
	const base, limit = 10 * time.Millisecond, 100 * time.Millisecond
	cons, pub := start(t, func(r lanes.Resume, n int) lanes.Result {
		if n > 8 {
			return lanes.Result{Kind: lanes.Applied}
		}
		return lanes.Result{Kind: lanes.Refused, Code: fault.ClaimHeld, Reason: lanes.ReasonClaimHeld}
	}, func(c *consumer.Config) { c.RequeueBackoff, c.RequeueBackoffMax = base, limit })
	pub.Publish(relay("r-1"))
	for n := 1; n <= 8; n++ {
		rq := cons.TestSignals.Requeued.WaitOrTimeout(t)
		want := min(base<<(n-1), limit)
		// ±20% jitter around the doubled delay.
		if lo, hi := want*8/10, want*12/10; rq.Bounce != n || rq.Delay < lo || rq.Delay > hi {
			t.Errorf("bounce %d: %+v, want a delay in [%s, %s]", n, rq, lo, hi)
		}
	}
}

package app_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/internal/testkit/apptest"
	"github.com/sutra-run/worker/internal/testsignal"
	"github.com/sutra-run/worker/lanes"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// bundle is one test's worker on its own schema and queues.
type bundle struct {
	env *testkit.Env
	// cfg is the worker's configuration; start starts one on it.
	cfg app.Config
	pub *testkit.Publisher
	reg *prometheus.Registry
	w   *app.Worker
}

func setup(t *testing.T, hooks *lanes.Hooks, tweak func(*app.Config)) *bundle {
	t.Helper()
	env := testkit.New(t)
	env.Deploy(t, "../examples/order.bpmn")
	b := &bundle{env: env, pub: env.Publisher(t), cfg: apptest.Config(env)}
	if tweak != nil {
		tweak(&b.cfg)
	}
	b.start(t, hooks)
	return b
}

func (b *bundle) start(t *testing.T, hooks *lanes.Hooks) {
	t.Helper()
	b.reg = prometheus.NewRegistry()
	w, err := app.Start(testkit.Ctx(t), b.cfg, app.Options{Logger: testkit.Logger(t), Registry: b.reg, Hooks: hooks})
	if err != nil {
		t.Fatalf("starting worker: %v", err)
	}
	b.w = w
	t.Cleanup(func() { b.stop(t, w) })
	// The waits below wake on what the components did.
	w.Lanes().TestSignals.Committed.Init()
	w.Lanes().TestSignals.Queued.Init()
	c := &w.Consumer().TestSignals
	c.Acked.Init()
	c.DeadLettered.Init()
	c.Requeued.Init()
	w.Timers().TestSignals.Init()
	w.Sweeper().TestSignals.Init()
	w.Outbox().TestSignals.Init()
	waitReady(t, w)
}

// waitReady waits until w is ready. Ready gives the database a second to
// answer its ping, which a loaded machine may miss once: a test that needs
// a ready worker waits for it rather than race that deadline.
func waitReady(t *testing.T, w *app.Worker) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for err := w.Ready(context.Background()); err != nil; err = w.Ready(context.Background()) {
		if time.Now().After(deadline) {
			t.Fatalf("the worker is not ready 30s after its start: %v (%v)", err, errors.Unwrap(err))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop stops w within its shutdown timeout.
func (b *bundle) stop(t *testing.T, w *app.Worker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.ShutdownTimeout)
	defer cancel()
	if err := w.Stop(ctx); err != nil {
		t.Logf("stopping the worker: %v", err)
	}
}

// family finds a metric family of this bundle's registry by name.
func (b *bundle) family(t *testing.T, name string) *dto.MetricFamily {
	t.Helper()
	mfs, err := b.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf
		}
	}
	return nil
}

// counter reads a counter by name and label ("" for an unlabelled one).
func (b *bundle) counter(t *testing.T, name, label, value string) float64 {
	t.Helper()
	for _, m := range b.family(t, name).GetMetric() {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == label && lp.GetValue() == value {
				return m.GetCounter().GetValue()
			}
		}
		if label == "" {
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// waitCounter waits for an unlabelled counter to reach want, woken by the
// component that counts it: components count an outcome just after the
// commit that a test observes in the database.
func (b *bundle) waitCounter(t *testing.T, name string, want float64) {
	t.Helper()
	what := fmt.Sprintf("%s = %v", name, want)
	reached := func() bool { return b.counter(t, name, "", "") == want }
	switch name {
	case "sutra_timers_fired_total":
		b.w.Timers().TestSignals.Answered.Until(t, what, reached)
	case "sutra_inbox_trimmed_total", "sutra_buffered_expired_total":
		// Signalled as the next sweep begins, after this one counted.
		b.w.Sweeper().TestSignals.Swept.Until(t, what, reached)
	case "sutra_outbox_published_total":
		b.w.Outbox().TestSignals.Settled.Until(t, what, reached)
	case "sutra_buffered_consumed_total":
		b.w.Lanes().TestSignals.Committed.Until(t, what, reached)
	default:
		t.Fatalf("waitCounter: no signal known to wake a wait for %s", name)
	}
}

func (b *bundle) relays(t *testing.T, outcome string) float64 {
	return b.counter(t, "sutra_relays_total", "outcome", outcome)
}

// waitRelays waits until n relays had outcome, woken by the consumer's
// acks, dead letters or requeues.
func (b *bundle) waitRelays(t *testing.T, outcome string, n float64) {
	t.Helper()
	what := fmt.Sprintf("%v relays %s", n, outcome)
	reached := func() bool { return b.relays(t, outcome) == n }
	switch s := &b.w.Consumer().TestSignals; outcome {
	case "dead_lettered":
		s.DeadLettered.Until(t, what, reached)
	case "requeued":
		s.Requeued.Until(t, what, reached)
	default:
		s.Acked.Until(t, what, reached)
	}
}

// waitCommitted waits until cond holds, checking it after each step this
// worker commits.
func (b *bundle) waitCommitted(t *testing.T, what string, cond func() bool) {
	t.Helper()
	b.w.Lanes().TestSignals.Committed.Until(t, what, cond)
}

func (b *bundle) version(t *testing.T, id string) int64 {
	return b.env.Int(t, "SELECT COALESCE((SELECT version FROM instances WHERE id = $1), -1)", id)
}

func (b *bundle) waitVersion(t *testing.T, id string, v int64) {
	t.Helper()
	b.waitCommitted(t, fmt.Sprintf("instance %s at version %d", id, v), func() bool { return b.version(t, id) == v })
}

func start(id string) testkit.Relay {
	return testkit.Relay{MessageID: "start-" + id, Body: map[string]any{
		"start": "order", "instance_id": id, "variables": map[string]any{"orderId": id},
	}}
}

func paid(id string) testkit.Relay {
	return testkit.Relay{MessageID: "paid-" + id, Body: map[string]any{
		"instance_id": id, "message": "payment-received", "variables": map[string]any{"amount": 42},
	}}
}

func shippedByKey(id string) testkit.Relay {
	return testkit.Relay{MessageID: "shipped-" + id, Body: map[string]any{
		"message": "order-shipped", "correlation_key": id,
	}}
}

func TestRelayAdvancesItsInstanceExactlyOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	b.pub.Publish(start("o-1"))
	b.waitVersion(t, "o-1", 1)
	b.pub.Publish(paid("o-1"))
	b.waitVersion(t, "o-1", 2)
	b.pub.Publish(shippedByKey("o-1"))
	b.waitVersion(t, "o-1", 3)
	if got := b.env.Int(t, "SELECT count(*) FROM instances WHERE id = 'o-1' AND status = 'completed' AND NOT EXISTS (SELECT 1 FROM claims WHERE instance_id = 'o-1')"); got != 1 {
		t.Fatalf("instance not completed and released")
	}
	if n := b.env.Int(t, "SELECT count(*) FROM subscriptions"); n != 0 {
		t.Errorf("%d subscriptions left open after completion", n)
	}
	b.waitRelays(t, "committed", 3)
	b.env.AssertNoOverlap(t, false)
}

func TestSameMessageIDTwiceIsOneStepAndTwoAcks(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	b.pub.Publish(start("o-1"))
	b.waitVersion(t, "o-1", 1)
	b.pub.Publish(paid("o-1"), paid("o-1"))
	b.waitRelays(t, "committed", 2)
	b.waitRelays(t, "duplicate", 1)
	if v := b.version(t, "o-1"); v != 2 {
		t.Fatalf("version = %d, want 2 (one step per message id)", v)
	}
	if n := b.pub.QueueDepth(b.env.Config.RelayQueue); n != 0 {
		t.Fatalf("%d relays left in the queue: a duplicate was not acked", n)
	}
}

func TestRedeliveryAfterCrashBeforeAckIsRecognisedAsDuplicate(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	env.Deploy(t, "../examples/order.bpmn")
	b := &bundle{env: env, pub: env.Publisher(t), cfg: apptest.Config(env)}
	b.cfg.ShutdownTimeout = 300 * time.Millisecond
	// The first worker commits the start and "crashes" before its ack: the
	// outcome is answered only once the stop has closed the connection, so
	// the relay is never acked.
	var w atomic.Pointer[app.Worker]
	b.start(t, &lanes.Hooks{AfterCommit: func(ctx context.Context, _ int, r *lanes.Resume) {
		<-ctx.Done()
		for w.Load().Consumer().Connected() {
			time.Sleep(time.Millisecond)
		}
	}})
	w.Store(b.w)
	b.pub.Publish(start("o-1"))
	b.w.Lanes().TestSignals.Committed.WaitOrTimeout(t) // the start committed
	b.stop(t, b.w)
	b.start(t, nil)
	b.waitRelays(t, "duplicate", 1)
	if v := b.version(t, "o-1"); v != 1 {
		t.Fatalf("version = %d, want 1", v)
	}
	b.env.AssertNoClaimsHeld(t)
}

func TestMisroutedRelayBouncesOffTheClaimAndAppliesLaterOnce(t *testing.T) {
	t.Parallel()
	var pool atomic.Pointer[lanes.Pool]
	hold := make(chan struct{})
	var holding atomic.Bool
	var held testsignal.Signal[struct{}]
	held.Init()
	hooks := &lanes.Hooks{
		// Force the shipment relay onto a lane other than the instance's own.
		Route: func(r *lanes.Resume) int {
			if r.InboxID() == "shipped-o-1" {
				return (pool.Load().Lane("o-1") + 1) % pool.Load().Lanes()
			}
			return -1
		},
		BeforeCommit: func(ctx context.Context, _ int, r *lanes.Resume) {
			if r.InboxID() == "paid-o-1" && holding.CompareAndSwap(false, true) {
				held.Signal(struct{}{})
				select {
				case <-hold:
				case <-ctx.Done(): // the test failed and the worker is stopping
				}
			}
		},
	}
	b := setup(t, hooks, nil)
	pool.Store(b.w.Lanes())
	var once sync.Once
	release := func() { once.Do(func() { close(hold) }) }
	t.Cleanup(release) // runs before the worker's Stop (cleanups run last-in first-out)
	b.pub.Publish(start("o-1"))
	b.waitVersion(t, "o-1", 1)
	b.pub.Publish(paid("o-1"))
	held.WaitOrTimeout(t) // the payment step held mid-step
	b.pub.Publish(testkit.Relay{MessageID: "shipped-o-1", Body: map[string]any{"instance_id": "o-1", "message": "order-shipped"}})
	b.w.Consumer().TestSignals.Requeued.Until(t, "bounces on the relay path", func() bool {
		return b.counter(t, "sutra_claim_bounces_total", "path", "relay") >= 2
	})
	if v := b.version(t, "o-1"); v != 1 {
		t.Fatalf("version moved to %d while the first step was held", v)
	}
	release()
	b.waitVersion(t, "o-1", 3)
	if b.relays(t, "requeued") < 2 || b.counter(t, "sutra_relay_requeues_total", "reason", "claim_held") < 2 {
		t.Errorf("bounced relay was not nack-requeued")
	}
	b.waitRelays(t, "committed", 3)
	b.env.AssertNoOverlap(t, false)
	// The step counter went 0→1→2→3, each step committed by the owner that claimed it.
	owners := b.env.Committers(t, "o-1")
	if len(owners) != 3 || owners[1] == owners[2] {
		t.Errorf("commits by %v: want start, then the held lane, then the mis-routed lane", owners)
	}
}

func TestFencedCommitRollsBackAndTheRelayIsAppliedOnceLater(t *testing.T) {
	t.Parallel()
	var env atomic.Pointer[testkit.Env]
	var swept atomic.Bool
	hooks := &lanes.Hooks{BeforeCommit: func(ctx context.Context, _ int, r *lanes.Resume) {
		if r.InboxID() == "paid-o-1" && swept.CompareAndSwap(false, true) {
			// Simulate the sweep clearing the claim under the running step.
			if _, err := env.Load().DB.Exec(ctx, "DELETE FROM claims WHERE instance_id = 'o-1'"); err != nil {
				panic(err)
			}
		}
	}}
	b := setup(t, hooks, nil)
	env.Store(b.env)
	b.pub.Publish(start("o-1"))
	b.waitVersion(t, "o-1", 1)
	b.pub.Publish(paid("o-1"))
	b.waitVersion(t, "o-1", 2)
	if got := b.counter(t, "sutra_steps_fenced_total", "", ""); got != 1 {
		t.Errorf("steps fenced = %v, want 1", got)
	}
	if got := b.counter(t, "sutra_relay_requeues_total", "reason", "fenced"); got != 1 {
		t.Errorf("fenced requeues = %v, want 1", got)
	}
	if n := b.env.Int(t, "SELECT count(*) FROM inbox WHERE message_id = 'paid-o-1'"); n != 1 {
		t.Errorf("inbox rows = %d, want 1", n)
	}
	// The fenced attempt wrote nothing: exactly one subscription (the receive task's).
	if n := b.env.Int(t, "SELECT count(*) FROM subscriptions WHERE instance_id = 'o-1'"); n != 1 {
		t.Errorf("subscriptions = %d, want 1", n)
	}
	b.env.AssertNoClaimsHeld(t)
}

func TestPanicInStepReleasesDeadLettersAndTheLaneGoesOn(t *testing.T) {
	t.Parallel()
	hooks := &lanes.Hooks{BeforeCommit: func(ctx context.Context, _ int, r *lanes.Resume) {
		if r.InboxID() == "paid-o-1" {
			panic("boom")
		}
	}}
	b := setup(t, hooks, func(c *app.Config) { c.Lanes.Count = 1 })
	b.pub.Publish(start("o-1"), start("o-2"))
	b.waitVersion(t, "o-1", 1)
	b.waitVersion(t, "o-2", 1)
	b.pub.Publish(paid("o-1"), paid("o-2"))
	dead := b.pub.DeadLetters(1, 10*time.Second)
	if len(dead) != 1 || dead[0].Code != fault.StepPanic || dead[0].MessageID != "paid-o-1" {
		t.Fatalf("dead letters = %+v, want paid-o-1 with %s", dead, fault.StepPanic)
	}
	b.waitVersion(t, "o-2", 2) // the same (only) lane runs the next relay
	if v := b.version(t, "o-1"); v != 1 {
		t.Errorf("panicked step changed the instance: version %d", v)
	}
	b.env.AssertNoClaimsHeld(t)
	if got := b.counter(t, "sutra_lane_panics_total", "", ""); got != 1 {
		t.Errorf("lane panics = %v", got)
	}
}

func TestEachPoisonRelayIsDeadLetteredWithItsCodeAndNeverRetried(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	b.pub.Publish(start("o-1"))
	b.waitVersion(t, "o-1", 1)
	cases := []struct {
		relay testkit.Relay
		code  string
	}{
		{testkit.Relay{MessageID: "bad-json", Body: []byte("{not json")}, fault.RelayInvalid},
		{testkit.Relay{MessageID: "", Body: map[string]any{"instance_id": "o-1", "message": "payment-received"}}, fault.RelayInvalid},
		{testkit.Relay{MessageID: "no-form", Body: map[string]any{"variables": map[string]any{}}}, fault.RelayInvalid},
		{testkit.Relay{MessageID: "unknown-def", Body: map[string]any{"start": "no-such-process"}}, fault.UnknownDefinition},
		{testkit.Relay{MessageID: "unknown-inst", Body: map[string]any{"instance_id": "nope", "message": "payment-received"}}, fault.NotFound},
		{testkit.Relay{MessageID: "not-waiting", Body: map[string]any{"instance_id": "o-1", "message": "order-shipped"}}, fault.NotWaiting},
		{testkit.Relay{MessageID: "uncorrelated", Body: map[string]any{"message": "payment-received", "correlation_key": "nobody"}}, fault.RelayUncorrelated},
		{testkit.Relay{MessageID: "exists", Body: map[string]any{"start": "order", "instance_id": "o-1"}}, fault.InstanceExists},
	}
	want := map[string]string{}
	for _, c := range cases {
		b.pub.Publish(c.relay)
		want[c.relay.MessageID] = c.code
	}
	dead := b.pub.DeadLetters(len(cases), 15*time.Second)
	got := map[string]string{}
	for _, d := range dead {
		got[d.MessageID] = d.Code
		if d.Reason == "" {
			t.Errorf("dead letter %q has no reason", d.MessageID)
		}
	}
	for id, code := range want {
		if got[id] != code {
			t.Errorf("relay %q: dead-letter code %q, want %q", id, got[id], code)
		}
	}
	if r := b.relays(t, "requeued"); r != 0 {
		t.Errorf("%v poison relays were requeued", r)
	}
	if v := b.version(t, "o-1"); v != 1 {
		t.Errorf("poison changed the instance: version %d", v)
	}
	if n := b.pub.QueueDepth(b.env.Config.RelayQueue); n != 0 {
		t.Errorf("%d relays left on the relay queue", n)
	}
}

func TestStoppingMidLoadLosesNothingAndLeavesNoClaim(t *testing.T) {
	t.Parallel()
	const n = 300
	var slow atomic.Int64
	hooks := &lanes.Hooks{BeforeCommit: func(ctx context.Context, _ int, r *lanes.Resume) {
		if slow.Add(1)%10 == 0 {
			time.Sleep(5 * time.Millisecond)
		}
	}}
	b := setup(t, hooks, nil)
	var batch []testkit.Relay
	for i := range n {
		batch = append(batch, start(fmt.Sprintf("o-%d", i)))
	}
	b.pub.Publish(batch...)
	b.w.Consumer().TestSignals.Acked.Until(t, "some progress", func() bool { return b.relays(t, "committed") >= 30 })
	b.stop(t, b.w)
	b.env.AssertNoClaimsHeld(t)
	b.start(t, nil)
	b.waitCommitted(t, "every start applied", func() bool {
		return b.env.Int(t, "SELECT count(*) FROM instances WHERE version = 1") == n
	})
	b.w.Consumer().TestSignals.Acked.Until(t, "queue empty", func() bool { return b.pub.QueueDepth(b.env.Config.RelayQueue) == 0 })
	b.env.AssertNoClaimsHeld(t)
	b.env.AssertNoOverlap(t, false)
	if n := b.env.Int(t, "SELECT count(*) FROM inbox"); n != int64(len(batch)) {
		t.Errorf("inbox has %d rows, want %d", n, len(batch))
	}
}

func TestRefusedRelayBacksOffUntilTheClaimIsFreeThenAppliesOnce(t *testing.T) {
	t.Parallel()
	const base, limit = 20 * time.Millisecond, 200 * time.Millisecond
	b := setup(t, nil, func(c *app.Config) { c.RequeueBackoff, c.RequeueBackoffMax = base, limit })
	b.w.Consumer().TestSignals.Init()
	b.pub.Publish(start("o-1"))
	b.waitVersion(t, "o-1", 1)
	// Another owner holds the claim.
	if _, err := b.env.DB.Exec(testkit.Ctx(t), "INSERT INTO claims (instance_id, owner, claimed_at) VALUES ('o-1', 'elsewhere/lane/0', now()) ON CONFLICT (instance_id) DO UPDATE SET owner = EXCLUDED.owner, claimed_at = EXCLUDED.claimed_at"); err != nil {
		t.Fatal(err)
	}
	b.pub.Publish(paid("o-1"))
	// Each bounce of the relay waits twice as long as the one before (±20%
	// jitter), up to the cap: a held claim costs a handful of redeliveries.
	for n := 1; n <= 6; n++ {
		rq := b.w.Consumer().TestSignals.Requeued.WaitOrTimeout(t)
		if rq.MessageID != "start-o-1" && (rq.MessageID != "paid-o-1" || rq.Reason != "claim_held" || rq.Bounce != n) {
			t.Fatalf("requeue %d = %+v", n, rq)
		}
		want := min(base<<(n-1), limit)
		if rq.Delay < want*8/10 || rq.Delay > want*12/10 {
			t.Errorf("bounce %d waits %s, want %s ±20%%", n, rq.Delay, want)
		}
	}
	if v := b.version(t, "o-1"); v != 1 {
		t.Fatalf("version moved to %d while the claim was held", v)
	}
	if _, err := b.env.DB.Exec(testkit.Ctx(t), "DELETE FROM claims WHERE instance_id = 'o-1'"); err != nil {
		t.Fatal(err)
	}
	b.waitVersion(t, "o-1", 2)
	if got := b.counter(t, "sutra_claim_bounces_total", "path", "relay"); got < 6 {
		t.Errorf("bounces = %v, want every refusal counted", got)
	}
}

func TestConsumerRecoversFromALostConnectionAndLeaksNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	b.pub.Publish(start("o-1"))
	b.waitVersion(t, "o-1", 1)
	testkit.CloseBrokerConnection(t, "sutra-worker/"+b.cfg.ReplicaID)
	b.pub.Publish(paid("o-1"))
	b.waitVersion(t, "o-1", 2)
	// Consuming again, on a new connection: ready.
	if err := b.w.Ready(context.Background()); err != nil {
		t.Errorf("not ready once consuming again: %v", err)
	}
	// TestMain's goleak check covers the goroutines of the closed connection.
}

func TestRelayThatTheDatabaseCanNeverStoreIsDeadLetteredNotRetried(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	b.pub.Publish(start("o-1"))
	b.waitVersion(t, "o-1", 1)
	// Valid JSON, but jsonb refuses a NUL character (SQLSTATE 22P05): no
	// number of retries can ever store it.
	b.pub.Publish(testkit.Relay{MessageID: "nul-o-1", Body: map[string]any{
		"instance_id": "o-1", "message": "payment-received", "variables": map[string]any{"note": "a\x00b"},
	}})
	dead := b.pub.DeadLetters(1, 15*time.Second)
	if len(dead) != 1 || dead[0].MessageID != "nul-o-1" || dead[0].Code != fault.StepFailed {
		t.Fatalf("dead letters = %+v, want nul-o-1 with %s", dead, fault.StepFailed)
	}
	if !strings.Contains(dead[0].Reason, "22P05") {
		t.Errorf("reason %q does not say why", dead[0].Reason)
	}
	if r := b.relays(t, "requeued"); r != 0 {
		t.Errorf("the relay was requeued %v times: a permanent error was retried", r)
	}
	if v := b.version(t, "o-1"); v != 1 {
		t.Errorf("version = %d, want 1", v)
	}
	b.env.AssertNoClaimsHeld(t)
}

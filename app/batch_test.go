package app_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/internal/testsignal"
	"github.com/sutra-run/worker/lanes"
)

// batchBundle runs a one-lane worker with batches of up to 16 whose first
// payment (paid-o-0) is held mid-step until the returned release is called,
// so that the relays published meanwhile queue up in the lane and run as
// one batch. hook runs before every other commit. o-0 … o-n are started,
// and the payments of applied are applied before the hold.
func batchBundle(t *testing.T, n int, applied []string, hook func(ctx context.Context, r *lanes.Resume)) (b *bundle, release func()) {
	t.Helper()
	hold := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(hold) }) }
	var holding atomic.Bool
	var held testsignal.Signal[struct{}]
	held.Init()
	hooks := &lanes.Hooks{BeforeCommit: func(ctx context.Context, _ int, r *lanes.Resume) {
		if r.InboxID() == "paid-o-0" && holding.CompareAndSwap(false, true) {
			held.Signal(struct{}{})
			select {
			case <-hold:
			case <-ctx.Done():
			}
			return
		}
		if hook != nil {
			hook(ctx, r)
		}
	}}
	b = setup(t, hooks, func(c *app.Config) { c.Lanes.Count, c.BatchMax = 1, 16 })
	t.Cleanup(release) // before the worker's stop
	for i := range n + 1 {
		b.pub.Publish(start(fmt.Sprintf("o-%d", i)))
	}
	for i := range n + 1 {
		b.waitVersion(t, fmt.Sprintf("o-%d", i), 1)
	}
	for _, id := range applied {
		b.pub.Publish(paid(id))
		b.waitVersion(t, id, 2)
	}
	b.pub.Publish(paid("o-0"))
	held.WaitOrTimeout(t) // o-0's payment held mid-step
	return b, release
}

// queued waits until the lane holds n resumes behind the held step.
func (b *bundle) queued(t *testing.T, n float64) {
	t.Helper()
	b.w.Lanes().TestSignals.Queued.Until(t, fmt.Sprintf("%v relays queued in the lane", n), func() bool {
		for _, m := range b.family(t, "sutra_lane_queue_depth").GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "lane" && lp.GetValue() == "0" {
					return m.GetGauge().GetValue() == n
				}
			}
		}
		return false
	})
}

// batches returns how many batch commits committed steps, and how many steps.
func (b *bundle) batches(t *testing.T) (commits uint64, steps float64) {
	t.Helper()
	for _, m := range b.family(t, "sutra_batch_steps").GetMetric() {
		return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
	}
	return 0, 0
}

func TestAFenceFailingForOneInstanceOfABatchCommitsTheOthersAndRequeuesOnlyThatOne(t *testing.T) {
	t.Parallel()
	var env atomic.Pointer[testkit.Env]
	var swept atomic.Bool
	b, release := batchBundle(t, 3, nil, func(ctx context.Context, r *lanes.Resume) {
		if r.InboxID() == "paid-o-2" && swept.CompareAndSwap(false, true) {
			// The sweep clears o-2's claim while the batch is computed.
			if _, err := env.Load().DB.Exec(ctx, "DELETE FROM claims WHERE instance_id = 'o-2'"); err != nil {
				panic(err)
			}
		}
	})
	env.Store(b.env)
	b.pub.Publish(paid("o-1"), paid("o-2"), paid("o-3"))
	b.queued(t, 3)
	release()
	for _, id := range []string{"o-0", "o-1", "o-2", "o-3"} {
		b.waitVersion(t, id, 2) // o-2's relay too, requeued and applied once later
	}
	if commits, steps := b.batches(t); commits != 1 || steps != 2 {
		t.Errorf("batch commits = %d of %v steps, want one of 2 (o-1 and o-3, o-2 fenced)", commits, steps)
	}
	if got := b.counter(t, "sutra_steps_fenced_total", "", ""); got != 1 {
		t.Errorf("steps fenced = %v, want 1", got)
	}
	if got := b.counter(t, "sutra_relay_requeues_total", "reason", "fenced"); got != 1 {
		t.Errorf("fenced requeues = %v, want 1 (only o-2's relay)", got)
	}
	if n := b.env.Int(t, "SELECT count(*) FROM inbox WHERE message_id = 'paid-o-2'"); n != 1 {
		t.Errorf("o-2's inbox rows = %d, want 1", n)
	}
	b.waitRelays(t, "committed", 8)
	b.env.AssertNoClaimsHeld(t)
	b.env.AssertNoOverlap(t, false)
}

func TestAPanicInOneStepOfABatchReleasesEveryClaimAndDeadLettersOnlyThatRelay(t *testing.T) {
	t.Parallel()
	var env atomic.Pointer[testkit.Env]
	var o3Owner atomic.Pointer[string]
	var o1Runs atomic.Int32
	b, release := batchBundle(t, 3, nil, func(ctx context.Context, r *lanes.Resume) {
		switch r.InboxID() {
		case "paid-o-2":
			panic("boom")
		case "paid-o-1":
			if o1Runs.Add(1) == 2 {
				// o-1 runs again on its own after the panic, o-3 after it: by
				// now the batch must have released o-3's claim.
				var owner *string
				if err := env.Load().DB.QueryRow(ctx, "SELECT (SELECT owner FROM claims WHERE instance_id = 'o-3')").Scan(&owner); err != nil {
					panic(err)
				}
				none := "(none)"
				if owner == nil {
					owner = &none
				}
				o3Owner.Store(owner)
			}
		}
	})
	env.Store(b.env)
	b.pub.Publish(paid("o-1"), paid("o-2"), paid("o-3"))
	b.queued(t, 3)
	release()
	dead := b.pub.DeadLetters(1, 10*time.Second)
	if len(dead) != 1 || dead[0].MessageID != "paid-o-2" || dead[0].Code != fault.StepPanic {
		t.Fatalf("dead letters = %+v, want paid-o-2 with %s", dead, fault.StepPanic)
	}
	b.waitVersion(t, "o-1", 2)
	b.waitVersion(t, "o-3", 2)
	if v := b.version(t, "o-2"); v != 1 {
		t.Errorf("the panicked step changed o-2: version %d", v)
	}
	switch o := o3Owner.Load(); {
	case o == nil:
		t.Error("o-1 did not run again on its own after the panic")
	case *o != "(none)":
		t.Errorf("o-3 still claimed by %s after the panic, want released", *o)
	}
	if commits, _ := b.batches(t); commits != 0 {
		t.Errorf("%d batch commits: a batch with a panicked step must not commit", commits)
	}
	if got := b.counter(t, "sutra_lane_panics_total", "", ""); got != 1 {
		t.Errorf("lane panics = %v, want 1", got)
	}
	b.env.AssertNoClaimsHeld(t)
	b.env.AssertNoOverlap(t, false)
}

func TestADuplicateInsideABatchIsAckedAsDuplicateAndTheOthersCommit(t *testing.T) {
	t.Parallel()
	b, release := batchBundle(t, 3, []string{"o-1"}, nil)
	// A copy of o-1's payment, applied before, queues up with two fresh ones.
	b.pub.Publish(paid("o-1"), paid("o-2"), paid("o-3"))
	b.queued(t, 3)
	release()
	for _, id := range []string{"o-0", "o-2", "o-3"} {
		b.waitVersion(t, id, 2)
	}
	b.waitRelays(t, "duplicate", 1)
	if v := b.version(t, "o-1"); v != 2 {
		t.Errorf("o-1 at version %d, want 2: the copy was applied again", v)
	}
	if commits, steps := b.batches(t); commits != 1 || steps != 2 {
		t.Errorf("batch commits = %d of %v steps, want one of 2 (o-2 and o-3)", commits, steps)
	}
	if dl := b.pub.QueueDepth(b.env.Config.DeadQueue); dl != 0 {
		t.Errorf("%d dead letters", dl)
	}
	b.env.AssertNoClaimsHeld(t)
	b.env.AssertNoOverlap(t, false)
}

// Two relays of one instance queued together never run at once: they run
// as a chain in the batch, the second on the state the first left, and
// commit in its one transaction, each with its own step.
func TestTwoRelaysOfOneInstanceQueuedTogetherRunOneAfterTheOther(t *testing.T) {
	t.Parallel()
	b, release := batchBundle(t, 2, nil, nil)
	b.pub.Publish(paid("o-1"), testkit.Relay{MessageID: "shipped-o-1", Body: map[string]any{"instance_id": "o-1", "message": "order-shipped"}},
		paid("o-2"))
	b.queued(t, 3)
	release()
	b.waitVersion(t, "o-1", 3)
	b.waitVersion(t, "o-2", 2)
	if commits, steps := b.batches(t); commits != 1 || steps != 3 {
		t.Errorf("batch commits = %d of %v steps, want one of 3 (o-1's payment and shipment, o-2's payment)", commits, steps)
	}
	if n := b.env.Int(t, "SELECT count(*) FROM instances WHERE id = 'o-1' AND status = 'completed'"); n != 1 {
		t.Error("o-1 did not complete: its shipment did not run on the payment's state")
	}
	b.waitRelays(t, "committed", 7)
	b.env.AssertNoClaimsHeld(t)
	b.env.AssertNoOverlap(t, false)
}

// A buffered message that matches a subscription one step of a batch opens
// costs that step its place in the group, not the group its transaction:
// the others are written as a group, and that step on its own with the
// message applied.
func TestABufferedMatchInABatchWritesThatStepAloneAndTheOthersAsAGroup(t *testing.T) {
	t.Parallel()
	b, release := batchBundle(t, 3, nil, nil)
	// o-2's payment opens the shipment subscription, which this matches.
	if _, err := b.env.DB.Exec(testkit.Ctx(t), `INSERT INTO buffered_messages (message_id, message_name, correlation_key, expires_at)
		VALUES ('shipped-o-2', 'order-shipped', 'o-2', now() + interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	b.pub.Publish(paid("o-1"), paid("o-2"), paid("o-3"))
	b.queued(t, 3)
	release()
	for _, id := range []string{"o-0", "o-1", "o-3"} {
		b.waitVersion(t, id, 2)
	}
	b.waitVersion(t, "o-2", 2)
	if n := b.env.Int(t, "SELECT count(*) FROM instances WHERE id = 'o-2' AND status = 'completed'"); n != 1 {
		t.Errorf("o-2 not completed by its payment's step with the shipment applied")
	}
	if n := b.env.Int(t, "SELECT count(*) FROM buffered_messages"); n != 0 {
		t.Errorf("%d buffered messages left", n)
	}
	if commits, steps := b.batches(t); commits != 1 || steps != 2 {
		t.Errorf("batch commits = %d of %v steps, want one of 2 (o-1 and o-3)", commits, steps)
	}
	b.waitCounter(t, "sutra_buffered_consumed_total", 1)
	b.env.AssertNoClaimsHeld(t)
	b.env.AssertNoOverlap(t, false)
}

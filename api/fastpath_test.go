package api_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/lanes"
	"github.com/sutra-run/worker/metrics"
)

// The local fast path: a recorded outcome is handed to this replica's lanes
// before the 204, and its outbox row waits: the step that applies it marks it
// published, and only what the lanes do not apply wakes the publisher. The
// relay is the durable fallback. Within one replica the fast path's resume
// reaches the instance's lane first (it is queued before the answer, the
// relay only once published and consumed, and a lane takes its inbox in
// order).

func fastPath(c *app.Config) { c.Tasks.FastPath = true }

// handed waits for the fast path's outcome of relay id.
func (b *bundle) handed(t *testing.T, id string) lanes.Result {
	t.Helper()
	for {
		if h := b.w.Handoff().TestSignals.Done.WaitOrTimeout(t); h.MessageID == id {
			return h.Outcome
		}
	}
}

// appliedOnce checks that relay id stepped instance once (one inbox row,
// one step past version 1) and that no two steps overlapped.
func (b *bundle) appliedOnce(t *testing.T, instance, id string) {
	t.Helper()
	if n := b.env.Int(t, "SELECT count(*) FROM inbox WHERE message_id = $1 AND instance_id = $2", id, instance); n != 1 {
		t.Errorf("%d inbox rows for %s, want 1", n, id)
	}
	if v := b.env.Int(t, "SELECT version FROM instances WHERE id = $1", instance); v != 2 {
		t.Errorf("%s is at version %d, want 2: one step for the outcome", instance, v)
	}
	b.env.AssertNoOverlap(t, false)
	b.env.AssertNoClaimsHeld(t)
}

func (b *bundle) counter(t *testing.T, name, label, value string) float64 {
	t.Helper()
	return testkit.Counter(t, b.reg, name, label, value)
}

// relays checks sutra_relays_total of each outcome of want.
func (b *bundle) relays(t *testing.T, want map[string]float64) {
	t.Helper()
	for outcome, n := range want {
		if got := b.counter(t, "sutra_relays_total", "outcome", outcome); got != n {
			t.Errorf("sutra_relays_total{outcome=%s} = %v, want %v", outcome, got, n)
		}
	}
}

func TestACompletionOnTheFastPathIsAppliedOnceAndItsRelayNeverSent(t *testing.T) {
	t.Parallel()
	// The publisher looks only when woken: the fast path does not wake it.
	b := setup(t, func(c *app.Config) { fastPath(c); c.Outbox.PollInterval = time.Hour })
	b.w.Handoff().TestSignals.Init()
	b.w.Lanes().TestSignals.Committed.Init()
	b.start(t, "i-1", "ship", nil)
	task := b.fetch(t, "w", "ship", 1, time.Minute, 0)[0]
	b.answer(t, task.ID, "complete", map[string]any{"workerId": "w",
		"variables": map[string]any{"tracking": map[string]any{"value": "TR-1", "type": "String"}}})
	id := outcome(task.ID)
	if out := b.handed(t, id); out.Kind != lanes.Applied {
		t.Fatalf("the fast path's outcome: %v %s %v, want applied", out.Kind, out.Code, out.Err)
	}
	for _, step := range []string{"start", "completion"} {
		if got := b.w.Lanes().TestSignals.Committed.WaitOrTimeout(t); got != "i-1" {
			t.Fatalf("committed %s, want the %s of i-1", got, step)
		}
	}
	if n := b.env.Int(t, "SELECT count(*) FROM outbox WHERE id = $1 AND published_at IS NOT NULL", id); n != 1 {
		t.Error("the completion's outbox row is not marked published by its step")
	}
	if n := b.counter(t, "sutra_outbox_published_total", "", ""); n != 0 {
		t.Errorf("%v outbox rows published: the applied relay was sent", n)
	}
	if n := b.counter(t, "sutra_task_fast_path_total", "outcome", "applied"); n != 1 {
		t.Errorf("sutra_task_fast_path_total{outcome=applied} = %v, want 1", n)
	}
	b.appliedOnce(t, "i-1", id)
	if n := b.env.Int(t, "SELECT count(*) FROM instances WHERE id = 'i-1' AND status = 'completed' AND variables->>'tracking' = 'TR-1'"); n != 1 {
		t.Error("the completion's step did not complete i-1 with the worker's variables")
	}
}

func TestARelayThatArrivesAfterTheFastPathAppliedItIsAckedAsADuplicate(t *testing.T) {
	t.Parallel()
	// The fast path's step waits before its commit until the publisher has
	// sent the relay, which then queues behind it in the lane.
	published := make(chan struct{})
	var held atomic.Bool
	hooks := &lanes.Hooks{BeforeCommit: func(ctx context.Context, _ int, r *lanes.Resume) {
		if strings.HasPrefix(r.InboxID(), "task:") && held.CompareAndSwap(false, true) {
			select {
			case <-published:
			case <-ctx.Done():
			}
		}
	}}
	b := setupAdmin(t, hooks, func(c *app.Config) { fastPath(c); c.Outbox.PollInterval = 20 * time.Millisecond })
	b.w.Handoff().TestSignals.Init()
	b.start(t, "i-1", "ship", nil)
	task := b.fetch(t, "w", "ship", 1, time.Minute, 0)[0]
	b.answer(t, task.ID, "complete", map[string]any{"workerId": "w"})
	id := outcome(task.ID)
	for !slices.Contains(b.w.Outbox().TestSignals.Settled.WaitOrTimeout(t).Published, id) {
	}
	close(published)
	if out := b.handed(t, id); out.Kind != lanes.Applied {
		t.Fatalf("the fast path's outcome: %v %s %v, want applied", out.Kind, out.Code, out.Err)
	}
	b.applied(t, id) // the relay, acked
	// The start committed; the relay was a duplicate.
	b.relays(t, map[string]float64{metrics.OutcomeCommitted: 1, metrics.OutcomeDuplicate: 1, metrics.OutcomeDeadLettered: 0})
	b.appliedOnce(t, "i-1", id)
}

func TestAFastPathRefusedByAHeldClaimIsDroppedAndItsRelayAppliesItOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *app.Config) { fastPath(c); c.RequeueBackoffMax = 100 * time.Millisecond })
	b.w.Handoff().TestSignals.Init()
	b.start(t, "i-1", "held", nil)
	task := b.fetch(t, "w", "held", 1, time.Minute, 0)[0]
	ctx := testkit.Ctx(t)
	if _, err := b.env.DB.Exec(ctx, "INSERT INTO claims (instance_id, owner, claimed_at) VALUES ('i-1', 'elsewhere/lane/0', now()) ON CONFLICT (instance_id) DO UPDATE SET owner = EXCLUDED.owner, claimed_at = EXCLUDED.claimed_at"); err != nil {
		t.Fatal(err)
	}
	b.answer(t, task.ID, "complete", map[string]any{"workerId": "w"})
	id := outcome(task.ID)
	if out := b.handed(t, id); out.Kind != lanes.Refused || out.Reason != lanes.ReasonClaimHeld {
		t.Fatalf("the fast path under another's claim: %v %s, want refused (claim_held)", out.Kind, out.Reason)
	}
	b.requeued(t, id, 1) // the relay bounces too, and is kept
	if v := b.env.Int(t, "SELECT version FROM instances WHERE id = 'i-1'"); v != 1 {
		t.Fatalf("the instance stepped to version %d under another's claim", v)
	}
	if _, err := b.env.DB.Exec(ctx, "DELETE FROM claims WHERE instance_id = 'i-1'"); err != nil {
		t.Fatal(err)
	}
	b.stepped(t, "i-1", "completed", id)
	if n := b.counter(t, "sutra_task_fast_path_total", "outcome", lanes.ReasonClaimHeld); n != 1 {
		t.Errorf("sutra_task_fast_path_total{outcome=claim_held} = %v, want 1", n)
	}
	b.relays(t, map[string]float64{metrics.OutcomeCommitted: 2, metrics.OutcomeDuplicate: 0}) // the start and the outbox relay
	b.appliedOnce(t, "i-1", id)
}

func TestWithTheFastPathOffTheOutboxRelayAloneAppliesACompletion(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *app.Config) { c.Tasks.FastPath = false })
	b.start(t, "i-1", "ship", nil)
	task := b.fetch(t, "w", "ship", 1, time.Minute, 0)[0]
	b.answer(t, task.ID, "complete", map[string]any{"workerId": "w"})
	id := outcome(task.ID)
	b.stepped(t, "i-1", "completed", id)
	b.relays(t, map[string]float64{metrics.OutcomeCommitted: 2, metrics.OutcomeDuplicate: 0}) // the start and the completion
	if n := b.counter(t, "sutra_task_fast_path_total", "", ""); n != 0 {
		t.Errorf("the fast path ran %v times while off", n)
	}
	b.appliedOnce(t, "i-1", id)
}

func TestAUserTaskCompletionTakesTheFastPathToo(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, func(c *app.Config) { fastPath(c); c.Outbox.PollInterval = time.Hour })
	b.w.Handoff().TestSignals.Init()
	b.env.Deploy(t, "testdata/review.bpmn")
	id := b.reviewTask(t, "c-1", "ada")
	if status, code := b.completeAs(t, "ada", id, map[string]any{"variables": map[string]any{"approved": true}}); status != http.StatusNoContent {
		t.Fatalf("completing: %d %s", status, code)
	}
	if out := b.handed(t, outcome(id)); out.Kind != lanes.Applied {
		t.Fatalf("the fast path's outcome: %v %s %v, want applied", out.Kind, out.Code, out.Err)
	}
	if n := b.env.Int(t, "SELECT count(*) FROM instances WHERE id = 'c-1' AND status = 'completed'"); n != 1 {
		t.Error("c-1 is not completed by its user task's completion")
	}
	if n := b.env.Int(t, "SELECT count(*) FROM outbox WHERE id = $1 AND published_at IS NOT NULL", outcome(id)); n != 1 {
		t.Error("the completion's outbox row is not marked published by its step")
	}
	if n := b.counter(t, "sutra_outbox_published_total", "", ""); n != 0 {
		t.Errorf("%v outbox rows published: the applied relay was sent", n)
	}
	b.appliedOnce(t, "c-1", outcome(id))
}

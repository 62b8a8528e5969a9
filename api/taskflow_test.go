package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/lanes"
	"github.com/sutra-run/worker/metrics"
)

// The task flows end to end: an outcome answered 204 travels as a relay
// through the outbox and the broker back to the instance's lane, and steps
// the instance there like any other resume.

// stepped waits until the relays of ids are applied, then checks that
// instance id has status.
func (b *bundle) stepped(t *testing.T, id, status string, relays ...string) {
	t.Helper()
	b.applied(t, relays...)
	if n := b.env.Int(t, "SELECT count(*) FROM instances WHERE id = $1 AND status = $2", id, status); n != 1 {
		t.Fatalf("%s is not %s once %v applied", id, status, relays)
	}
}

// outcome is the message id of the relay that carries the first outcome of
// task id.
func outcome(id string) string { return "task:" + id + ":1" }

// waitStatus waits until instance id has status, for a step no relay of
// the test's names.
func (b *bundle) waitStatus(t *testing.T, id, status string) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, id+" "+status, func() bool {
		return b.env.Int(t, "SELECT count(*) FROM instances WHERE id = $1 AND status = $2", id, status) == 1
	})
}

func (b *bundle) answer(t *testing.T, taskID, route string, body map[string]any) {
	t.Helper()
	if status, _, resp := b.call(t, "/external-task/"+taskID+"/"+route, body); status != http.StatusNoContent {
		t.Fatalf("%s: %d %s", route, status, resp)
	}
}

func TestACompletedTaskStepsItsInstanceWithTheWorkersVariables(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.start(t, "i-1", "ship", nil)
	task := b.fetch(t, "w", "ship", 1, time.Minute, 0)[0]
	b.answer(t, task.ID, "complete", map[string]any{"workerId": "w",
		"variables": map[string]any{"tracking": map[string]any{"value": "TR-1", "type": "String"}}})
	b.stepped(t, "i-1", "completed", outcome(task.ID))
	if n := b.env.Int(t, "SELECT count(*) FROM instances WHERE id = 'i-1' AND variables->>'tracking' = 'TR-1' AND version = 2"); n != 1 {
		t.Error("the completion's variables were not merged in one step")
	}
	if n := b.env.Int(t, "SELECT count(*) FROM tasks"); n != 0 {
		t.Errorf("%d task rows left after the completion's step", n)
	}
	if n := testkit.Counter(t, b.reg, "sutra_tasks_completed_total", "outcome", "completed"); n != 1 {
		t.Errorf("sutra_tasks_completed_total{outcome=completed} = %v", n)
	}
}

func TestAFailureWithRetriesLeftMakesTheTaskFetchableAgainAfterItsRetryTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.start(t, "later", "flaky", nil)
	b.start(t, "now", "flaky-now", nil)

	task := b.fetch(t, "w", "flaky", 1, time.Minute, 0)[0]
	b.answer(t, task.ID, "failure", map[string]any{"workerId": "w", "errorMessage": "down", "retries": 2, "retryTimeout": time.Hour.Milliseconds()})
	b.applied(t, "task:"+task.ID+":1") // the failure's step
	if n := b.env.Int(t, "SELECT count(*) FROM tasks WHERE instance_id = 'later' AND retries = 2 AND not_before > now() + interval '59 minutes'"); n != 1 {
		t.Fatalf("the failure's step left %d tasks due in an hour with 2 retries, want 1", n)
	}
	if got := b.fetch(t, "w", "flaky", 1, time.Minute, 0); len(got) != 0 {
		t.Fatalf("a task inside its retry timeout was fetched: %+v", got)
	}

	task = b.fetch(t, "w", "flaky-now", 1, time.Minute, 0)[0]
	b.answer(t, task.ID, "failure", map[string]any{"workerId": "w", "errorMessage": "down", "errorDetails": "stack", "retries": 2, "retryTimeout": 0})
	again := b.fetch(t, "w2", "flaky-now", 1, time.Minute, 30*time.Second)
	if len(again) != 1 || again[0].Retries != 2 {
		t.Fatalf("after the failure: %+v, want the task again with 2 retries", again)
	}
	if again[0].ErrorMessage != "down" {
		t.Errorf("the task fetched again says errorMessage %q, want the failure's", again[0].ErrorMessage)
	}
	if n := b.env.Int(t, "SELECT count(*) FROM tasks WHERE instance_id = 'now' AND error_details = 'stack'"); n != 1 {
		t.Error("the re-created task lost the failure's details")
	}
	if n := b.env.Int(t, "SELECT count(*) FROM incidents"); n != 0 {
		t.Errorf("%d incidents for a failure with retries left", n)
	}
}

func TestABpmnErrorIsCaughtByTheTasksBoundaryEvent(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.start(t, "i-1", "check", nil)
	task := b.fetch(t, "w", "check", 1, time.Minute, 0)[0]
	b.answer(t, task.ID, "bpmnError", map[string]any{"workerId": "w", "errorCode": "REJECTED",
		"variables": map[string]any{"reason": map[string]any{"value": "blocked", "type": "String"}}})
	b.stepped(t, "i-1", "completed", outcome(task.ID))
	if n := b.env.Int(t, "SELECT count(*) FROM instances WHERE id = 'i-1' AND variables->>'reason' = 'blocked'"); n != 1 {
		t.Error("the BPMN error's variables were not set")
	}
	if n := b.env.Int(t, "SELECT count(*) FROM timers"); n != 0 {
		t.Errorf("%d timers left: the error must close the task's other boundary events", n)
	}
}

func TestACompletionWhoseInstanceIsClaimedBouncesAndAppliesOnceAfter(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *app.Config) { c.RequeueBackoffMax = 100 * time.Millisecond })
	b.start(t, "i-1", "held", nil)
	task := b.fetch(t, "w", "held", 1, time.Minute, 0)[0]
	ctx := testkit.Ctx(t)
	if _, err := b.env.DB.Exec(ctx, "INSERT INTO claims (instance_id, owner, claimed_at) VALUES ('i-1', 'elsewhere/lane/0', now()) ON CONFLICT (instance_id) DO UPDATE SET owner = EXCLUDED.owner, claimed_at = EXCLUDED.claimed_at"); err != nil {
		t.Fatal(err)
	}
	b.answer(t, task.ID, "complete", map[string]any{"workerId": "w"})
	b.requeued(t, "task:"+task.ID+":1", 2) // the completion bounced off the claim twice
	if n := testkit.Counter(t, b.reg, "sutra_claim_bounces_total", "path", metrics.PathTask); n < 2 {
		t.Errorf("%v bounces counted, want 2 at least", n)
	}
	if v := b.env.Int(t, "SELECT version FROM instances WHERE id = 'i-1'"); v != 1 {
		t.Fatalf("the instance stepped to version %d under another's claim", v)
	}
	if _, err := b.env.DB.Exec(ctx, "DELETE FROM claims WHERE instance_id = 'i-1'"); err != nil {
		t.Fatal(err)
	}
	b.stepped(t, "i-1", "completed", outcome(task.ID))
	if v := b.env.Int(t, "SELECT version FROM instances WHERE id = 'i-1'"); v != 2 {
		t.Errorf("version %d, want one step for the completion", v)
	}
}

// A task cancelled between its outcome's 204 and the outcome's step (here:
// its interrupting boundary timer fires) makes that step a counted no-op,
// never a dead letter.
func TestACompletionOfATaskItsBoundaryTimerCancelledIsStaleNotADeadLetter(t *testing.T) {
	t.Parallel()
	var env *testkit.Env
	released := false
	hooks := &lanes.Hooks{
		// The timer's fire runs on another lane than the completion it races.
		Route: func(r *lanes.Resume) int {
			if r.Path() == metrics.PathTimer {
				return 0
			}
			return 1
		},
		// The completion's step, holding the claim: let go of it and wait for
		// the timer's step to end the instance, so that the completion's
		// commit is fenced and its retry finds the task gone.
		BeforeCommit: func(ctx context.Context, _ int, r *lanes.Resume) {
			if r.Path() != metrics.PathTask || released {
				return
			}
			released = true
			if _, err := env.DB.Exec(ctx, "DELETE FROM claims WHERE instance_id = 'i-1'"); err != nil {
				panic(err)
			}
			if _, err := env.DB.Exec(ctx, "UPDATE timers SET due_at = now() WHERE instance_id = 'i-1'"); err != nil {
				panic(err)
			}
			for {
				var ended bool
				if err := env.DB.QueryRow(ctx, "SELECT status = 'completed' FROM instances WHERE id = 'i-1'").Scan(&ended); err != nil || ended {
					return
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
		},
	}
	b := setupAdmin(t, hooks, func(c *app.Config) { c.Lanes.Count = 2; c.Timers.PollInterval = 50 * time.Millisecond })
	env = b.env
	b.start(t, "i-1", "slow", nil)
	task := b.fetch(t, "w", "slow", 1, time.Minute, 0)[0]
	b.answer(t, task.ID, "complete", map[string]any{"workerId": "w"})
	testkit.Eventually(t, 30*time.Second, "the stale completion", func() bool {
		return testkit.Counter(t, b.reg, "sutra_relays_total", "outcome", "stale") == 1
	})
	if n := b.env.Int(t, "SELECT count(*) FROM instances WHERE id = 'i-1' AND status = 'completed' AND version = 2"); n != 1 {
		t.Error("the instance did not end in the timer's step alone")
	}
	if dead := testkit.Counter(t, b.reg, "sutra_relays_total", "outcome", "dead_lettered"); dead != 0 {
		t.Errorf("%v dead letters", dead)
	}
}

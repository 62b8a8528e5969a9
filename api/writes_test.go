package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/metrics"
)

// Writes that must not explode: what one step writes stays proportional to
// what it changes.

func TestAMultiInstanceOverManyItemsWritesTaskRowsWithoutCopyingTheVariables(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.env.Deploy(t, "testdata/multi.bpmn")
	const n = 4000
	blob := strings.Repeat("x", 62<<10)
	list := make([]any, n)
	for k := range list {
		list[k] = k
	}
	b.pub.Publish(testkit.Relay{MessageID: "start-many", Body: map[string]any{"start": "multi", "instance_id": "many",
		"variables": map[string]any{"items": list, "blob": blob}}})
	b.applied(t, "start-many") // its step created every inner instance's task
	if got := b.env.Int(t, "SELECT count(*) FROM tasks WHERE instance_id = 'many'"); got != n {
		t.Fatalf("%d tasks once started, want %d", got, n)
	}
	// Each row holds its item and loopCounter (about 40 bytes); a copy of the
	// instance's variables would be 62 KB a row, 250 MB in all.
	if bytes := b.env.Int(t, "SELECT sum(pg_column_size(variables)) FROM tasks"); bytes > 100*n {
		t.Errorf("the task rows' variables take %d bytes: the instance's variables were copied into each", bytes)
	}
	got := b.fetch(t, "w", "each", 1, time.Minute, 0)
	if len(got) != 1 {
		t.Fatalf("fetched %d tasks, want 1", len(got))
	}
	var v struct {
		Value any `json:"value"`
	}
	if err := json.Unmarshal(got[0].Variables["blob"], &v); err != nil || v.Value != blob {
		t.Errorf("the fetched task lacks the instance's variable blob (%v)", err)
	}
	if err := json.Unmarshal(got[0].Variables["item"], &v); err != nil || v.Value != 0.0 {
		t.Errorf("the fetched task's item = %v (%v), want its own input 0", v.Value, err)
	}
	if _, ok := got[0].Variables["results"]; ok {
		t.Error("the fetched task carries the body's output collection")
	}
}

func TestAnAdminStartOrVariablesCallPastTheVariablesCapIs422WithTheCodeAndWritesNothing(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, func(c *app.Config) { c.MaxVariablesBytes = 8 << 10 })
	big := strings.Repeat("x", 9<<10)
	status, p := b.do(t, "POST", "/instances", map[string]any{"definition": "shop", "instance_id": "s-big",
		"variables": map[string]any{"orderId": "s-big", "blob": big}})
	if status != http.StatusUnprocessableEntity || p["code"] != fault.StepTooLarge {
		t.Fatalf("start past the cap: %d %v, want 422 %s", status, p, fault.StepTooLarge)
	}
	if n := b.env.Int(t, "SELECT count(*) FROM instances WHERE id = 's-big'"); n != 0 {
		t.Errorf("the refused start left %d instance rows", n)
	}

	b.startShop(t, "s-1")
	before := b.snapshot(t, "s-1")
	status, p = b.do(t, "PATCH", "/instances/s-1/variables", map[string]any{"blob": big})
	if status != http.StatusUnprocessableEntity || p["code"] != fault.StepTooLarge {
		t.Fatalf("variables past the cap: %d %v, want 422 %s", status, p, fault.StepTooLarge)
	}
	if after := b.snapshot(t, "s-1"); after != before {
		t.Errorf("the refused call changed the instance:\n%s\n%s", before, after)
	}
	b.env.AssertNoClaimsHeld(t)
}

func TestACompletionWhoseStepWouldPassTheCapFailsItsTaskIntoAnIncidentAndARetryCreatesItAgain(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, func(c *app.Config) { c.MaxVariablesBytes = 8 << 10 })
	b.start(t, "i-1", "big", nil)
	task := b.fetch(t, "w", "big", 1, time.Minute, 0)[0]
	b.answer(t, task.ID, "complete", map[string]any{"workerId": "w",
		"variables": map[string]any{"blob": map[string]any{"value": strings.Repeat("x", 9<<10), "type": "String"}}})
	b.applied(t, "task:"+task.ID+":1") // the completion's relay: its step failed the task into an incident
	if n := b.env.Int(t, `SELECT count(*) FROM incidents WHERE instance_id = 'i-1' AND element_id = 'Work'
		AND resolved_at IS NULL AND message LIKE '%SUTRA.RUNTIME.STEP.TOO_LARGE%SUTRA_MAX_VARIABLES_BYTES%'`); n != 1 {
		t.Fatalf("%d incidents naming the cap, want 1", n)
	}
	if n := b.env.Int(t, "SELECT count(*) FROM tasks WHERE instance_id = 'i-1'"); n != 0 {
		t.Errorf("%d task rows left: the failed task is closed", n)
	}
	if n := b.env.Int(t, "SELECT count(*) FROM instances WHERE id = 'i-1' AND variables ? 'blob'"); n != 0 {
		t.Error("the refused outcome's variables reached the instance")
	}
	var id string
	if err := b.env.DB.QueryRow(testkit.Ctx(t), "SELECT id::text FROM incidents WHERE instance_id = 'i-1'").Scan(&id); err != nil {
		t.Fatal(err)
	}
	if status, p := b.do(t, "POST", "/incidents/"+id+"/retry", map[string]any{}); status != http.StatusOK {
		t.Fatalf("retry: %d %v", status, p)
	}
	if got := b.fetch(t, "w", "big", 1, time.Minute, 10*time.Second); len(got) != 1 {
		t.Fatalf("after the retry %d tasks fetched, want the task again", len(got))
	}
	if n := testkit.Counter(t, b.reg, "sutra_relays_total", "outcome", metrics.OutcomeDeadLettered); n != 0 {
		t.Errorf("%v relays dead-lettered: the outcome is applied as the task's failure", n)
	}
	b.env.AssertNoClaimsHeld(t)
}

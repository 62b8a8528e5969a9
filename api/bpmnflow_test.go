package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/sutra-run/worker/internal/testkit"
)

// Camunda 8 elements end to end through the real worker: the human's tools
// and the task workers reach them on the API listener.

func TestAUserTaskCompletedOverTheAdminAPIContinuesItsInstance(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, nil)
	b.env.Deploy(t, "testdata/review.bpmn")
	b.pub.Publish(testkit.Relay{MessageID: "start-c-1", Body: map[string]any{"start": "review", "instance_id": "c-1",
		"variables": map[string]any{"reviewer": "ada"}}})
	b.applied(t, "start-c-1") // its step created the user task
	_, list := b.do(t, "GET", "/user-tasks?assignee=ada", nil)
	tasks, _ := asList(list["user_tasks"])
	if len(tasks) != 1 {
		t.Fatalf("ada's user tasks: %v", list)
	}
	if groups := fmt.Sprint(tasks[0]["candidate_groups"]); tasks[0]["instance_id"] != "c-1" || tasks[0]["element"] != "Approve" || groups != "[claims]" {
		t.Fatalf("user task = %v", tasks[0])
	}
	if _, p := b.do(t, "GET", "/user-tasks?assignee=bob", nil); len(p["user_tasks"].([]any)) != 0 {
		t.Errorf("bob sees %v", p["user_tasks"])
	}
	id := fmt.Sprint(tasks[0]["id"])
	if status, code := b.completeAs(t, "ada", id, map[string]any{"variables": map[string]any{"approved": true}}); status != http.StatusNoContent {
		t.Fatalf("ada's completion: %d %s", status, code)
	}
	b.stepped(t, "c-1", "completed", outcome(id))
	if n := b.env.Int(t, "SELECT count(*) FROM instances WHERE id = 'c-1' AND (variables->>'approved')::boolean AND version = 2"); n != 1 {
		t.Error("the completion's variables did not reach the instance in one step")
	}
	if status, _ := b.completeAs(t, "ada", id, map[string]any{}); status != http.StatusNotFound {
		t.Errorf("a second completion answered %d, want 404", status)
	}
}

func TestAParallelMultiInstanceOfServiceTasksIsWorkedByTaskWorkers(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, nil)
	b.env.Deploy(t, "testdata/fanout.bpmn")
	items := []any{"anvil", "rope", "bell", "kettle", "lamp"}
	b.pub.Publish(testkit.Relay{MessageID: "start-q-1", Body: map[string]any{"start": "fanout", "instance_id": "q-1",
		"variables": map[string]any{"items": items}}})
	b.applied(t, "start-q-1")
	if n := b.env.Int(t, "SELECT count(*) FROM tasks WHERE instance_id = 'q-1'"); n != int64(len(items)) {
		t.Fatalf("%d tasks once started, want one per item (%d)", n, len(items))
	}
	// Two workers take the tasks in parallel; each sees its own item.
	got := b.fetch(t, "w1", "price", 3, time.Minute, 0)
	got = append(got, b.fetch(t, "w2", "price", 3, time.Minute, 0)...)
	if len(got) != len(items) {
		t.Fatalf("fetched %d tasks, want %d", len(got), len(items))
	}
	var seen, outcomes []string
	for _, task := range got {
		outcomes = append(outcomes, outcome(task.ID))
		var item string
		if err := jsonValue(task.Variables["item"], &item); err != nil {
			t.Fatal(err)
		}
		seen = append(seen, item)
		b.answer(t, task.ID, "complete", map[string]any{"workerId": task.WorkerID,
			"variables": map[string]any{"price": map[string]any{"value": len(item), "type": "Integer"}}})
	}
	sort.Strings(seen)
	if fmt.Sprint(seen) != "[anvil bell kettle lamp rope]" {
		t.Errorf("items seen by the workers: %v", seen)
	}
	b.stepped(t, "q-1", "completed", outcomes...)
	// The output collection keeps the input's order, whatever the completion order.
	if n := b.env.Int(t, `SELECT count(*) FROM instances WHERE id = 'q-1' AND variables->'prices' = '[5, 4, 4, 6, 4]'::jsonb`); n != 1 {
		var prices string
		_ = b.env.DB.QueryRow(testkit.Ctx(t), "SELECT variables->>'prices' FROM instances WHERE id = 'q-1'").Scan(&prices)
		t.Errorf("prices = %s, want [5, 4, 4, 6, 4]", prices)
	}
}

func TestCancellingAParentCancelsTheChildItsCallActivityStarted(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, nil)
	b.env.Deploy(t, "testdata/parent.bpmn")
	b.pub.Publish(testkit.Relay{MessageID: "start-p-1", Body: map[string]any{"start": "parent", "instance_id": "p-1"}})
	var child string
	testkit.Eventually(t, 30*time.Second, "the child waiting on its task", func() bool {
		err := b.env.DB.QueryRow(testkit.Ctx(t), "SELECT instance_id FROM tasks WHERE type = 'carry'").Scan(&child)
		return err == nil
	})
	if n := b.env.Int(t, "SELECT count(*) FROM instances WHERE id = $1 AND parent_id = 'p-1' AND definition_key = 'child'", child); n != 1 {
		t.Fatalf("the task's instance %s is not p-1's child", child)
	}
	if status, p := b.do(t, "POST", "/instances/p-1/cancel", map[string]any{}); status != http.StatusOK {
		t.Fatalf("cancel: %d %v", status, p)
	}
	b.waitStatus(t, child, "cancelled")
	if n := b.env.Int(t, "SELECT count(*) FROM tasks"); n != 0 {
		t.Errorf("%d task rows left: the child's task must go with it", n)
	}
	if n := b.env.Int(t, "SELECT count(*) FROM instances WHERE id = 'p-1' AND status = 'cancelled'"); n != 1 {
		t.Error("the parent is not cancelled")
	}
}

// jsonValue decodes the value of a Camunda typed variable into v.
func jsonValue(raw json.RawMessage, v any) error {
	var typed struct {
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(raw, &typed); err != nil {
		return err
	}
	return json.Unmarshal(typed.Value, v)
}

// A declined charge ends in a compensation end event: the booking the
// instance made is cancelled by its handler, a task like any other that a
// task worker fetches with the handler's input and completes, and only then
// does the instance complete.
func TestACompensationHandlerIsWorkedByATaskWorkerBeforeItsInstanceCompletes(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, nil)
	b.env.Deploy(t, "testdata/trip.bpmn")
	b.pub.Publish(testkit.Relay{MessageID: "start-trip-1", Body: map[string]any{"start": "trip", "instance_id": "trip-1"}})
	b.applied(t, "start-trip-1")
	book := b.fetch(t, "w", "book", 1, time.Minute, 0)[0]
	b.answer(t, book.ID, "complete", map[string]any{"workerId": "w",
		"variables": map[string]any{"bookingId": map[string]any{"value": "B-1", "type": "String"}}})
	b.stepped(t, "trip-1", "active", outcome(book.ID))
	// The instance's detail lists the booking as what compensation may undo.
	if _, in := b.do(t, "GET", "/instances/trip-1", nil); fmt.Sprint(in["compensable"]) != "[map[element:Book times:1]]" {
		t.Fatalf("compensable = %v, want Book once", in["compensable"])
	}
	charge := b.fetch(t, "w", "charge", 1, time.Minute, 0)[0]
	b.answer(t, charge.ID, "bpmnError", map[string]any{"workerId": "w", "errorCode": "DECLINED"})
	b.stepped(t, "trip-1", "active", outcome(charge.ID))

	undo := b.fetch(t, "w", "cancel-booking", 1, time.Minute, 0)
	if len(undo) != 1 {
		t.Fatalf("fetched %d cancel-booking tasks, want the handler's one", len(undo))
	}
	if _, in := b.do(t, "GET", "/instances/trip-1", nil); fmt.Sprint(in["compensable"]) != "[]" {
		t.Fatalf("compensable = %v while its handler runs, want none left", in["compensable"])
	}
	var booking string
	if err := jsonValue(undo[0].Variables["booking"], &booking); err != nil || booking != "B-1" {
		t.Fatalf("the handler's task sees booking %q (%v), want its input B-1", booking, err)
	}
	b.answer(t, undo[0].ID, "complete", map[string]any{"workerId": "w"})
	b.stepped(t, "trip-1", "completed", outcome(undo[0].ID))
}

package api_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/testkit"
)

// one fetches the one task of topic there is.
func (b *bundle) one(t *testing.T, topic string) locked {
	t.Helper()
	got := b.fetch(t, "w", topic, 5, time.Minute, 0)
	if len(got) != 1 {
		t.Fatalf("fetching %s: %d tasks, want 1", topic, len(got))
	}
	return got[0]
}

// An /engine-rest worker completes the execution listeners' jobs around a
// service task as it completes the task's own; a user task's completion
// through /v1 stays completing until its completing listener's job is done.
func TestListenerJobsRunThroughEngineRestAndHoldAUserTaskCompletion(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, nil)
	b.env.Deploy(t, "testdata/listened.bpmn")
	b.pub.Publish(testkit.Relay{MessageID: "start-l1", Body: map[string]any{"start": "listened", "instance_id": "l1"}})
	b.applied(t, "start-l1")

	job := b.one(t, "charge-start")
	if job.ActivityID != "Charge" || job.ProcessInstanceID != "l1" {
		t.Fatalf("listener job = %+v, want one of Charge in l1", job)
	}
	// An instance in its listeners is not migrated: 409, nothing written.
	b.env.Deploy(t, "testdata/listened-v2.bpmn")
	before := b.snapshot(t, "l1")
	if status, p := b.do(t, "POST", "/instances/l1/migrate", map[string]any{"target_version": 2}); status != http.StatusConflict || p["code"] != fault.MigrateListener {
		t.Fatalf("migrating: %d %v, want 409 %s", status, p, fault.MigrateListener)
	}
	if b.snapshot(t, "l1") != before {
		t.Fatal("a refused migration changed the instance")
	}
	if got := b.fetch(t, "w", "charge", 5, time.Minute, 0); len(got) != 0 {
		t.Fatalf("the task was created before its start listener's job completed: %+v", got)
	}
	b.answer(t, job.ID, "complete", map[string]any{"workerId": "w",
		"variables": map[string]any{"limit": map[string]any{"value": 50, "type": "Integer"}}})
	b.applied(t, outcome(job.ID))
	task := b.one(t, "charge")
	if string(task.Variables["limit"]) == "" {
		t.Errorf("the task does not see the start listener's variable: %v", task.Variables)
	}
	b.answer(t, task.ID, "complete", map[string]any{"workerId": "w"})
	b.applied(t, outcome(task.ID))
	job = b.one(t, "charge-end")
	b.answer(t, job.ID, "complete", map[string]any{"workerId": "w",
		"variables": map[string]any{"charged": map[string]any{"value": true, "type": "Boolean"}}})
	b.applied(t, outcome(job.ID))

	_, p := b.do(t, "GET", "/user-tasks?state=created", nil)
	tasks, _ := asList(p["user_tasks"])
	if len(tasks) != 1 || tasks[0]["instance_id"] != "l1" {
		t.Fatalf("user tasks = %v, want Approve of l1", tasks)
	}
	id := fmt.Sprint(tasks[0]["id"])
	if status, code := b.completeAs(t, "", id, map[string]any{"variables": map[string]any{"approved": true}}); status != http.StatusNoContent {
		t.Fatalf("completing: %d %s", status, code)
	}
	b.applied(t, outcome(id))
	if _, u := b.do(t, "GET", "/user-tasks/"+id, nil); u["state"] != "completing" {
		t.Fatalf("with its completing listener's job open the task is %v, want completing", u["state"])
	}
	if n := b.env.Int(t, "SELECT count(*) FROM instances WHERE id = 'l1' AND status = 'active' AND NOT variables ? 'approved'"); n != 1 {
		t.Fatal("the completion took effect before its completing listener's job completed")
	}
	job = b.one(t, "approve-check")
	if job.ActivityID != "Approve" {
		t.Fatalf("listener job = %+v, want one of Approve", job)
	}
	b.answer(t, job.ID, "complete", map[string]any{"workerId": "w"})
	b.stepped(t, "l1", "completed", outcome(job.ID))
	var vars map[string]any
	if err := b.env.DB.QueryRow(testkit.Ctx(t), "SELECT variables FROM instances WHERE id = 'l1'").Scan(&vars); err != nil {
		t.Fatal(err)
	}
	if vars["approved"] != true || vars["charged"] != true || vars["limit"] != nil {
		t.Errorf("variables %v: want approved and charged, limit local to Charge", vars)
	}
	if n := b.env.Int(t, "SELECT count(*) FROM tasks WHERE instance_id = 'l1'"); n != 0 {
		t.Errorf("%d task rows left", n)
	}
	b.env.AssertNoClaimsHeld(t)
}

// A listener's job that throws a BPMN error through /engine-rest stops its
// element in an incident SUTRA.INCIDENT.LISTENER; the incident's retry
// creates that listener's job again, and the instance goes on.
func TestABpmnErrorFromAListenerJobIsAnIncidentWhoseRetryCreatesTheJobAgain(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, nil)
	b.env.Deploy(t, "testdata/listened.bpmn")
	b.pub.Publish(testkit.Relay{MessageID: "start-l2", Body: map[string]any{"start": "listened", "instance_id": "l2"}})
	b.applied(t, "start-l2")
	job := b.one(t, "charge-start")
	b.answer(t, job.ID, "bpmnError", map[string]any{"workerId": "w", "errorCode": "NOPE"})
	b.applied(t, outcome(job.ID))
	_, list := b.do(t, "GET", "/incidents?open=true", nil)
	incidents, _ := asList(list["incidents"])
	if len(incidents) != 1 || incidents[0]["code"] != fault.IncidentListener || incidents[0]["element"] != "Charge" {
		t.Fatalf("incidents = %v, want one %s at Charge", incidents, fault.IncidentListener)
	}
	if status, p := b.do(t, "POST", "/incidents/"+fmt.Sprint(incidents[0]["id"])+"/retry", nil); status != http.StatusOK {
		t.Fatalf("retry: %d %v", status, p)
	}
	again := b.one(t, "charge-start")
	if again.ID == job.ID || again.ActivityID != "Charge" {
		t.Fatalf("after the retry: %+v, want the listener's job anew", again)
	}
	b.answer(t, again.ID, "complete", map[string]any{"workerId": "w"})
	b.applied(t, outcome(again.ID))
	if task := b.one(t, "charge"); task.ProcessInstanceID != "l2" {
		t.Fatalf("task = %+v", task)
	}
}

// An assignment through /v1 of a user task with an assigning listener is
// answered 202 and takes effect only once the listener's job completes;
// meanwhile the task is assigning and refuses a completion.
func TestAnAssignmentWaitsForTheAssigningListenersJob(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, nil)
	b.env.Deploy(t, "testdata/assigned.bpmn")
	b.pub.Publish(testkit.Relay{MessageID: "start-a1", Body: map[string]any{"start": "assigned", "instance_id": "a1"}})
	b.applied(t, "start-a1")
	_, p := b.do(t, "GET", "/user-tasks?state=created", nil)
	tasks, _ := asList(p["user_tasks"])
	if len(tasks) != 1 {
		t.Fatalf("user tasks = %v, want Review of a1", tasks)
	}
	id := fmt.Sprint(tasks[0]["id"])
	status, ans := b.do(t, "POST", "/user-tasks/"+id+"/assignment", map[string]any{"assignee": "ada"})
	if status != http.StatusAccepted || ans["state"] != "assigning" {
		t.Fatalf("assigning: %d %v, want 202 assigning", status, ans)
	}
	b.applied(t, outcome(id))
	if _, u := b.do(t, "GET", "/user-tasks/"+id, nil); u["state"] != "assigning" || u["assignee"] != nil {
		t.Fatalf("with its assigning listener's job open the task is %v, assigned to %v: want assigning, nobody yet", u["state"], u["assignee"])
	}
	if status, code := b.completeAs(t, "", id, nil); status != http.StatusNotFound {
		t.Fatalf("completing an assigning task: %d %s, want 404", status, code)
	}
	if status, _ := b.do(t, "POST", "/user-tasks/"+id+"/assignment", map[string]any{"assignee": "bob"}); status != http.StatusNotFound {
		t.Fatalf("assigning an assigning task: %d, want 404", status)
	}
	job := b.one(t, "on-assign")
	if job.ActivityID != "Review" {
		t.Fatalf("listener job = %+v, want one of Review", job)
	}
	b.answer(t, job.ID, "complete", map[string]any{"workerId": "w"})
	b.applied(t, outcome(job.ID))
	if _, u := b.do(t, "GET", "/user-tasks/"+id, nil); u["state"] != "created" || u["assignee"] != "ada" {
		t.Fatalf("after the listener's job the task is %v, assigned to %v: want created, ada", u["state"], u["assignee"])
	}
	if status, code := b.completeAs(t, "ada", id, nil); status != http.StatusNoContent {
		t.Fatalf("ada completing: %d %s", status, code)
	}
	b.stepped(t, "a1", "completed", "task:"+id+":2")
	b.env.AssertNoClaimsHeld(t)
}

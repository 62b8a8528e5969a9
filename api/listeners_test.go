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

// openTask starts an instance of process and returns its one open user
// task's id.
func (b *adminBundle) openTask(t *testing.T, process, instance string) string {
	t.Helper()
	b.pub.Publish(testkit.Relay{MessageID: "start-" + instance, Body: map[string]any{"start": process, "instance_id": instance}})
	b.applied(t, "start-"+instance)
	_, p := b.do(t, "GET", "/user-tasks?state=created", nil)
	tasks, _ := asList(p["user_tasks"])
	for _, task := range tasks {
		if task["instance_id"] == instance {
			return fmt.Sprint(task["id"])
		}
	}
	t.Fatalf("%s has no open user task: %v", instance, tasks)
	return ""
}

// An update through PATCH /v1/user-tasks/{id} of a user task with an
// updating listener is answered 202 and takes effect only once the
// listener's job, completed through /engine-rest, is done; meanwhile the
// task is updating and takes no assignment, update nor completion.
func TestAnUpdateWaitsForTheUpdatingListenersJob(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, nil)
	b.env.Deploy(t, "testdata/updated.bpmn")
	id := b.openTask(t, "updated", "u1")
	change := map[string]any{"candidate_groups": []string{"managers"}, "candidate_users": []string{"ada"}, "due_date": "",
		"follow_up_date": "2029-12-24T09:00:00+01:00", "priority": 90}
	status, ans := b.do(t, "PATCH", "/user-tasks/"+id, change)
	if status != http.StatusAccepted || ans["state"] != "updating" {
		t.Fatalf("updating: %d %v, want 202 updating", status, ans)
	}
	b.applied(t, outcome(id))
	if _, u := b.do(t, "GET", "/user-tasks/"+id, nil); u["state"] != "updating" || u["priority"] != 40.0 || u["due_date"] != "2030-01-01T12:00:00Z" {
		t.Fatalf("with its updating listener's job open the task is %v: want updating, unchanged", u)
	}
	for _, call := range []struct {
		method, path string
		body         map[string]any
	}{{"PATCH", "/user-tasks/" + id, map[string]any{"priority": 10}}, {"POST", "/user-tasks/" + id + "/assignment", map[string]any{"assignee": "bob"}},
		{"POST", "/user-tasks/" + id + "/completion", map[string]any{"override": true}}} {
		if status, p := b.do(t, call.method, call.path, call.body); status != http.StatusNotFound || p["code"] != fault.TaskNotFound {
			t.Fatalf("%s %s of an updating task: %d %v, want 404 %s", call.method, call.path, status, p, fault.TaskNotFound)
		}
	}
	job := b.one(t, "on-update")
	if job.ActivityID != "Review" {
		t.Fatalf("listener job = %+v, want one of Review", job)
	}
	b.answer(t, job.ID, "complete", map[string]any{"workerId": "w"})
	b.applied(t, outcome(job.ID))
	_, u := b.do(t, "GET", "/user-tasks/"+id, nil)
	groups, _ := u["candidate_groups"].([]any)
	users, _ := u["candidate_users"].([]any)
	if u["state"] != "created" || len(groups) != 1 || groups[0] != "managers" || len(users) != 1 || users[0] != "ada" ||
		u["due_date"] != nil || u["follow_up_date"] != "2029-12-24T09:00:00+01:00" || u["priority"] != 90.0 {
		t.Fatalf("after the listener's job the task is %v: want created with the update applied", u)
	}
	if status, code := b.completeAs(t, "", id, nil); status != http.StatusNoContent {
		t.Fatalf("completing: %d %s", status, code)
	}
	b.stepped(t, "u1", "completed", "task:"+id+":2")
	b.env.AssertNoClaimsHeld(t)
}

// Without updating listeners an update applies at once (204); one that
// changes nothing or holds a bad value is refused with nothing changed.
func TestAnUpdateWithoutUpdatingListenersAppliesAtOnce(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, nil)
	b.env.Deploy(t, "testdata/assigned.bpmn")
	id := b.openTask(t, "assigned", "u2")
	for _, bad := range []map[string]any{{}, {"priority": 101}, {"due_date": "2030-01-01T12:00:00"}, {"candidate_users": []string{" "}}, {"assignee": "ada"}} {
		if status, p := b.do(t, "PATCH", "/user-tasks/"+id, bad); status != http.StatusBadRequest || p["code"] != fault.APIInvalid {
			t.Fatalf("update %v: %d %v, want 400 %s", bad, status, p, fault.APIInvalid)
		}
	}
	if status, p := b.do(t, "PATCH", "/user-tasks/"+id, map[string]any{"priority": 7, "due_date": "2030-02-01T00:00:00Z"}); status != http.StatusNoContent {
		t.Fatalf("update: %d %v, want 204", status, p)
	}
	if _, u := b.do(t, "GET", "/user-tasks/"+id, nil); u["state"] != "created" || u["priority"] != 7.0 || u["due_date"] != "2030-02-01T00:00:00Z" {
		t.Fatalf("after the update the task is %v", u)
	}
	if status, _ := b.do(t, "PATCH", "/user-tasks/999999", map[string]any{"priority": 7}); status != http.StatusNotFound {
		t.Fatalf("updating a task that does not exist: %d, want 404", status)
	}
}

// A cancel through /v1 of an instance whose user task has canceling
// listeners answers 202 cancelling: the task closes at once, the
// listeners' jobs run one after the other through /engine-rest (a failed
// one is an incident whose retry creates it again), a second cancel
// changes nothing, and the instance ends cancelled after the last job.
func TestAnInstanceCancelWaitsForTheCancelingListenersJobs(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, nil)
	b.env.Deploy(t, "testdata/canceled.bpmn")
	id := b.openTask(t, "canceled", "c1")
	for range 2 {
		status, ans := b.do(t, "POST", "/instances/c1/cancel", nil)
		if status != http.StatusAccepted || ans["status"] != "cancelling" || ans["instance_id"] != "c1" {
			t.Fatalf("cancelling: %d %v, want 202 cancelling", status, ans)
		}
	}
	if _, in := b.do(t, "GET", "/instances/c1", nil); in["status"] != "cancelling" {
		t.Fatalf("instance status %v, want cancelling", in["status"])
	}
	if status, code := b.completeAs(t, "", id, nil); status != http.StatusNotFound {
		t.Fatalf("completing the canceled task: %d %s, want 404", status, code)
	}
	job := b.one(t, "on-cancel")
	if job.ActivityID != "Review" {
		t.Fatalf("listener job = %+v, want one of Review", job)
	}
	if got := b.fetch(t, "w", "on-cancel-notify", 5, time.Minute, 0); len(got) != 0 {
		t.Fatalf("the second canceling listener's job is open before the first completed: %+v", got)
	}
	b.answer(t, job.ID, "failure", map[string]any{"workerId": "w", "errorMessage": "down", "retries": 0})
	b.applied(t, outcome(job.ID))
	_, list := b.do(t, "GET", "/incidents?open=true&instance_id=c1", nil)
	incidents, _ := asList(list["incidents"])
	if len(incidents) != 1 || incidents[0]["code"] != fault.IncidentTaskFailed || incidents[0]["element"] != "Review" {
		t.Fatalf("incidents = %v, want one %s at Review", incidents, fault.IncidentTaskFailed)
	}
	if status, p := b.do(t, "POST", "/incidents/"+fmt.Sprint(incidents[0]["id"])+"/retry", nil); status != http.StatusOK {
		t.Fatalf("retry: %d %v", status, p)
	}
	job = b.one(t, "on-cancel")
	b.answer(t, job.ID, "complete", map[string]any{"workerId": "w"})
	b.applied(t, outcome(job.ID))
	if n := b.env.Int(t, "SELECT count(*) FROM instances WHERE id = 'c1' AND status = 'cancelling'"); n != 1 {
		t.Fatal("the instance ended before its last canceling listener's job")
	}
	job = b.one(t, "on-cancel-notify")
	b.answer(t, job.ID, "complete", map[string]any{"workerId": "w"})
	b.stepped(t, "c1", "cancelled", outcome(job.ID))
	if n := b.env.Int(t, "SELECT count(*) FROM tasks WHERE instance_id = 'c1'"); n != 0 {
		t.Errorf("%d task rows left", n)
	}
	if status, p := b.do(t, "POST", "/instances/c1/cancel", nil); status != http.StatusConflict || p["code"] != fault.NotWaiting {
		t.Fatalf("cancelling a cancelled instance: %d %v, want 409 %s", status, p, fault.NotWaiting)
	}
	b.env.AssertNoClaimsHeld(t)
}

// An interrupting message boundary event on a user task with a canceling
// listener: the task closes when the message arrives, and the boundary's
// flow, with the message's variables, is taken only once an /engine-rest
// worker completed the listener's job.
func TestABoundaryEventWaitsForTheCancelingListenersJob(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, nil)
	b.env.Deploy(t, "testdata/withdrawn.bpmn")
	b.pub.Publish(testkit.Relay{MessageID: "start-w1", Body: map[string]any{"start": "withdrawn", "instance_id": "w1",
		"variables": map[string]any{"orderId": "o-w1"}}})
	b.applied(t, "start-w1")
	_, p := b.do(t, "GET", "/user-tasks?state=created", nil)
	tasks, _ := asList(p["user_tasks"])
	if len(tasks) != 1 || tasks[0]["instance_id"] != "w1" {
		t.Fatalf("user tasks = %v, want Review of w1", tasks)
	}
	id := fmt.Sprint(tasks[0]["id"])
	b.pub.Publish(testkit.Relay{MessageID: "withdraw-w1", Body: map[string]any{"message": "withdraw", "correlation_key": "o-w1",
		"variables": map[string]any{"reason": "changed my mind"}}})
	b.applied(t, "withdraw-w1")
	if status, _ := b.do(t, "GET", "/user-tasks/"+id, nil); status != http.StatusNotFound {
		t.Fatalf("the interrupted user task answers %d, want 404", status)
	}
	if n := b.env.Int(t, "SELECT count(*) FROM instances WHERE id = 'w1' AND status = 'active' AND NOT variables ? 'reason'"); n != 1 {
		t.Fatal("the boundary event completed before the canceling listener's job")
	}
	job := b.one(t, "on-withdraw")
	if job.ActivityID != "Review" {
		t.Fatalf("listener job = %+v, want one of Review", job)
	}
	b.answer(t, job.ID, "complete", map[string]any{"workerId": "w"})
	b.stepped(t, "w1", "completed", outcome(job.ID))
	if n := b.env.Int(t, "SELECT count(*) FROM instances WHERE id = 'w1' AND variables->>'reason' = 'changed my mind'"); n != 1 {
		t.Error("the boundary event did not complete with the message's variables")
	}
	b.env.AssertNoClaimsHeld(t)
}

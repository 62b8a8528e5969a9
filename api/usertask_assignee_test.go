package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/testkit"
)

// completeAs posts a user task's completion as caller ("": no
// X-Sutra-Caller) and returns the status and the problem's code.
func (b *adminBundle) completeAs(t *testing.T, caller, id string, body map[string]any) (int, string) {
	t.Helper()
	raw, _ := json.Marshal(body)
	req, err := http.NewRequest(http.MethodPost, b.v1+"/user-tasks/"+id+"/completion", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	if caller != "" {
		req.Header.Set("X-Sutra-Caller", caller)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p struct{ Code string }
	raw, _ = io.ReadAll(resp.Body)
	_ = json.Unmarshal(raw, &p)
	return resp.StatusCode, p.Code
}

// reviewTask starts a review instance assigned to reviewer and returns its
// user task's id.
func (b *adminBundle) reviewTask(t *testing.T, instance, reviewer string) string {
	t.Helper()
	b.pub.Publish(testkit.Relay{MessageID: "start-" + instance, Body: map[string]any{"start": "review", "instance_id": instance,
		"variables": map[string]any{"reviewer": reviewer}}})
	b.applied(t, "start-"+instance) // its step created the user task
	_, p := b.do(t, "GET", "/user-tasks?assignee="+reviewer, nil)
	tasks, _ := asList(p["user_tasks"])
	for _, task := range tasks {
		if task["instance_id"] == instance {
			return fmt.Sprint(task["id"])
		}
	}
	t.Fatalf("%s has no user task for %s: %v", instance, reviewer, tasks)
	return ""
}

func TestOnlyTheAssigneeCompletesAnAssignedUserTaskUnlessTheCallOverrides(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, nil)
	b.env.Deploy(t, "testdata/review.bpmn")
	approved := map[string]any{"variables": map[string]any{"approved": true}}

	id := b.reviewTask(t, "c-1", "ada")
	for _, caller := range []string{"bob", ""} {
		if status, code := b.completeAs(t, caller, id, approved); status != http.StatusForbidden || code != fault.TaskNotAssignee {
			t.Fatalf("%q completing ada's task: %d %s, want 403 %s", caller, status, code, fault.TaskNotAssignee)
		}
	}
	if _, task := b.do(t, "GET", "/user-tasks/"+id, nil); task["state"] != "created" {
		t.Fatalf("after the refusals the task is %v, want created", task["state"])
	}
	if status, code := b.completeAs(t, "ada", id, approved); status != http.StatusNoContent {
		t.Fatalf("ada completing her task: %d %s", status, code)
	}
	b.stepped(t, "c-1", "completed", outcome(id))

	// The admin's override, and an unassigned task, which anyone completes.
	id = b.reviewTask(t, "c-2", "ada")
	if status, code := b.completeAs(t, "bob", id, map[string]any{"override": true, "variables": map[string]any{"approved": false}}); status != http.StatusNoContent {
		t.Fatalf("bob completing ada's task with override: %d %s", status, code)
	}
	b.stepped(t, "c-2", "completed", outcome(id))
	id = b.reviewTask(t, "c-3", "ada")
	if status, _ := b.do(t, "POST", "/user-tasks/"+id+"/assignment", map[string]any{"assignee": nil}); status != http.StatusNoContent {
		t.Fatalf("unassigning: %d", status)
	}
	if status, code := b.completeAs(t, "bob", id, approved); status != http.StatusNoContent {
		t.Fatalf("bob completing an unassigned task: %d %s", status, code)
	}
	b.stepped(t, "c-3", "completed", outcome(id))
}

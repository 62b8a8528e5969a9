package api_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/sutra-run/worker/internal/testkit"
)

// jsonVar decodes a Json typed variable of a fetched task.
func jsonVar(t *testing.T, task locked, name string) any {
	t.Helper()
	var text string
	if err := jsonValue(task.Variables[name], &text); err != nil {
		t.Fatalf("variable %s of task %s: %v (%s)", name, task.ActivityID, err, task.Variables[name])
	}
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// jsonArg is v as a Json typed variable of a completion.
func jsonArg(t *testing.T, v any) map[string]any {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]any{"value": string(b), "type": "Json"}
}

// An AI-agent-shaped ad-hoc subprocess, its agent a plain external-task
// worker: it reads what it may activate, chooses a tool with arguments by
// completing its job with adHocSubProcessResult, reads the tool's result
// when asked again, and ends the subprocess.
func TestAnAdHocSubprocessIsDrivenByAPlainJobWorker(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.env.Deploy(t, "testdata/agent.bpmn")
	b.pub.Publish(testkit.Relay{MessageID: "start-ag-1", Body: map[string]any{"start": "agent", "instance_id": "ag-1"}})
	b.applied(t, "start-ag-1")

	job := b.fetch(t, "llm", "agent", 1, time.Minute, 0)
	if len(job) != 1 {
		t.Fatalf("agent jobs: %v", job)
	}
	els, _ := jsonVar(t, job[0], "adHocSubProcessElements").([]any)
	if len(els) != 2 || els[0].(map[string]any)["elementId"] != "Lookup" || els[0].(map[string]any)["documentation"] != "Finds an order by its id." {
		t.Fatalf("adHocSubProcessElements = %v", els)
	}
	b.answer(t, job[0].ID, "complete", map[string]any{"workerId": "llm", "variables": map[string]any{
		"agentContext": jsonArg(t, map[string]any{"turn": 1}),
		"adHocSubProcessResult": jsonArg(t, map[string]any{"activateElements": []any{
			map[string]any{"elementId": "Lookup", "variables": map[string]any{"toolCall": map[string]any{"_meta": map[string]any{"id": "call-1", "name": "Lookup"}, "orderId": "o-42"}}},
		}}),
	}})
	b.applied(t, outcome(job[0].ID))

	tool := b.fetch(t, "tools", "lookup", 1, time.Minute, 0)
	if len(tool) != 1 {
		t.Fatal("the chosen tool has no task")
	}
	var orderID string
	if err := jsonValue(tool[0].Variables["orderId"], &orderID); err != nil || orderID != "o-42" {
		t.Fatalf("the tool's orderId (fromAi) = %q, %v", orderID, err)
	}
	if n := len(b.fetch(t, "tools", "notify", 1, time.Minute, 0)); n != 0 {
		t.Fatal("a tool the worker did not choose runs")
	}
	b.answer(t, tool[0].ID, "complete", map[string]any{"workerId": "tools", "variables": map[string]any{
		"toolCallResult": map[string]any{"value": "order o-42: one pair of shoes", "type": "String"}}})
	b.applied(t, outcome(tool[0].ID))

	job = b.fetch(t, "llm", "agent", 1, time.Minute, 0)
	if len(job) != 1 {
		t.Fatal("the worker is not asked again once its tool ended")
	}
	want := []any{map[string]any{"id": "call-1", "name": "Lookup", "content": "order o-42: one pair of shoes"}}
	if got := jsonVar(t, job[0], "toolCallResults"); !reflect.DeepEqual(got, want) {
		t.Fatalf("toolCallResults = %v, want %v", got, want)
	}
	if got := jsonVar(t, job[0], "agentContext"); !reflect.DeepEqual(got, map[string]any{"turn": 1.0}) {
		t.Errorf("agentContext = %v: the worker's memory is kept in the subprocess", got)
	}
	b.answer(t, job[0].ID, "complete", map[string]any{"workerId": "llm", "variables": map[string]any{
		"agent":                 jsonArg(t, map[string]any{"responseText": "Your order ships today."}),
		"adHocSubProcessResult": jsonArg(t, map[string]any{"isCompletionConditionFulfilled": true}),
	}})
	b.stepped(t, "ag-1", "completed", outcome(job[0].ID))
	if n := b.env.Int(t, `SELECT count(*) FROM instances WHERE id = 'ag-1' AND variables->'agent'->>'responseText' = 'Your order ships today.'
		AND jsonb_array_length(variables->'toolCallResults') = 1 AND NOT variables ? 'adHocSubProcessResult' AND NOT variables ? 'toolCallResult'`); n != 1 {
		var vars string
		_ = b.env.DB.QueryRow(testkit.Ctx(t), "SELECT variables::text FROM instances WHERE id = 'ag-1'").Scan(&vars)
		t.Errorf("variables = %s", vars)
	}
}

// Call activities by binding, through the worker: callee version 1 is
// deployed beside caller, version 2 tagged "next" and version 3 alone.
func TestCallActivitiesStartTheVersionTheirBindingNames(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.env.Deploy(t, "testdata/bindings.bpmn")
	b.env.Deploy(t, "testdata/callee-v2.bpmn")
	b.env.Deploy(t, "testdata/callee-v3.bpmn")
	for how, version := range map[string]int64{"deployment": 1, "tag": 2, "latest": 3} {
		id := "c-" + how
		b.pub.Publish(testkit.Relay{MessageID: "start-" + id, Body: map[string]any{"start": "caller", "instance_id": id, "variables": map[string]any{"how": how}}})
		testkit.Eventually(t, 30*time.Second, id+"'s child", func() bool {
			return b.env.Int(t, "SELECT count(*) FROM instances WHERE parent_id = $1", id) == 1
		})
		if got := b.env.Int(t, "SELECT definition_version FROM instances WHERE parent_id = $1", id); got != version {
			t.Errorf("%s: the child runs callee version %d, want %d", how, got, version)
		}
	}
	b.pub.Publish(testkit.Relay{MessageID: "start-c-missing", Body: map[string]any{"start": "caller", "instance_id": "c-missing", "variables": map[string]any{"how": "missing"}}})
	testkit.Eventually(t, 30*time.Second, "the missing tag's incident", func() bool {
		return b.env.Int(t, `SELECT count(*) FROM incidents WHERE instance_id = 'c-missing' AND element_id = 'ByMissingTag'
			AND code = 'SUTRA.INCIDENT.CALLED_ELEMENT' AND message LIKE '%tagged "nope"%' AND resolved_at IS NULL`) == 1
	})
	if n := b.env.Int(t, "SELECT count(*) FROM instances WHERE parent_id = 'c-missing'"); n != 0 {
		t.Errorf("%d children started for a tag no version carries", n)
	}
}

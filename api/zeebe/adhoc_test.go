package zeebe_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/camunda/zeebe/clients/go/v8/pkg/pb"

	"github.com/sutra-run/worker/internal/testkit"
)

// The AI-agent pattern on the 8.4 gateway, whose CompleteJobRequest has no
// job result: the agent, a plain Zeebe job worker, answers its ad-hoc
// subprocess's job with the variable adHocSubProcessResult.
func TestAPlainZeebeWorkerDrivesAnAdHocSubprocess(t *testing.T) {
	t.Parallel()
	b := setupJobs(t, nil)
	b.env.Deploy(t, "../testdata/agent.bpmn")
	b.pub.Publish(testkit.Relay{MessageID: "start-ag-1", Body: map[string]any{"start": "agent", "instance_id": "ag-1"}})
	b.applied(t, "start-ag-1")
	ctx := testkit.Ctx(t)
	complete := func(job *pb.ActivatedJob, vars map[string]any) {
		t.Helper()
		body, _ := json.Marshal(vars)
		if _, err := b.gw.CompleteJob(ctx, &pb.CompleteJobRequest{JobKey: job.Key, Variables: string(body)}); err != nil {
			t.Fatal(err)
		}
		b.applied(t, outcome(job.Key, 1))
	}
	varsOf := func(job *pb.ActivatedJob) map[string]any {
		var v map[string]any
		if err := json.Unmarshal([]byte(job.Variables), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}

	agent := b.one(t, "agent")
	if els, _ := varsOf(agent)["adHocSubProcessElements"].([]any); len(els) != 2 {
		t.Fatalf("the agent's job shows %v", varsOf(agent))
	}
	call := func(id, element string, args map[string]any) map[string]any {
		args["_meta"] = map[string]any{"id": id, "name": element}
		return map[string]any{"elementId": element, "variables": map[string]any{"toolCall": args}}
	}
	complete(agent, map[string]any{"adHocSubProcessResult": map[string]any{"activateElements": []any{
		call("c1", "Lookup", map[string]any{"orderId": "o-1"}), call("c2", "Notify", map[string]any{"text": "on its way"}),
	}}})
	lookup, notify := b.one(t, "lookup"), b.one(t, "notify")
	if varsOf(lookup)["orderId"] != "o-1" || varsOf(notify)["text"] != "on its way" {
		t.Fatalf("tool jobs carry %v and %v", varsOf(lookup), varsOf(notify))
	}
	complete(notify, map[string]any{"toolCallResult": "sent"})
	stale := b.one(t, "agent") // asked again after Notify, then withdrawn after Lookup
	complete(lookup, map[string]any{"toolCallResult": "found"})
	if _, err := b.gw.CompleteJob(ctx, &pb.CompleteJobRequest{JobKey: stale.Key}); err == nil {
		t.Error("the withdrawn agent job completed")
	}
	agent = b.one(t, "agent")
	want := []any{
		map[string]any{"id": "c2", "name": "Notify", "content": "sent"},
		map[string]any{"id": "c1", "name": "Lookup", "content": "found"},
	}
	if got := varsOf(agent)["toolCallResults"]; !reflect.DeepEqual(got, want) {
		t.Fatalf("toolCallResults = %v, want %v", got, want)
	}
	complete(agent, map[string]any{"agent": "done", "adHocSubProcessResult": map[string]any{"isCompletionConditionFulfilled": true}})
	if st, vars, _ := b.instance(t, "ag-1"); st != "completed" || vars["agent"] != "done" || !reflect.DeepEqual(vars["toolCallResults"], want) {
		t.Errorf("instance %s with %v", st, vars)
	}
}

package engine

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sutra-run/worker/fault"
)

// miTask is start → service task "Ship" (multi-instance over items) → end,
// with an interrupting timer boundary "Late" on the body.
func miTask(sequential, extra, completion string) string {
	return `<bpmn:startEvent id="S" />
<bpmn:serviceTask id="Ship"><bpmn:extensionElements><zeebe:taskDefinition type="ship" />` + extra + `</bpmn:extensionElements>
  <bpmn:multiInstanceLoopCharacteristics isSequential="` + sequential + `"><bpmn:extensionElements>
    <zeebe:loopCharacteristics inputCollection="=items" inputElement="item" outputCollection="results" outputElement="=result" />
  </bpmn:extensionElements>` + completion + `</bpmn:multiInstanceLoopCharacteristics></bpmn:serviceTask>
<bpmn:boundaryEvent id="Late" attachedToRef="Ship"><bpmn:timerEventDefinition><bpmn:timeDuration>PT1H</bpmn:timeDuration></bpmn:timerEventDefinition></bpmn:boundaryEvent>
<bpmn:endEvent id="E" /><bpmn:endEvent id="TooLate" />` + flow("F1", "S", "Ship") + flow("F2", "Ship", "E") + flow("F3", "Late", "TooLate")
}

func items(n int) []any {
	out := make([]any, n)
	for k := range out {
		out[k] = string(rune('a' + k))
	}
	return out
}

// taskTokens maps each open task's item to its token id.
func taskTokens(tasks []Task) map[string]string {
	out := map[string]string{}
	for _, task := range tasks {
		out[task.Variables["item"].(string)] = task.TokenID
	}
	return out
}

func TestParallelMultiInstanceRunsOneTaskPerItemAndCollectsResults(t *testing.T) {
	x := newInstance(t, parse(t, miTask("false", "", ""), ""))
	eff := x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"items": items(3)}})
	if len(eff.Tasks) != 3 || len(eff.Timers) != 1 || eff.Timers[0].Element != "Late" {
		t.Fatalf("effects = %+v", eff)
	}
	for k, task := range eff.Tasks {
		// Its own input only: neither the instance's items nor the body's
		// output collection is copied into each task.
		want := map[string]any{"item": items(3)[k], "loopCounter": float64(k + 1), "result": nil}
		if !reflect.DeepEqual(task.Variables, want) {
			t.Errorf("task %d variables = %v, want %v", k, task.Variables, want)
		}
	}
	body := x.body("Ship")
	if body.Wait != WaitMulti || body.Multi.Instances != 3 || !reflect.DeepEqual(body.Vars, map[string]any{"results": []any{nil, nil, nil}}) {
		t.Errorf("body = %+v", body)
	}
	ids := taskTokens(eff.Tasks)
	// Complete out of order: results keep the input order.
	for _, item := range []string{"c", "a"} {
		eff = x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: ids[item], Variables: map[string]any{"result": "r-" + item}})
		if eff.Completed {
			t.Fatalf("completed after %s", item)
		}
	}
	if _, leaked := x.in.State.Variables["result"]; leaked {
		t.Errorf("an inner instance's result reached the instance: %v", x.in.State.Variables)
	}
	eff = x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: ids["b"], Variables: map[string]any{"result": "r-b"}})
	if !eff.Completed || !slices.Contains(eff.CloseWaits, WaitRef{TokenID: body.ID}) {
		t.Fatalf("last completion = %+v: the body and its timer must close", eff)
	}
	if got := x.in.State.Variables["results"]; !reflect.DeepEqual(got, []any{"r-a", "r-b", "r-c"}) {
		t.Errorf("results = %v", got)
	}
}

func TestSequentialMultiInstanceRunsItemsOneAfterTheOther(t *testing.T) {
	x := newInstance(t, parse(t, miTask("true", "", ""), ""))
	eff := x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"items": items(3)}})
	for k := range 3 {
		if len(eff.Tasks) != 1 || eff.Tasks[0].Variables["loopCounter"] != float64(k+1) || eff.Tasks[0].Variables["item"] != items(3)[k] {
			t.Fatalf("instance %d: tasks = %+v", k+1, eff.Tasks)
		}
		eff = x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: eff.Tasks[0].TokenID, Variables: map[string]any{"result": float64(k)}})
	}
	if !eff.Completed || !reflect.DeepEqual(x.in.State.Variables["results"], []any{0.0, 1.0, 2.0}) {
		t.Errorf("effects = %+v, variables %v", eff, x.in.State.Variables)
	}
}

func TestMultiInstanceCompletionConditionEndsTheOtherInstances(t *testing.T) {
	cond := `<bpmn:completionCondition xsi:type="bpmn:tFormalExpression">=numberOfCompletedInstances &gt;= 2 and numberOfActiveInstances = 1 and numberOfInstances = 3</bpmn:completionCondition>`
	x := newInstance(t, parse(t, miTask("false", "", cond), ""))
	ids := taskTokens(x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"items": items(3)}}).Tasks)
	x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: ids["a"], Variables: map[string]any{"result": 1.0}})
	eff := x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: ids["b"], Variables: map[string]any{"result": 2.0}})
	if !eff.Completed || !slices.Contains(eff.CloseWaits, WaitRef{TokenID: ids["c"]}) {
		t.Fatalf("effects = %+v: the third task must close", eff)
	}
	if got := x.in.State.Variables["results"]; !reflect.DeepEqual(got, []any{1.0, 2.0, nil}) {
		t.Errorf("results = %v", got)
	}
}

func TestInterruptingBoundaryOnMultiInstanceEndsEveryInnerInstance(t *testing.T) {
	x := newInstance(t, parse(t, miTask("false", "", ""), ""))
	eff := x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"items": items(3)}})
	ids := taskTokens(eff.Tasks)
	x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: ids["a"], Variables: map[string]any{"result": 1.0}})
	body := x.body("Ship")
	x.now = t0.Add(time.Hour)
	eff = x.step(Trigger{Kind: TriggerTimer, TokenID: body.ID, Element: "Late"})
	want := []WaitRef{{TokenID: ids["b"]}, {TokenID: ids["c"]}, {TokenID: body.ID}}
	if !reflect.DeepEqual(eff.CloseWaits, want) || !eff.Completed {
		t.Fatalf("effects = %+v, want close %+v", eff, want)
	}
	if _, ok := x.in.State.Variables["results"]; ok {
		t.Errorf("an interrupted body propagated its output collection: %v", x.in.State.Variables)
	}
	if err := x.fail(Trigger{Kind: TriggerTaskCompleted, TokenID: ids["b"]}); !fault.HasCode(err, fault.NotWaiting) {
		t.Errorf("late completion: %v", err)
	}
}

func TestMultiInstanceOverAnEmptyCollectionPassesAtOnce(t *testing.T) {
	x := newInstance(t, parse(t, miTask("false", "", ""), ""))
	eff := x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"items": []any{}}})
	if !reflect.DeepEqual(eff, Effects{Completed: true, Passed: []string{"S", "F1", "Ship", "F2", "E"}}) {
		t.Errorf("effects = %+v: the body's timer opens and closes within the step", eff)
	}
	if got := x.in.State.Variables["results"]; !reflect.DeepEqual(got, []any{}) {
		t.Errorf("results = %#v, want an empty list", got)
	}
}

func TestMultiInstanceWithoutAListRaisesAnIncidentARetryResolves(t *testing.T) {
	x := newInstance(t, parse(t, miTask("false", "", ""), ""))
	eff := x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"items": "a,b"}})
	if len(eff.Incidents) != 1 || !strings.Contains(eff.Incidents[0].Message, "input collection of Ship evaluated to string, not a list") || len(eff.Timers) != 0 {
		t.Fatalf("effects = %+v", eff)
	}
	tok := x.token("Ship")
	eff = x.step(Trigger{Kind: TriggerRetry, TokenID: tok.ID, Variables: map[string]any{"items": items(2)}})
	if !reflect.DeepEqual(eff.ResolvedIncidents, []string{tok.ID}) || len(eff.Tasks) != 2 || len(eff.Timers) != 1 {
		t.Errorf("retry = %+v", eff)
	}
}

func TestMultiInstanceInputMappingsAndOutputsWorkPerInnerInstance(t *testing.T) {
	// Each inner instance maps its item into the task and writes its output
	// to its own scope first: the output element reads it there.
	ext := `<zeebe:ioMapping><zeebe:input source="=item + &quot;!&quot;" target="label" /><zeebe:output source="=label + done" target="result" /></zeebe:ioMapping>`
	x := newInstance(t, parse(t, miTask("false", ext, ""), ""))
	eff := x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"items": items(2)}})
	if eff.Tasks[0].Variables["label"] != "a!" || eff.Tasks[1].Variables["label"] != "b!" {
		t.Fatalf("task variables = %v / %v", eff.Tasks[0].Variables, eff.Tasks[1].Variables)
	}
	ids := taskTokens(eff.Tasks)
	x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: ids["a"], Variables: map[string]any{"done": "1"}})
	x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: ids["b"], Variables: map[string]any{"done": "2"}})
	// With output mappings the job's variables are only their input.
	want := map[string]any{"items": items(2), "results": []any{"a!1", "b!2"}}
	if !reflect.DeepEqual(x.in.State.Variables, want) {
		t.Errorf("variables = %v\nwant %v", x.in.State.Variables, want)
	}
}

// miSub is a parallel multi-instance subprocess whose inner instances each
// wait for a message keyed by their item.
const miSub = `<bpmn:startEvent id="S" />
<bpmn:subProcess id="PerItem">
  <bpmn:multiInstanceLoopCharacteristics><bpmn:extensionElements><zeebe:loopCharacteristics inputCollection="=ids" inputElement="id" /></bpmn:extensionElements></bpmn:multiInstanceLoopCharacteristics>
  <bpmn:startEvent id="SS" /><bpmn:receiveTask id="Confirm" messageRef="MConfirm" /><bpmn:endEvent id="SE" />
  <bpmn:sequenceFlow id="FS1" sourceRef="SS" targetRef="Confirm" /><bpmn:sequenceFlow id="FS2" sourceRef="Confirm" targetRef="SE" />
</bpmn:subProcess>
<bpmn:endEvent id="E" />` + `<bpmn:sequenceFlow id="F1" sourceRef="S" targetRef="PerItem" /><bpmn:sequenceFlow id="F2" sourceRef="PerItem" targetRef="E" />`

const miSubDefs = `<bpmn:message id="MConfirm" name="confirm"><bpmn:extensionElements><zeebe:subscription correlationKey="=id" /></bpmn:extensionElements></bpmn:message>`

func TestMultiInstanceSubprocessScopesEachInstance(t *testing.T) {
	x := newInstance(t, parse(t, miSub, miSubDefs))
	eff := x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"ids": []any{"x", 7.0}}})
	var keys []string
	for _, s := range eff.Subscriptions {
		keys = append(keys, s.CorrelationKey)
	}
	if !slices.Equal(keys, []string{"x", "7"}) {
		t.Fatalf("subscriptions = %+v", eff.Subscriptions)
	}
	if got := x.at(); !slices.Equal(got, []string{"PerItem/multi", "PerItem/scope", "PerItem/scope", "Confirm/message", "Confirm/message"}) {
		t.Errorf("tokens at %v", got)
	}
	x.step(Trigger{Kind: TriggerMessage, Message: "confirm", CorrelationKey: "7"})
	eff = x.step(Trigger{Kind: TriggerMessage, Message: "confirm", CorrelationKey: "x"})
	if !eff.Completed {
		t.Errorf("effects = %+v", eff)
	}
	if _, ok := x.in.State.Variables["id"]; ok {
		t.Errorf("the input element leaked: %v", x.in.State.Variables)
	}
}

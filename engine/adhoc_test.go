package engine

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sutra-run/worker/fault"
)

// adHocBPMN is start → ad-hoc subprocess "AH" (BPMN implementation,
// activating =tools, collecting each activation's result into results) →
// end, with service tasks A and B inside and a timer boundary "Late".
func adHocBPMN(attrs, completion string) string {
	return `<bpmn:startEvent id="S" />
<bpmn:adHocSubProcess id="AH" ` + attrs + `><bpmn:extensionElements><zeebe:adHoc activeElementsCollection="=tools" outputCollection="results" outputElement="=result" /></bpmn:extensionElements>
  <bpmn:serviceTask id="A"><bpmn:extensionElements><zeebe:taskDefinition type="a" /></bpmn:extensionElements></bpmn:serviceTask>
  <bpmn:serviceTask id="B"><bpmn:extensionElements><zeebe:taskDefinition type="b" /></bpmn:extensionElements></bpmn:serviceTask>
  ` + completion + `</bpmn:adHocSubProcess>
<bpmn:boundaryEvent id="Late" attachedToRef="AH"><bpmn:timerEventDefinition><bpmn:timeDuration>PT1H</bpmn:timeDuration></bpmn:timerEventDefinition></bpmn:boundaryEvent>
<bpmn:endEvent id="E" /><bpmn:endEvent id="TooLate" />` + flow("F1", "S", "AH") + flow("F2", "AH", "E") + flow("F3", "Late", "TooLate")
}

// adHocToken returns the token of the ad-hoc subprocess at element (not one
// of its activations).
func (x *instance) adHocToken(element string) Token {
	x.t.Helper()
	for _, tok := range x.in.State.Tokens {
		if tok.Element == element && !tok.Activation {
			return tok
		}
	}
	x.t.Fatalf("no ad-hoc subprocess token at %s: %v", element, x.at())
	return Token{}
}

// tasksAt maps each task's element to the task.
func tasksAt(tasks []Task) map[string]Task {
	out := map[string]Task{}
	for _, task := range tasks {
		out[task.Element] = task
	}
	return out
}

func TestAdHocActivatesItsActiveElementsEachInItsOwnActivation(t *testing.T) {
	x := newInstance(t, parse(t, adHocBPMN("", ""), ""))
	eff := x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"tools": []any{"A", "B", "A"}}})
	if len(eff.Tasks) != 3 || len(eff.Timers) != 1 {
		t.Fatalf("effects = %+v, want three tasks (A twice) and the boundary timer", eff)
	}
	var acts, tasks []Token
	var body Token
	for _, tok := range x.in.State.Tokens {
		switch {
		case tok.Element == "AH" && tok.Activation:
			acts = append(acts, tok)
		case tok.Element == "AH":
			body = tok
		default:
			tasks = append(tasks, tok)
		}
	}
	if body.Wait != WaitAdHoc || len(acts) != 3 || len(tasks) != 3 {
		t.Fatalf("tokens = %+v", x.in.State.Tokens)
	}
	for k, task := range tasks {
		if task.Scope != acts[k].ID || acts[k].Scope != body.ID {
			t.Errorf("task %s is scoped to %s, activation %s to %s: each activity runs in its own activation", task.Element, task.Scope, acts[k].ID, acts[k].Scope)
		}
	}
	els, _ := body.Vars[AdHocElements].([]any)
	if len(els) != 2 || els[0].(map[string]any)["elementId"] != "A" || !reflect.DeepEqual(body.Vars["results"], []any{}) {
		t.Errorf("ad-hoc locals = %v", body.Vars)
	}

	// A result stays in its activation: the output element reads it there.
	x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: eff.Tasks[1].TokenID, Element: "B", Variables: map[string]any{"result": "from B"}})
	if _, leaked := x.in.State.Variables["result"]; leaked {
		t.Errorf("the activation's result leaked into the instance: %v", x.in.State.Variables)
	}
	x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: eff.Tasks[0].TokenID, Element: "A", Variables: map[string]any{"result": "from A"}})
	if x.in.State.Status != StatusActive {
		t.Fatal("completed with an activation still running")
	}
	last := x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: eff.Tasks[2].TokenID, Element: "A", Variables: map[string]any{"result": "again"}})
	if x.in.State.Status != StatusCompleted || !last.Completed {
		t.Fatalf("status %s, tokens %v: with no completion condition it completes once no activation is left", x.in.State.Status, x.at())
	}
	if got := x.in.State.Variables["results"]; !reflect.DeepEqual(got, []any{"from B", "from A", "again"}) {
		t.Errorf("results = %v, want them in order of completion", got)
	}
	if !slices.ContainsFunc(last.CloseWaits, func(w WaitRef) bool { return w.TokenID == body.ID }) {
		t.Errorf("the boundary timer was not closed: %+v", last.CloseWaits)
	}
}

func TestAdHocActiveElementsThatAreNotItsActivitiesStopInAnIncident(t *testing.T) {
	for _, tools := range []any{[]any{"A", "Nope"}, "A", []any{1.0}} {
		x := newInstance(t, parse(t, adHocBPMN("", ""), ""))
		eff := x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"tools": tools}})
		tok := x.adHocToken("AH")
		if tok.Wait != WaitIncident || tok.Incident.Code != fault.IncidentExpression || len(eff.Tasks) != 0 || len(eff.Timers) != 0 {
			t.Fatalf("tools %v: token %+v, effects %+v", tools, tok, eff)
		}
		if !strings.Contains(tok.Incident.Message, "active elements collection of AH") {
			t.Errorf("incident = %s", tok.Incident.Message)
		}
	}
	// A retry after fixing the variable activates them.
	x := newInstance(t, parse(t, adHocBPMN("", ""), ""))
	x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"tools": []any{"Nope"}}})
	eff := x.step(Trigger{Kind: TriggerRetry, TokenID: x.adHocToken("AH").ID, Variables: map[string]any{"tools": []any{"B"}}})
	if len(eff.Tasks) != 1 || eff.Tasks[0].Element != "B" {
		t.Fatalf("retry effects = %+v", eff)
	}
}

func TestAdHocCompletionConditionCancelsTheRemainingActivations(t *testing.T) {
	x := newInstance(t, parse(t, adHocBPMN("", `<bpmn:completionCondition>=count(results) &gt;= 1</bpmn:completionCondition>`), ""))
	eff := x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"tools": []any{"A", "B"}}})
	tasks := tasksAt(eff.Tasks)
	done := x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: tasks["A"].TokenID, Element: "A", Variables: map[string]any{"result": 1.0}})
	if x.in.State.Status != StatusCompleted {
		t.Fatalf("status %s at %v: the condition held, so the subprocess completes", x.in.State.Status, x.at())
	}
	if !slices.ContainsFunc(done.CloseWaits, func(w WaitRef) bool { return w.TokenID == tasks["B"].TokenID }) {
		t.Errorf("B's task was not closed: %+v", done.CloseWaits)
	}
	if got := x.in.State.Variables["results"]; !reflect.DeepEqual(got, []any{1.0}) {
		t.Errorf("results = %v", got)
	}
}

func TestAdHocCompletionConditionWaitsForTheRemainingActivations(t *testing.T) {
	x := newInstance(t, parse(t, adHocBPMN(`cancelRemainingInstances="false"`, `<bpmn:completionCondition>=count(results) &gt;= 1</bpmn:completionCondition>`), ""))
	eff := x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"tools": []any{"A", "B"}}})
	tasks := tasksAt(eff.Tasks)
	x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: tasks["A"].TokenID, Element: "A", Variables: map[string]any{"result": 1.0}})
	if x.in.State.Status != StatusActive || x.token("B").Wait != WaitTask {
		t.Fatalf("status %s at %v: B still runs, so the subprocess waits", x.in.State.Status, x.at())
	}
	if tok := x.adHocToken("AH"); !tok.Fulfilled {
		t.Errorf("the subprocess does not remember its condition held: %+v", tok)
	}
	x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: tasks["B"].TokenID, Element: "B", Variables: map[string]any{"result": 2.0}})
	if x.in.State.Status != StatusCompleted || !reflect.DeepEqual(x.in.State.Variables["results"], []any{1.0, 2.0}) {
		t.Fatalf("status %s, results %v", x.in.State.Status, x.in.State.Variables["results"])
	}
}

func TestAdHocBoundaryTimerEndsItsActivations(t *testing.T) {
	x := newInstance(t, parse(t, adHocBPMN("", ""), ""))
	eff := x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"tools": []any{"A", "B"}}})
	fired := x.step(Trigger{Kind: TriggerTimer, TokenID: eff.Timers[0].TokenID, Element: "Late"})
	if x.in.State.Status != StatusCompleted || len(fired.CloseWaits) != 3 {
		t.Fatalf("status %s, closed %+v: both tasks and the timer close", x.in.State.Status, fired.CloseWaits)
	}
}

// agent is an AI-agent-shaped ad-hoc subprocess run by a plain job worker
// of type "agent": two tools whose inputs come from fromAi, one leading on
// to a second element in its activation.
const agent = `<bpmn:startEvent id="S" />
<bpmn:adHocSubProcess id="Agent"><bpmn:extensionElements>
  <zeebe:taskDefinition type="agent" retries="2" />
  <zeebe:ioMapping><zeebe:input target="agentContext" /><zeebe:output source="=agent" target="agent" /></zeebe:ioMapping>
  <zeebe:adHoc outputCollection="toolCallResults" outputElement="={id: toolCall._meta.id, content: toolCallResult}" />
 </bpmn:extensionElements>
 <bpmn:serviceTask id="Lookup" name="Look up an order"><bpmn:documentation>Finds an order by id.</bpmn:documentation><bpmn:extensionElements>
  <zeebe:taskDefinition type="lookup" />
  <zeebe:ioMapping><zeebe:input source="=fromAi(toolCall.orderId, &quot;the order id&quot;, &quot;string&quot;)" target="orderId" /></zeebe:ioMapping>
 </bpmn:extensionElements></bpmn:serviceTask>
 <bpmn:serviceTask id="Refund"><bpmn:extensionElements>
  <zeebe:taskDefinition type="refund" />
  <zeebe:ioMapping><zeebe:input source="=fromAi(toolCall.amount)" target="amount" /></zeebe:ioMapping>
 </bpmn:extensionElements></bpmn:serviceTask>
 <bpmn:scriptTask id="Note"><bpmn:extensionElements><zeebe:script expression="=&quot;refunded &quot; + string(toolCall.amount)" resultVariable="toolCallResult" /></bpmn:extensionElements></bpmn:scriptTask>
 ` + `<bpmn:sequenceFlow id="FR" sourceRef="Refund" targetRef="Note" />
</bpmn:adHocSubProcess>
<bpmn:endEvent id="E" />` + `<bpmn:sequenceFlow id="F1" sourceRef="S" targetRef="Agent" /><bpmn:sequenceFlow id="F2" sourceRef="Agent" targetRef="E" />`

// call is one tool call of the agent's result.
func call(id, element string, args map[string]any) map[string]any {
	tc := map[string]any{"_meta": map[string]any{"id": id, "name": element}}
	for k, v := range args {
		tc[k] = v
	}
	return map[string]any{"elementId": element, "variables": map[string]any{"toolCall": tc}}
}

func TestAdHocJobWorkerChoosesToolsAndCompletesTheSubprocess(t *testing.T) {
	x := newInstance(t, parse(t, agent, ""))
	eff := x.step(Trigger{Kind: TriggerStart})
	if len(eff.Tasks) != 1 || eff.Tasks[0].Type != "agent" || eff.Tasks[0].Retries != 2 {
		t.Fatalf("tasks = %+v, want the agent's job", eff.Tasks)
	}
	job := eff.Tasks[0]
	els, _ := job.Variables[AdHocElements].([]any)
	lookup := map[string]any{"elementId": "Lookup", "elementName": "Look up an order", "documentation": "Finds an order by id.", "properties": map[string]any{},
		"parameters": []any{map[string]any{"name": "toolCall.orderId", "description": "the order id", "type": "string", "schema": nil, "options": nil}}}
	if len(els) != 2 || !reflect.DeepEqual(els[0], lookup) {
		t.Fatalf("the job does not tell its worker what it may activate: %v", job.Variables)
	}

	// The worker calls both tools at once and keeps its memory in agentContext.
	eff = x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: job.TokenID, Element: "Agent", Variables: map[string]any{
		"agentContext": map[string]any{"turn": 1.0},
		AdHocResult: map[string]any{"activateElements": []any{
			call("c1", "Lookup", map[string]any{"orderId": "o-7"}), call("c2", "Refund", map[string]any{"amount": 12.5}),
		}},
	}})
	tasks := tasksAt(eff.Tasks)
	if len(eff.Tasks) != 2 || tasks["Lookup"].Variables["orderId"] != "o-7" || tasks["Refund"].Variables["amount"] != 12.5 {
		t.Fatalf("tool tasks = %+v: fromAi yields the agent's arguments", eff.Tasks)
	}
	if _, stored := x.in.State.Variables[AdHocResult]; stored {
		t.Error("the result variable was stored; it is read, not kept")
	}
	if _, has := tasks["Lookup"].Variables["toolCallResults"]; has {
		t.Error("every tool task carries the agent's output collection")
	}
	agentTok := x.adHocToken("Agent")
	if !reflect.DeepEqual(agentTok.Vars["agentContext"], map[string]any{"turn": 1.0}) || len(agentTok.Armed) != 0 {
		t.Errorf("agent token = %+v: the job's variables land in its scope and its job is done", agentTok)
	}

	// Refund's activation runs on to Note; Lookup's result asks the worker again.
	eff = x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: tasks["Refund"].TokenID, Element: "Refund"})
	if len(eff.Tasks) != 1 || eff.Tasks[0].Type != "agent" {
		t.Fatalf("after Refund and Note, tasks = %+v, want the agent's job again", eff.Tasks)
	}
	eff = x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: tasks["Lookup"].TokenID, Element: "Lookup", Variables: map[string]any{"toolCallResult": "order o-7: shoes"}})
	if len(eff.Tasks) != 1 || eff.Tasks[0].Type != "agent" || !slices.ContainsFunc(eff.CloseWaits, func(w WaitRef) bool { return w.Element == "Agent" }) {
		t.Fatalf("tasks %+v, closed %+v: one job at a time, the earlier one withdrawn", eff.Tasks, eff.CloseWaits)
	}
	job = eff.Tasks[0]
	want := []any{
		map[string]any{"id": "c2", "content": "refunded 12.5"},
		map[string]any{"id": "c1", "content": "order o-7: shoes"},
	}
	if got := job.Variables["toolCallResults"]; !reflect.DeepEqual(got, want) {
		t.Fatalf("toolCallResults = %v, want %v", got, want)
	}
	if _, leaked := x.in.State.Variables["toolCallResult"]; leaked {
		t.Error("a tool's result leaked out of its activation")
	}

	done := x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: job.TokenID, Element: "Agent", Variables: map[string]any{
		"agent":     map[string]any{"responseText": "Refunded."},
		AdHocResult: map[string]any{"isCompletionConditionFulfilled": true},
	}})
	if !done.Completed || !reflect.DeepEqual(x.in.State.Variables["agent"], map[string]any{"responseText": "Refunded."}) ||
		!reflect.DeepEqual(x.in.State.Variables["toolCallResults"], want) {
		t.Fatalf("status %s, variables %v", x.in.State.Status, x.in.State.Variables)
	}
}

func TestAdHocJobWorkerCancelsRemainingActivations(t *testing.T) {
	x := newInstance(t, parse(t, agent, ""))
	job := x.step(Trigger{Kind: TriggerStart}).Tasks[0]
	eff := x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: job.TokenID, Element: "Agent", Variables: map[string]any{
		AdHocResult: map[string]any{"activateElements": []any{call("c1", "Lookup", nil), call("c2", "Refund", map[string]any{"amount": 5.0})}},
	}})
	tasks := tasksAt(eff.Tasks)
	job = x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: tasks["Refund"].TokenID, Element: "Refund"}).Tasks[0]

	// Done while Lookup still runs: without cancelling, the subprocess waits for it.
	x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: job.TokenID, Element: "Agent", Variables: map[string]any{
		AdHocResult: map[string]any{"isCompletionConditionFulfilled": true},
	}})
	if x.in.State.Status != StatusActive || x.token("Lookup").Wait != WaitTask {
		t.Fatalf("status %s at %v", x.in.State.Status, x.at())
	}
	if eff := x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: tasks["Lookup"].TokenID, Element: "Lookup"}); !eff.Completed || len(eff.Tasks) != 0 {
		t.Fatalf("effects %+v: the last activation completes it, with no new job", eff)
	}

	// With isCancelRemainingInstances, Lookup's task is withdrawn at once.
	x = newInstance(t, parse(t, agent, ""))
	job = x.step(Trigger{Kind: TriggerStart}).Tasks[0]
	eff = x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: job.TokenID, Element: "Agent", Variables: map[string]any{
		AdHocResult: map[string]any{"activateElements": []any{call("c1", "Lookup", nil), call("c2", "Refund", map[string]any{"amount": 5.0})}},
	}})
	tasks = tasksAt(eff.Tasks)
	job = x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: tasks["Refund"].TokenID, Element: "Refund"}).Tasks[0]
	done := x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: job.TokenID, Element: "Agent", Variables: map[string]any{
		AdHocResult: map[string]any{"isCompletionConditionFulfilled": true, "isCancelRemainingInstances": true},
	}})
	if !done.Completed || !slices.ContainsFunc(done.CloseWaits, func(w WaitRef) bool { return w.TokenID == tasks["Lookup"].TokenID }) {
		t.Fatalf("effects %+v", done)
	}
	// The withdrawn job's late completion finds nothing.
	if err := x.fail(Trigger{Kind: TriggerTaskCompleted, TokenID: tasks["Lookup"].TokenID, Element: "Lookup"}); !fault.HasCode(err, fault.NotWaiting) {
		t.Errorf("late completion: %v", err)
	}
}

func TestAdHocJobResultItCannotApplyStopsInAnIncidentARetryAsksAgain(t *testing.T) {
	for name, result := range map[string]any{
		"unknown element":     map[string]any{"activateElements": []any{map[string]any{"elementId": "Note"}}},
		"activate and finish": map[string]any{"activateElements": []any{call("c", "Lookup", nil)}, "isCompletionConditionFulfilled": true},
		"not a context":       "Lookup",
		"flag not a boolean":  map[string]any{"isCompletionConditionFulfilled": "yes"},
	} {
		t.Run(name, func(t *testing.T) {
			x := newInstance(t, parse(t, agent, ""))
			job := x.step(Trigger{Kind: TriggerStart}).Tasks[0]
			eff := x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: job.TokenID, Element: "Agent", Variables: map[string]any{AdHocResult: result}})
			tok := x.adHocToken("Agent")
			if tok.Wait != WaitIncident || tok.Incident.Code != fault.IncidentAdHocResult || len(eff.Tasks) != 0 || len(eff.Incidents) != 1 {
				t.Fatalf("token %+v, effects %+v", tok, eff)
			}
			retried := x.step(Trigger{Kind: TriggerRetry, TokenID: tok.ID})
			if len(retried.Tasks) != 1 || retried.Tasks[0].Type != "agent" || x.adHocToken("Agent").Wait != WaitAdHoc {
				t.Fatalf("retry effects %+v at %v: the worker is asked again", retried, x.at())
			}
		})
	}
}

func TestAdHocJobFailureWithNoRetriesLeftKeepsActivationsRunning(t *testing.T) {
	x := newInstance(t, parse(t, agent, ""))
	job := x.step(Trigger{Kind: TriggerStart}).Tasks[0]
	eff := x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: job.TokenID, Element: "Agent", Variables: map[string]any{
		AdHocResult: map[string]any{"activateElements": []any{call("c1", "Lookup", nil), call("c2", "Refund", map[string]any{"amount": 5.0})}},
	}})
	tasks := tasksAt(eff.Tasks)
	job = x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: tasks["Refund"].TokenID, Element: "Refund"}).Tasks[0]
	x.step(Trigger{Kind: TriggerTaskFailed, TokenID: job.TokenID, Element: "Agent", Retries: 0, ErrorMessage: "model down"})
	agentTok := x.adHocToken("Agent")
	if agentTok.Wait != WaitIncident || agentTok.Incident.Code != fault.IncidentTaskFailed {
		t.Fatalf("agent token %+v", agentTok)
	}
	// Lookup ends while the job is in its incident: no job opens until the retry.
	if eff := x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: tasks["Lookup"].TokenID, Element: "Lookup"}); len(eff.Tasks) != 0 {
		t.Fatalf("a job opened during the incident: %+v", eff.Tasks)
	}
	retried := x.step(Trigger{Kind: TriggerRetry, TokenID: agentTok.ID, Retries: 1})
	if len(retried.Tasks) != 1 || retried.Tasks[0].Retries != 1 {
		t.Fatalf("retry tasks %+v", retried.Tasks)
	}
	if got := retried.Tasks[0].Variables["toolCallResults"].([]any); len(got) != 2 {
		t.Errorf("toolCallResults = %v, want both results", got)
	}
}

func TestMigrateRefusesInstancesInsideAnAdHocSubprocess(t *testing.T) {
	x := newInstance(t, parse(t, agent, ""))
	x.step(Trigger{Kind: TriggerStart})
	_, _, err := Migrate(x.def, parse(t, agent, ""), x.in, nil, x.now)
	if !fault.HasCode(err, fault.MigrateAdHoc) || !strings.Contains(err.Error(), "ad-hoc subprocess") {
		t.Fatalf("err = %v, want %s", err, fault.MigrateAdHoc)
	}
}

func TestAnErrorInsideAnActivationIsCaughtOnTheAdHocSubprocess(t *testing.T) {
	def := parse(t, `<bpmn:startEvent id="S" />
<bpmn:adHocSubProcess id="AH"><bpmn:extensionElements><zeebe:adHoc activeElementsCollection="=[&quot;A&quot;, &quot;B&quot;]" /></bpmn:extensionElements>
  <bpmn:serviceTask id="A"><bpmn:extensionElements><zeebe:taskDefinition type="a" /></bpmn:extensionElements></bpmn:serviceTask>
  <bpmn:serviceTask id="B"><bpmn:extensionElements><zeebe:taskDefinition type="b" /></bpmn:extensionElements></bpmn:serviceTask>
</bpmn:adHocSubProcess>
<bpmn:boundaryEvent id="Failed" attachedToRef="AH"><bpmn:errorEventDefinition /></bpmn:boundaryEvent>
<bpmn:endEvent id="E" /><bpmn:userTask id="Fix" />`+flow("F1", "S", "AH")+flow("F2", "AH", "E")+flow("F3", "Failed", "Fix"), "")
	x := newInstance(t, def)
	tasks := tasksAt(x.step(Trigger{Kind: TriggerStart}).Tasks)
	eff := x.step(Trigger{Kind: TriggerTaskError, TokenID: tasks["A"].TokenID, Element: "A", ErrorCode: "BOOM"})
	if got := x.at(); !reflect.DeepEqual(got, []string{"Fix/task"}) {
		t.Fatalf("tokens at %v: the boundary ends the subprocess and its other activation", got)
	}
	if !slices.ContainsFunc(eff.CloseWaits, func(w WaitRef) bool { return w.TokenID == tasks["B"].TokenID }) {
		t.Errorf("B's task was not closed: %+v", eff.CloseWaits)
	}
}

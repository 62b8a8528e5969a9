package engine

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/fault"
)

// listened is start → service task "Charge" with two start listeners and
// one end listener (and an input and an output mapping) → end.
const listened = `<bpmn:startEvent id="S" />
<bpmn:serviceTask id="Charge"><bpmn:extensionElements>
  <zeebe:taskDefinition type="charge" />
  <zeebe:executionListeners>
    <zeebe:executionListener eventType="start" type="prepare" retries="2" />
    <zeebe:executionListener eventType="end" type="audit" />
    <zeebe:executionListener eventType="start" type="=&quot;check-&quot; + region" />
  </zeebe:executionListeners>
  <zeebe:ioMapping><zeebe:input source="=order.total" target="amount" /><zeebe:output source="=receipt" target="paid" /></zeebe:ioMapping>
</bpmn:extensionElements></bpmn:serviceTask>
<bpmn:endEvent id="E" />` + `<bpmn:sequenceFlow id="F1" sourceRef="S" targetRef="Charge" /><bpmn:sequenceFlow id="F2" sourceRef="Charge" targetRef="E" />`

// job returns the one task a step opened.
func job(t *testing.T, eff Effects) Task {
	t.Helper()
	if len(eff.Tasks) != 1 {
		t.Fatalf("tasks = %+v, want one", eff.Tasks)
	}
	return eff.Tasks[0]
}

// done completes task k with vars.
func done(k Task, vars map[string]any) Trigger {
	return Trigger{Kind: TriggerTaskCompleted, TokenID: k.TokenID, Element: k.Element, Variables: vars}
}

func startListened(t *testing.T) (*instance, Task) {
	x := newInstance(t, parse(t, listened, ""))
	eff := x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"order": map[string]any{"total": 30.0}, "region": "eu"}})
	return x, job(t, eff)
}

func TestExecutionListenersRunInOrderAroundTheElement(t *testing.T) {
	x, k := startListened(t)
	var types []string
	types = append(types, k.Type)
	if k.Retries != 2 || k.Element != "Charge" || !reflect.DeepEqual(k.Variables, map[string]any{"amount": 30.0}) {
		t.Fatalf("first listener job = %+v, want retries 2 at Charge seeing the input mapping", k)
	}
	if tok := x.token("Charge"); tok.Wait != WaitListener || k.TokenID == tok.ID {
		t.Fatalf("token = %+v: want it in its listeners, the job keyed apart from it", tok)
	}
	// A start listener's variables are the element's locals: the next
	// listener, and the element itself, see them; the instance does not.
	k = job(t, x.step(done(k, map[string]any{"fee": 2.0})))
	types = append(types, k.Type)
	if k.Variables["fee"] != 2.0 || x.in.State.Variables["fee"] != nil {
		t.Fatalf("second listener job = %+v, instance variables %v: want fee local to Charge", k, x.in.State.Variables)
	}
	k = job(t, x.step(done(k, nil)))
	types = append(types, k.Type)
	if k.Variables["fee"] != 2.0 || k.TokenID != x.token("Charge").ID {
		t.Fatalf("the task = %+v, want Charge's own, seeing fee", k)
	}
	// End listeners run after the output mappings; their variables go
	// where output mappings go.
	k = job(t, x.step(done(k, map[string]any{"receipt": "r-1"})))
	types = append(types, k.Type)
	if x.in.State.Variables["paid"] != "r-1" {
		t.Fatalf("variables %v: the output mapping was not applied before the end listener", x.in.State.Variables)
	}
	eff := x.step(done(k, map[string]any{"audited": true}))
	if !eff.Completed || x.in.State.Variables["audited"] != true {
		t.Fatalf("completed %v, variables %v: want the instance done, audited set", eff.Completed, x.in.State.Variables)
	}
	if want := []string{"prepare", "check-eu", "charge", "audit"}; !reflect.DeepEqual(types, want) {
		t.Errorf("jobs ran %v, want %v", types, want)
	}
}

func TestLateOutcomeOfAnEarlierListenerJobMatchesNothing(t *testing.T) {
	x, k := startListened(t)
	x.step(done(k, nil))
	if err := x.fail(done(k, nil)); !fault.HasCode(err, fault.NotWaiting) {
		t.Fatalf("second completion of the first job: %v, want %s", err, fault.NotWaiting)
	}
}

func TestListenerJobFailureRetriesThenIncidentAndRetryRecreatesIt(t *testing.T) {
	x, k := startListened(t)
	k = job(t, x.step(done(k, nil))) // the second start listener
	again := job(t, x.step(Trigger{Kind: TriggerTaskFailed, TokenID: k.TokenID, Element: "Charge", Retries: 1, ErrorMessage: "down"}))
	if again.Type != "check-eu" || again.Retries != 1 || again.ErrorMessage != "down" || again.TokenID == k.TokenID {
		t.Fatalf("job after a failure = %+v, want check-eu again with 1 retry, the error, a new key", again)
	}
	eff := x.step(Trigger{Kind: TriggerTaskFailed, TokenID: again.TokenID, Element: "Charge", ErrorMessage: "still down"})
	if len(eff.Incidents) != 1 || eff.Incidents[0].Code != fault.IncidentTaskFailed || !strings.Contains(eff.Incidents[0].Message, "start listener 2 of Charge") {
		t.Fatalf("incidents = %+v, want one TASK_FAILED naming the listener", eff.Incidents)
	}
	tok := x.token("Charge")
	retried := job(t, x.step(Trigger{Kind: TriggerRetry, TokenID: tok.ID, Retries: 4}))
	if retried.Type != "check-eu" || retried.Retries != 4 {
		t.Fatalf("job after the retry = %+v, want only the failed listener again, with 4 retries", retried)
	}
	if k := job(t, x.step(done(retried, nil))); k.Type != "charge" {
		t.Fatalf("after the listeners: %+v, want the task", k)
	}
}

func TestBPMNErrorFromAListenerJobIsAnIncident(t *testing.T) {
	x, k := startListened(t)
	eff := x.step(Trigger{Kind: TriggerTaskError, TokenID: k.TokenID, Element: "Charge", ErrorCode: "NOPE"})
	if len(eff.Incidents) != 1 || eff.Incidents[0].Code != fault.IncidentListener || !strings.Contains(eff.Incidents[0].Message, `"NOPE"`) {
		t.Fatalf("incidents = %+v, want one %s naming the error", eff.Incidents, fault.IncidentListener)
	}
	if k := job(t, x.step(Trigger{Kind: TriggerRetry, TokenID: x.token("Charge").ID})); k.Type != "prepare" {
		t.Fatalf("job after the retry = %+v, want the listener again", k)
	}
}

func TestListenerTypeThatFailsRunsEveryListenerOfTheEventAgain(t *testing.T) {
	x := newInstance(t, parse(t, listened, ""))
	k := job(t, x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"order": map[string]any{"total": 1.0}}}))
	eff := x.step(done(k, nil)) // the second's type reads region, which is missing
	if len(eff.Incidents) != 1 || eff.Incidents[0].Code != fault.IncidentExpression {
		t.Fatalf("incidents = %+v, want an expression incident", eff.Incidents)
	}
	k = job(t, x.step(Trigger{Kind: TriggerRetry, TokenID: x.token("Charge").ID, Variables: map[string]any{"region": "us"}}))
	if k.Type != "prepare" {
		t.Fatalf("job after the retry = %+v, want the first start listener again", k)
	}
}

func TestCancelClosesAnOpenListenerJob(t *testing.T) {
	x, k := startListened(t)
	before := x.in.State
	eff := x.step(Trigger{Kind: TriggerCancel})
	if !reflect.DeepEqual(eff.CloseWaits, []WaitRef{{TokenID: k.TokenID, Element: "Charge"}}) {
		t.Fatalf("close waits = %+v, want the listener job's row", eff.CloseWaits)
	}
	if got := CloseTables(x.def, before, eff.CloseWaits); !reflect.DeepEqual(got, []WaitTables{TableTasks}) {
		t.Errorf("close tables = %v, want the tasks table only", got)
	}
}

// gated: a start listener on an exclusive gateway sets the variable its
// conditions read; one on a message catch event sets its correlation key.
var gated = `<bpmn:startEvent id="S" />
<bpmn:exclusiveGateway id="G" default="FB"><bpmn:extensionElements><zeebe:executionListeners>
  <zeebe:executionListener eventType="start" type="route" /></zeebe:executionListeners></bpmn:extensionElements></bpmn:exclusiveGateway>
<bpmn:intermediateCatchEvent id="Wait"><bpmn:extensionElements><zeebe:executionListeners>
  <zeebe:executionListener eventType="start" type="key" /><zeebe:executionListener eventType="end" type="after-wait" />
  </zeebe:executionListeners></bpmn:extensionElements><bpmn:messageEventDefinition messageRef="MK" /></bpmn:intermediateCatchEvent>
<bpmn:endEvent id="A" /><bpmn:endEvent id="B" />` + flow("F0", "S", "G") + `
<bpmn:sequenceFlow id="FA" sourceRef="G" targetRef="Wait"><bpmn:conditionExpression>=route = "a"</bpmn:conditionExpression></bpmn:sequenceFlow>
<bpmn:sequenceFlow id="FB" sourceRef="G" targetRef="B" />` + flow("F2", "Wait", "A")

const gatedDefs = `<bpmn:message id="MK" name="paid"><bpmn:extensionElements><zeebe:subscription correlationKey="=key" /></bpmn:extensionElements></bpmn:message>`

func TestListenersOnAGatewayAndACatchEventSetWhatTheyEvaluate(t *testing.T) {
	x := newInstance(t, parse(t, gated, gatedDefs))
	k := job(t, x.step(Trigger{Kind: TriggerStart}))
	if k.Type != "route" || k.Element != "G" {
		t.Fatalf("job = %+v, want the gateway's start listener", k)
	}
	eff := x.step(done(k, map[string]any{"route": "a"}))
	k = job(t, eff)
	if k.Type != "key" || k.Element != "Wait" || x.in.State.Variables["route"] != nil {
		t.Fatalf("job = %+v, variables %v: want the flow to Wait taken, route local to the gateway", k, x.in.State.Variables)
	}
	eff = x.step(done(k, map[string]any{"key": "k-7"}))
	if len(eff.Subscriptions) != 1 || eff.Subscriptions[0].CorrelationKey != "k-7" {
		t.Fatalf("subscriptions = %+v, want one keyed by what the listener set", eff.Subscriptions)
	}
	k = job(t, x.step(Trigger{Kind: TriggerMessage, Message: "paid", CorrelationKey: "k-7"}))
	if k.Type != "after-wait" {
		t.Fatalf("job = %+v, want the catch event's end listener", k)
	}
	if eff := x.step(done(k, nil)); !eff.Completed {
		t.Fatalf("the instance did not complete: %v", x.at())
	}
}

// approval is a Camunda user task with a creating and a completing listener.
var approval = `<bpmn:startEvent id="S" />
<bpmn:userTask id="Approve"><bpmn:extensionElements><zeebe:userTask />
  <zeebe:taskListeners><zeebe:taskListener eventType="creating" type="on-create" />
  <zeebe:taskListener eventType="complete" type="on-complete" /></zeebe:taskListeners>
</bpmn:extensionElements></bpmn:userTask>
<bpmn:endEvent id="E" />` + flow("F1", "S", "Approve") + flow("F2", "Approve", "E")

func TestUserTaskCompletionTakesEffectAfterItsCompletingListeners(t *testing.T) {
	x := newInstance(t, parse(t, approval, ""))
	k := job(t, x.step(Trigger{Kind: TriggerStart}))
	if k.Type != "on-create" || k.User != nil {
		t.Fatalf("job = %+v, want the creating listener's before the user task", k)
	}
	u := job(t, x.step(done(k, nil)))
	if u.User == nil || u.TokenID != x.token("Approve").ID {
		t.Fatalf("task = %+v, want the user task", u)
	}
	eff := x.step(done(u, map[string]any{"approved": true}))
	k = job(t, eff)
	if k.Type != "on-complete" || len(eff.CloseWaits) != 0 || x.in.State.Variables["approved"] != nil {
		t.Fatalf("job = %+v, closed %+v, variables %v: want the listener's job, the user task open, its result held back",
			k, eff.CloseWaits, x.in.State.Variables)
	}
	eff = x.step(done(k, nil))
	if !eff.Completed || x.in.State.Variables["approved"] != true {
		t.Fatalf("completed %v, variables %v: want the completion applied", eff.Completed, x.in.State.Variables)
	}
	if !reflect.DeepEqual(eff.CloseWaits, []WaitRef{{TokenID: k.TokenID, Element: "Approve"}, {TokenID: u.TokenID}}) {
		t.Errorf("close waits = %+v, want the listener's job, then the user task", eff.CloseWaits)
	}
}

func TestTaskListenerJobCompletedWithVariablesIsAnIncident(t *testing.T) {
	x := newInstance(t, parse(t, approval, ""))
	k := job(t, x.step(Trigger{Kind: TriggerStart}))
	eff := x.step(done(k, map[string]any{"x": 1.0}))
	if len(eff.Incidents) != 1 || eff.Incidents[0].Code != fault.IncidentListener {
		t.Fatalf("incidents = %+v, want one %s", eff.Incidents, fault.IncidentListener)
	}
}

func TestMigrateRefusesATokenInItsListeners(t *testing.T) {
	x, _ := startListened(t)
	_, _, err := Migrate(x.def, x.def, x.in, nil, x.now)
	if !fault.HasCode(err, fault.MigrateListener) {
		t.Fatalf("Migrate: %v, want %s", err, fault.MigrateListener)
	}
}

func TestListenersWhereZeebeRefusesThemAreRefused(t *testing.T) {
	el := func(tag, inner, listeners string) string {
		return `<bpmn:` + tag + `><bpmn:extensionElements>` + listeners + `</bpmn:extensionElements>` + inner + `</bpmn:` + tag[:strings.IndexByte(tag, ' ')] + `>`
	}
	exec := func(event string) string {
		return `<zeebe:executionListeners><zeebe:executionListener eventType="` + event + `" type="l" /></zeebe:executionListeners>`
	}
	tests := []struct {
		name, process, code string
	}{
		{"start listener on a start event", el(`startEvent id="X"`, "", exec("start")), fault.BPMNInvalid},
		{"end listener on a gateway", `<bpmn:startEvent id="S" />` + el(`parallelGateway id="X"`, "", exec("end")) + flow("F", "S", "X"), fault.BPMNInvalid},
		{"two listeners of one event and type", el(`startEvent id="X"`, "", `<zeebe:executionListeners><zeebe:executionListener eventType="end" type="l" /><zeebe:executionListener eventType="end" type="l" /></zeebe:executionListeners>`), fault.BPMNInvalid},
		{"an unknown event", el(`startEvent id="X"`, "", exec("take")), fault.BPMNInvalid},
		{"task listener on a job-worker user task", `<bpmn:startEvent id="S" />` + el(`userTask id="X"`, "", `<zeebe:taskListeners><zeebe:taskListener eventType="completing" type="l" /></zeebe:taskListeners>`) + flow("F", "S", "X"), fault.BPMNInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := bpmn.Parse(strings.NewReader(doc(tt.process, "")))
			if !fault.HasCode(err, tt.code) || !strings.Contains(err.Error(), `"X"`) {
				t.Fatalf("Parse: %v, want %s naming X", err, tt.code)
			}
		})
	}
}

// The corpus file that execution listeners kept out runs its listener's job
// before its service task's.
func TestCorpusListenerFileRunsItsListenerFirst(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "bpmn", "testdata", "corpus", "camunda__camunda-modeler__service-task-listener.bpmn"))
	if err != nil {
		t.Fatal(err)
	}
	def, err := bpmn.Parse(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	x := newInstance(t, def)
	k := job(t, x.step(Trigger{Kind: TriggerStart}))
	var types []string
	for range 3 {
		types = append(types, k.Type)
		eff := x.step(done(k, nil))
		if eff.Completed {
			break
		}
		k = job(t, eff)
	}
	if want := []string{"cleanup-job", "check-order"}; !reflect.DeepEqual(types, want) || x.in.State.Status != StatusCompleted {
		t.Fatalf("jobs %v, status %s: want %v, then completed", types, x.in.State.Status, want)
	}
}

// processListened has process-level start and end listeners, a message
// start event and an event subprocess whose message start is armed once
// the process runs.
var processListened = `<bpmn:extensionElements><zeebe:executionListeners>
  <zeebe:executionListener eventType="start" type="p-start" /><zeebe:executionListener eventType="end" type="p-end" />
</zeebe:executionListeners></bpmn:extensionElements>
<bpmn:startEvent id="S" /><bpmn:startEvent id="MS"><bpmn:messageEventDefinition messageRef="M1" /></bpmn:startEvent>
<bpmn:subProcess id="Ev" triggeredByEvent="true"><bpmn:startEvent id="ES" isInterrupting="false"><bpmn:messageEventDefinition messageRef="M2" /></bpmn:startEvent>
  <bpmn:endEvent id="EE" /><bpmn:sequenceFlow id="FE" sourceRef="ES" targetRef="EE" /></bpmn:subProcess>
<bpmn:serviceTask id="T"><bpmn:extensionElements><zeebe:taskDefinition type="t" /></bpmn:extensionElements></bpmn:serviceTask>
<bpmn:endEvent id="E" />` + flow("F1", "S", "T") + flow("F2", "MS", "T") + flow("F3", "T", "E")

func TestProcessListenersRunBeforeItsStartEventAndAfterItsLastToken(t *testing.T) {
	for _, start := range []Trigger{{Kind: TriggerStart, Variables: map[string]any{"a": 1.0}}, {Kind: TriggerStart, Element: "MS", Variables: map[string]any{"a": 1.0}}} {
		t.Run("start at "+start.Element, func(t *testing.T) {
			x := newInstance(t, parse(t, processListened, msgDefs))
			eff := x.step(start)
			k := job(t, eff)
			if k.Type != "p-start" || k.Element != "p" || len(eff.Subscriptions) != 0 {
				t.Fatalf("job = %+v, subscriptions %+v: want the process's start listener first, nothing armed", k, eff.Subscriptions)
			}
			eff = x.step(done(k, map[string]any{"b": 2.0}))
			k = job(t, eff)
			if k.Type != "t" || len(eff.Subscriptions) != 1 || x.in.State.Variables["a"] != 1.0 || x.in.State.Variables["b"] != 2.0 {
				t.Fatalf("job = %+v, subscriptions %+v, variables %v: want the task, the event subprocess armed, both variables",
					k, eff.Subscriptions, x.in.State.Variables)
			}
			eff = x.step(done(k, nil))
			end := job(t, eff)
			if end.Type != "p-end" || end.Element != "p" || eff.Completed || len(eff.CloseWaits) == 0 {
				t.Fatalf("job = %+v, completed %v, closed %+v: want the process's end listener, its waits closed first", end, eff.Completed, eff.CloseWaits)
			}
			if eff = x.step(done(end, map[string]any{"c": 3.0})); !eff.Completed || x.in.State.Variables["c"] != 3.0 || len(x.in.State.Tokens) != 0 {
				t.Fatalf("completed %v, variables %v, tokens %v", eff.Completed, x.in.State.Variables, x.at())
			}
		})
	}
}

func TestProcessEndListenerFailureIsAnIncidentOnTheProcess(t *testing.T) {
	x := newInstance(t, parse(t, processListened, msgDefs))
	k := job(t, x.step(Trigger{Kind: TriggerStart}))
	k = job(t, x.step(done(k, nil)))
	k = job(t, x.step(done(k, nil)))
	eff := x.step(Trigger{Kind: TriggerTaskFailed, TokenID: k.TokenID, Element: "p", ErrorMessage: "no"})
	if len(eff.Incidents) != 1 || eff.Incidents[0].Element != "p" {
		t.Fatalf("incidents = %+v, want one on the process", eff.Incidents)
	}
	k = job(t, x.step(Trigger{Kind: TriggerRetry, TokenID: eff.Incidents[0].TokenID}))
	if eff := x.step(done(k, nil)); k.Type != "p-end" || !eff.Completed {
		t.Fatalf("job %+v, completed %v: want the end listener again, then the end", k, eff.Completed)
	}
}

// scoped: a subprocess with start and end listeners holding a user task
// with a completing listener and an interrupting timer boundary event, and
// a non-interrupting message boundary whose event has an end listener.
var scoped = `<bpmn:startEvent id="S" />
<bpmn:subProcess id="Sub"><bpmn:extensionElements><zeebe:executionListeners>
  <zeebe:executionListener eventType="start" type="sub-start" /><zeebe:executionListener eventType="end" type="sub-end" />
</zeebe:executionListeners></bpmn:extensionElements>
  <bpmn:startEvent id="SS" />
  <bpmn:userTask id="U"><bpmn:extensionElements><zeebe:userTask /><zeebe:taskListeners><zeebe:taskListener eventType="completing" type="check" /></zeebe:taskListeners></bpmn:extensionElements></bpmn:userTask>
  <bpmn:boundaryEvent id="Late" attachedToRef="U"><bpmn:timerEventDefinition><bpmn:timeDuration>PT1H</bpmn:timeDuration></bpmn:timerEventDefinition></bpmn:boundaryEvent>
  <bpmn:endEvent id="SE" /><bpmn:endEvent id="LE" />` + flow("FS1", "SS", "U") + flow("FS2", "U", "SE") + flow("FS3", "Late", "LE") + `
</bpmn:subProcess>
<bpmn:boundaryEvent id="Note" cancelActivity="false" attachedToRef="Sub"><bpmn:extensionElements><zeebe:executionListeners>
  <zeebe:executionListener eventType="end" type="noted" /></zeebe:executionListeners></bpmn:extensionElements><bpmn:messageEventDefinition messageRef="M1" /></bpmn:boundaryEvent>
<bpmn:endEvent id="E" /><bpmn:endEvent id="NE" />` + flow("F1", "S", "Sub") + flow("F2", "Sub", "E") + flow("F3", "Note", "NE")

func TestSubprocessListenersWrapItsScopeAndABoundaryEventsEndListenerRuns(t *testing.T) {
	x := newInstance(t, parse(t, scoped, msgDefs))
	eff := x.step(Trigger{Kind: TriggerStart})
	k := job(t, eff)
	if k.Type != "sub-start" || len(eff.Subscriptions) != 0 || len(x.in.State.Tokens) != 1 {
		t.Fatalf("job = %+v, subscriptions %+v, tokens %v: want the subprocess's start listener before its scope opens", k, eff.Subscriptions, x.at())
	}
	eff = x.step(done(k, nil))
	u := job(t, eff)
	if u.Element != "U" || len(eff.Subscriptions) != 1 {
		t.Fatalf("task = %+v, subscriptions %+v: want U, the boundary message armed", u, eff.Subscriptions)
	}
	// The non-interrupting boundary event's end listener runs on its own token.
	k = job(t, x.step(Trigger{Kind: TriggerMessage, Message: "m1"}))
	if k.Type != "noted" || k.Element != "Note" {
		t.Fatalf("job = %+v, want Note's end listener", k)
	}
	x.step(done(k, nil))
	// The user task completed: held by its completing listener; then the
	// subprocess ends through its end listener.
	check := job(t, x.step(done(u, map[string]any{"ok": true})))
	end := job(t, x.step(done(check, nil)))
	if end.Type != "sub-end" || x.in.State.Variables["ok"] != true {
		t.Fatalf("job = %+v, variables %v: want the subprocess's end listener after the completion", end, x.in.State.Variables)
	}
	if eff := x.step(done(end, nil)); !eff.Completed {
		t.Fatalf("not completed: %v", x.at())
	}
}

func TestABoundaryEventInterruptsAUserTaskInItsCompletingListeners(t *testing.T) {
	x := newInstance(t, parse(t, scoped, msgDefs))
	x.step(done(job(t, x.step(Trigger{Kind: TriggerStart})), nil))
	u := x.token("U")
	check := job(t, x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: u.ID, Element: "U", Variables: map[string]any{"ok": true}}))
	eff := x.step(Trigger{Kind: TriggerTimer, TokenID: u.ID, Element: "Late"})
	closed := map[WaitRef]bool{}
	for _, w := range eff.CloseWaits {
		closed[w] = true
	}
	if !closed[WaitRef{TokenID: check.TokenID, Element: "U"}] || !closed[WaitRef{TokenID: u.ID}] || x.in.State.Variables["ok"] != nil {
		t.Fatalf("closed %+v, variables %v: want the listener's job and the user task closed, its completion dropped", eff.CloseWaits, x.in.State.Variables)
	}
	if err := x.fail(done(check, nil)); !fault.HasCode(err, fault.NotWaiting) {
		t.Fatalf("the listener's late completion: %v, want %s", err, fault.NotWaiting)
	}
}

func TestRetryOfAnIncidentAfterTheStartListenersDoesNotRunThemAgain(t *testing.T) {
	t.Run("a task failed to zero retries", func(t *testing.T) {
		x, k := startListened(t)
		k = job(t, x.step(done(k, nil)))
		task := job(t, x.step(done(k, nil)))
		eff := x.step(Trigger{Kind: TriggerTaskFailed, TokenID: task.TokenID, Element: "Charge", ErrorMessage: "down"})
		if len(eff.Incidents) != 1 || eff.Incidents[0].Stage != StageBehaviour {
			t.Fatalf("incidents = %+v, want one resuming after the listeners", eff.Incidents)
		}
		if k := job(t, x.step(Trigger{Kind: TriggerRetry, TokenID: x.token("Charge").ID})); k.Type != "charge" {
			t.Fatalf("job after the retry = %+v, want the task itself", k)
		}
	})
	t.Run("a gateway with no flow to take", func(t *testing.T) {
		noDefault := strings.NewReplacer(` default="FB"`, "", `<bpmn:sequenceFlow id="FB" sourceRef="G" targetRef="B" />`,
			`<bpmn:sequenceFlow id="FB" sourceRef="G" targetRef="B"><bpmn:conditionExpression>=route = "b"</bpmn:conditionExpression></bpmn:sequenceFlow>`).Replace(gated)
		x := newInstance(t, parse(t, noDefault, gatedDefs))
		k := job(t, x.step(Trigger{Kind: TriggerStart}))
		eff := x.step(done(k, map[string]any{"route": "z"}))
		if len(eff.Incidents) != 1 || eff.Incidents[0].Code != fault.IncidentNoFlow || eff.Incidents[0].Stage != StageBehaviour {
			t.Fatalf("incidents = %+v, want NO_MATCHING_FLOW resuming after the listener", eff.Incidents)
		}
		// The listener's local variable is still there: the retry fixes it.
		k = job(t, x.step(Trigger{Kind: TriggerRetry, TokenID: x.token("G").ID, Variables: map[string]any{"route": "a"}}))
		if k.Type != "key" {
			t.Fatalf("job after the retry = %+v, want the flow to Wait taken without the gateway's listener", k)
		}
	})
}

// assigned is a Camunda user task assigned at creation, with an assigning
// listener (Zeebe 8.6's name).
var assigned = `<bpmn:startEvent id="S" />
<bpmn:userTask id="U"><bpmn:extensionElements><zeebe:userTask /><zeebe:assignmentDefinition assignee="=who" />
  <zeebe:taskListeners><zeebe:taskListener eventType="assignment" type="on-assign" /></zeebe:taskListeners>
</bpmn:extensionElements></bpmn:userTask>
<bpmn:endEvent id="E" />` + flow("F1", "S", "U") + flow("F2", "U", "E")

func TestAssigningListenersRunAtCreationWithAnAssigneeAndOnEachAssignment(t *testing.T) {
	x := newInstance(t, parse(t, assigned, ""))
	k := job(t, x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"who": "ada"}}))
	if k.Type != "on-assign" {
		t.Fatalf("job = %+v, want the assigning listener's before the task is created", k)
	}
	u := job(t, x.step(done(k, nil)))
	if u.User == nil || u.User.Assignee != "ada" {
		t.Fatalf("task = %+v, want the user task assigned to ada", u)
	}
	// An assignment through /v1: held until its listener's job completes.
	eff := x.step(Trigger{Kind: TriggerTaskAssign, TokenID: u.TokenID, Element: "U", Variables: map[string]any{"assignee": "bob"}})
	k = job(t, eff)
	if k.Type != "on-assign" || len(eff.Assignments) != 0 || len(eff.CloseWaits) != 0 {
		t.Fatalf("job = %+v, assignments %+v, closed %+v: want the listener's job, nothing assigned, the task open", k, eff.Assignments, eff.CloseWaits)
	}
	eff = x.step(done(k, nil))
	if len(eff.Assignments) != 1 || *eff.Assignments[0].Assignee != "bob" || eff.Assignments[0].TokenID != u.TokenID || x.token("U").Wait != WaitTask {
		t.Fatalf("assignments %+v, token %+v: want bob assigned to the open task", eff.Assignments, x.token("U"))
	}
	// Unassigning, then completing.
	k = job(t, x.step(Trigger{Kind: TriggerTaskAssign, TokenID: u.TokenID, Element: "U", Variables: map[string]any{"assignee": nil}}))
	if eff := x.step(done(k, nil)); len(eff.Assignments) != 1 || eff.Assignments[0].Assignee != nil {
		t.Fatalf("assignments %+v, want one unassigning", eff.Assignments)
	}
	if eff := x.step(done(u, nil)); !eff.Completed {
		t.Fatalf("not completed: %v", x.at())
	}
}

func TestNoAssigningListenerAtCreationWithoutAnAssignee(t *testing.T) {
	x := newInstance(t, parse(t, assigned, ""))
	if u := job(t, x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"who": ""}})); u.User == nil {
		t.Fatalf("job = %+v, want the user task itself", u)
	}
}

// eachListened is a parallel multi-instance service task with a start and
// an end listener, collecting each item's result.
var eachListened = `<bpmn:startEvent id="S" />
<bpmn:serviceTask id="Each"><bpmn:extensionElements><zeebe:taskDefinition type="work" />
  <zeebe:executionListeners><zeebe:executionListener eventType="start" type="before" /><zeebe:executionListener eventType="end" type="after" /></zeebe:executionListeners>
</bpmn:extensionElements>
  <bpmn:multiInstanceLoopCharacteristics><bpmn:extensionElements><zeebe:loopCharacteristics inputCollection="=items" inputElement="item" outputCollection="results" outputElement="=result" /></bpmn:extensionElements></bpmn:multiInstanceLoopCharacteristics></bpmn:serviceTask>
<bpmn:endEvent id="E" />` + flow("F1", "S", "Each") + flow("F2", "Each", "E")

// As in Zeebe, a multi-instance activity's execution listeners run on each
// inner instance (Modeler's "before each" and "after each"), not on the body.
func TestMultiInstanceListenersRunAroundEachInnerInstance(t *testing.T) {
	x := newInstance(t, parse(t, eachListened, ""))
	eff := x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"items": []any{"a", "b"}}})
	if len(eff.Tasks) != 2 || eff.Tasks[0].Type != "before" || eff.Tasks[1].Type != "before" {
		t.Fatalf("tasks = %+v, want each inner instance's start listener", eff.Tasks)
	}
	items := map[string]bool{}
	for _, k := range eff.Tasks {
		items[k.Variables["item"].(string)] = true
	}
	if !items["a"] || !items["b"] {
		t.Fatalf("listener jobs see items %v, want a and b: they run inside the inner instances", items)
	}
	if b := x.body("Each"); b.Wait != WaitMulti {
		t.Fatalf("body = %+v", b)
	}
	var works []Task
	for _, k := range eff.Tasks {
		works = append(works, job(t, x.step(done(k, nil))))
	}
	var afters []Task
	for n, w := range works {
		if w.Type != "work" {
			t.Fatalf("after the start listener: %+v, want the task", w)
		}
		k := job(t, x.step(done(w, map[string]any{"result": float64(n)})))
		if k.Type != "after" {
			t.Fatalf("after the task: %+v, want its end listener", k)
		}
		afters = append(afters, k)
	}
	if eff := x.step(done(afters[0], nil)); eff.Completed {
		t.Fatal("completed after one inner instance's end listener")
	}
	eff = x.step(done(afters[1], nil))
	if !eff.Completed || !reflect.DeepEqual(x.in.State.Variables["results"], []any{0.0, 1.0}) {
		t.Fatalf("completed %v, results %v: want done with both results, no listener on the body", eff.Completed, x.in.State.Variables["results"])
	}
}

// espListened is a process waiting at a service task, with a
// non-interrupting message event subprocess that has start and end
// listeners.
var espListened = `<bpmn:startEvent id="S" />
<bpmn:serviceTask id="Work"><bpmn:extensionElements><zeebe:taskDefinition type="work" /></bpmn:extensionElements></bpmn:serviceTask>
<bpmn:endEvent id="E" />
<bpmn:subProcess id="OnNote" triggeredByEvent="true"><bpmn:extensionElements>
  <zeebe:executionListeners><zeebe:executionListener eventType="start" type="esp-start" /><zeebe:executionListener eventType="end" type="esp-end" /></zeebe:executionListeners>
</bpmn:extensionElements>
  <bpmn:startEvent id="NoteStart" isInterrupting="false"><bpmn:messageEventDefinition messageRef="M1" /></bpmn:startEvent>
  <bpmn:endEvent id="NoteEnd" /><bpmn:sequenceFlow id="FN" sourceRef="NoteStart" targetRef="NoteEnd" />
</bpmn:subProcess>` + flow("F1", "S", "Work") + flow("F2", "Work", "E")

func TestEventSubprocessListenersWrapItAndItsStartSeesThePayloadAfterThem(t *testing.T) {
	x := newInstance(t, parse(t, espListened, msgDefs))
	work := job(t, x.step(Trigger{Kind: TriggerStart}))
	k := job(t, x.step(Trigger{Kind: TriggerMessage, Message: "m1", Variables: map[string]any{"note": "hi"}}))
	if k.Type != "esp-start" || k.Element != "OnNote" || x.in.State.Variables["note"] != nil {
		t.Fatalf("job = %+v, variables %v: want the event subprocess's start listener before its start event completes", k, x.in.State.Variables)
	}
	k = job(t, x.step(done(k, nil)))
	if k.Type != "esp-end" || x.in.State.Variables["note"] != "hi" {
		t.Fatalf("job = %+v, variables %v: want its end listener once its content ended, the payload applied", k, x.in.State.Variables)
	}
	if eff := x.step(done(k, map[string]any{"noted": true})); eff.Completed || x.in.State.Variables["noted"] != true {
		t.Fatalf("completed %v, variables %v: want the end listener's variables in the process, the process still at Work", eff.Completed, x.in.State.Variables)
	}
	if eff := x.step(done(work, nil)); !eff.Completed {
		t.Fatalf("not completed: %v", x.at())
	}
}

func TestAnUpdateTakesEffectAfterItsUpdatingListeners(t *testing.T) {
	updating := strings.Replace(assigned, `<zeebe:taskListener eventType="assignment" type="on-assign" />`,
		`<zeebe:taskListener eventType="update" type="on-update" /><zeebe:taskListener eventType="updating" type="audit" />`, 1)
	x := newInstance(t, parse(t, updating, ""))
	u := job(t, x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"who": "ada"}}))
	changes := map[string]any{"candidate_groups": []any{"sales"}, "due_date": "", "priority": 80.0}
	eff := x.step(Trigger{Kind: TriggerTaskUpdate, TokenID: u.TokenID, Element: "U", Variables: changes})
	k := job(t, eff)
	if k.Type != "on-update" || len(eff.Updates) != 0 || len(eff.CloseWaits) != 0 {
		t.Fatalf("job = %+v, updates %+v, closed %+v: want the first listener's job, nothing changed, the task open", k, eff.Updates, eff.CloseWaits)
	}
	k = job(t, x.step(done(k, nil)))
	if k.Type != "audit" {
		t.Fatalf("job = %+v, want the second updating listener's", k)
	}
	eff = x.step(done(k, nil))
	priority, empty := 80, ""
	want := []UserTaskUpdate{{TokenID: u.TokenID, Element: "U", Changes: UserTaskChanges{CandidateGroups: &[]string{"sales"}, DueDate: &empty, Priority: &priority}}}
	if !reflect.DeepEqual(eff.Updates, want) || x.token("U").Wait != WaitTask {
		t.Fatalf("updates %+v, token %+v: want the changes applied to the open task", eff.Updates, x.token("U"))
	}
	if eff := x.step(done(u, nil)); !eff.Completed {
		t.Fatalf("not completed: %v", x.at())
	}
}

func TestAnUpdateWithoutUpdatingListenersAppliesAtOnceAndABadOneIsRefused(t *testing.T) {
	x := newInstance(t, parse(t, assigned, ""))
	u := job(t, x.step(done(job(t, x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"who": "ada"}})), nil)))
	eff := x.step(Trigger{Kind: TriggerTaskUpdate, TokenID: u.TokenID, Element: "U", Variables: map[string]any{"candidate_users": []any{"bob"}}})
	if len(eff.Updates) != 1 || len(eff.Tasks) != 0 || !reflect.DeepEqual(*eff.Updates[0].Changes.CandidateUsers, []string{"bob"}) {
		t.Fatalf("updates %+v, tasks %+v: want the update applied at once", eff.Updates, eff.Tasks)
	}
	if err := x.fail(Trigger{Kind: TriggerTaskUpdate, TokenID: u.TokenID, Element: "U", Variables: map[string]any{"priority": "high"}}); !fault.HasCode(err, fault.RelayInvalid) {
		t.Fatalf("an update with a priority of text: %v, want %s", err, fault.RelayInvalid)
	}
}

// Zeebe 8.10's beforeAll listeners run once, on the multi-instance body,
// before its input collection is evaluated: what their jobs set is the
// body's, so the collection and every inner instance see it.
func TestBeforeAllListenersRunOnTheBodyBeforeItsCollection(t *testing.T) {
	before := strings.Replace(eachListened, `<zeebe:executionListener eventType="start" type="before" />`,
		`<zeebe:executionListener eventType="beforeAll" type="fetch" /><zeebe:executionListener eventType="start" type="before" />`, 1)
	x := newInstance(t, parse(t, before, ""))
	k := job(t, x.step(Trigger{Kind: TriggerStart}))
	if tok := x.token("Each"); k.Type != "fetch" || tok.Wait != WaitListener || tok.Loop != 0 {
		t.Fatalf("job = %+v, tokens %v: want the body's beforeAll listener before any inner instance", k, x.at())
	}
	eff := x.step(done(k, map[string]any{"items": []any{"a", "b"}, "region": "eu"}))
	if len(eff.Tasks) != 2 || eff.Tasks[0].Type != "before" || eff.Tasks[1].Type != "before" {
		t.Fatalf("tasks = %+v, want each inner instance's start listener, over the collection the listener set", eff.Tasks)
	}
	if eff.Tasks[0].Variables["region"] != "eu" {
		t.Fatalf("inner instance job sees %v, want the body's region", eff.Tasks[0].Variables)
	}
	if got := x.in.State.Variables["items"]; got != nil {
		t.Fatalf("instance variables hold items %v: the beforeAll listener's variables are the body's", got)
	}
	if b := x.body("Each"); b.Vars["region"] != "eu" {
		t.Fatalf("body locals = %v, want region from the listener", b.Vars)
	}
}

package engine

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sutra-run/worker/fault"
)

// canceledTask is Camunda user task id with two canceling listeners (the
// second under Zeebe 8.6's name), undo then notify, and a completing one.
func canceledTask(id string) string {
	return `<bpmn:userTask id="` + id + `"><bpmn:extensionElements><zeebe:userTask /><zeebe:taskListeners>
  <zeebe:taskListener eventType="canceling" type="undo" /><zeebe:taskListener eventType="cancel" type="notify" />
  <zeebe:taskListener eventType="completing" type="check" />
</zeebe:taskListeners></bpmn:extensionElements></bpmn:userTask>`
}

// lateTask is start → user task U (canceledTask) → end E, with an
// interrupting timer boundary event Late → end L.
var lateTask = `<bpmn:startEvent id="S" />` + canceledTask("U") + `
<bpmn:boundaryEvent id="Late" attachedToRef="U"><bpmn:timerEventDefinition><bpmn:timeDuration>PT1H</bpmn:timeDuration></bpmn:timerEventDefinition></bpmn:boundaryEvent>
<bpmn:endEvent id="E" /><bpmn:endEvent id="L" />` + flow("F1", "S", "U") + flow("F2", "U", "E") + flow("F3", "Late", "L")

// userTask returns the user task row a step opened.
func userTask(t *testing.T, eff Effects, element string) Task {
	t.Helper()
	for _, k := range eff.Tasks {
		if k.Element == element && k.User != nil {
			return k
		}
	}
	t.Fatalf("tasks = %+v, want the user task %s", eff.Tasks, element)
	return Task{}
}

func TestInterruptingTimerBoundaryWaitsForCancelingListenersThenTakesItsFlow(t *testing.T) {
	x := newInstance(t, parse(t, lateTask, ""))
	u := userTask(t, x.step(Trigger{Kind: TriggerStart}), "U")
	eff := x.step(Trigger{Kind: TriggerTimer, TokenID: u.TokenID, Element: "Late"})
	k := job(t, eff)
	if k.Type != "undo" || k.Element != "U" || !slices.Contains(eff.CloseWaits, WaitRef{TokenID: u.TokenID}) {
		t.Fatalf("job %+v, closed %+v: want the first canceling listener's job, the user task closed", k, eff.CloseWaits)
	}
	if tok := x.token("U"); tok.Wait != WaitListener || tok.Then == nil || tok.Then.Kind != ThenBoundary || slices.Contains(eff.Passed, "Late") {
		t.Fatalf("token %+v, passed %v: want U terminating, the boundary flow held", tok, eff.Passed)
	}
	// The task is closed: completing it is refused, no completing listener runs.
	if err := x.fail(done(u, nil)); !fault.HasCode(err, fault.NotWaiting) {
		t.Fatalf("completing the canceled task: %v, want %s", err, fault.NotWaiting)
	}
	k = job(t, x.step(done(k, nil)))
	if k.Type != "notify" {
		t.Fatalf("second job = %+v, want notify (cancel is canceling)", k)
	}
	eff = x.step(done(k, nil))
	if !eff.Completed || !slices.Contains(eff.Passed, "F3") || slices.Contains(eff.Passed, "F2") {
		t.Fatalf("completed %v, passed %v: want the boundary flow taken once the listeners are done", eff.Completed, eff.Passed)
	}
}

// A message boundary on a subprocess holding the user task: the subprocess
// terminates after the task's listeners, then the boundary's flow takes the
// message's payload.
func TestInterruptingMessageBoundaryOnASubprocessWaitsForTheTaskInside(t *testing.T) {
	x := newInstance(t, parse(t, `<bpmn:startEvent id="S" />
<bpmn:subProcess id="Sub"><bpmn:startEvent id="SS" />`+canceledTask("U")+`<bpmn:endEvent id="SE" />`+flow("G1", "SS", "U")+flow("G2", "U", "SE")+`</bpmn:subProcess>
<bpmn:boundaryEvent id="Stop" attachedToRef="Sub"><bpmn:messageEventDefinition messageRef="M1" /></bpmn:boundaryEvent>
<bpmn:userTask id="After"><bpmn:extensionElements><zeebe:userTask /></bpmn:extensionElements></bpmn:userTask><bpmn:endEvent id="E" />`+
		flow("F1", "S", "Sub")+flow("F2", "Sub", "E")+flow("F3", "Stop", "After"), msgDefs))
	x.step(Trigger{Kind: TriggerStart})
	k := job(t, x.step(Trigger{Kind: TriggerMessage, Message: "m1", Variables: map[string]any{"why": "stop"}}))
	if sub := x.token("Sub"); sub.Wait != WaitTerminating || sub.Then == nil || sub.Then.Kind != ThenBoundary {
		t.Fatalf("subprocess token %+v: want it terminating, its boundary held", sub)
	}
	if x.in.State.Variables["why"] != nil {
		t.Fatalf("variables %v: the message's payload applied before the subprocess ended", x.in.State.Variables)
	}
	k = job(t, x.step(done(k, nil)))
	eff := x.step(done(k, nil))
	if u := userTask(t, eff, "After"); u.Element != "After" || x.in.State.Variables["why"] != "stop" {
		t.Fatalf("variables %v: want the boundary completed with the payload, After created", x.in.State.Variables)
	}
	if got := x.at(); !reflect.DeepEqual(got, []string{"After/task"}) {
		t.Fatalf("tokens %v, want only After", got)
	}
}

func TestInstanceCancelWaitsForCancelingListenersThenEndsCancelled(t *testing.T) {
	x := newInstance(t, parse(t, lateTask, ""))
	u := userTask(t, x.step(Trigger{Kind: TriggerStart}), "U")
	eff := x.step(Trigger{Kind: TriggerCancel})
	k := job(t, eff)
	if x.in.State.Status != StatusCancelling || k.Type != "undo" {
		t.Fatalf("status %s, job %+v: want cancelling, the first canceling listener's job", x.in.State.Status, k)
	}
	if !slices.Contains(eff.CloseWaits, WaitRef{TokenID: u.TokenID}) {
		t.Fatalf("closed %+v: want the user task and its boundary timer closed", eff.CloseWaits)
	}
	// A second cancel changes nothing and opens no second job.
	if again := x.step(Trigger{Kind: TriggerCancel}); len(again.Tasks) != 0 || len(again.CloseWaits) != 0 || x.in.State.Status != StatusCancelling {
		t.Fatalf("second cancel: effects %+v, status %s: want nothing, still cancelling", again, x.in.State.Status)
	}
	if err := x.fail(Trigger{Kind: TriggerTimer, TokenID: u.TokenID, Element: "Late"}); !fault.HasCode(err, fault.NotWaiting) {
		t.Fatalf("the boundary timer of a cancelling instance: %v, want %s", err, fault.NotWaiting)
	}
	k = job(t, x.step(done(k, nil)))
	eff = x.step(done(k, nil))
	if x.in.State.Status != StatusCancelled || len(x.in.State.Tokens) != 0 || x.in.State.Then != nil || eff.Completed {
		t.Fatalf("status %s, state %+v: want cancelled, nothing left", x.in.State.Status, x.in.State)
	}
}

// A cancel while a boundary event waits for the task's listeners wins: the
// job already open stays the only one, and the boundary's flow is not taken.
func TestInstanceCancelOverridesABoundaryWaitingForCancelingListeners(t *testing.T) {
	x := newInstance(t, parse(t, lateTask, ""))
	u := userTask(t, x.step(Trigger{Kind: TriggerStart}), "U")
	k := job(t, x.step(Trigger{Kind: TriggerTimer, TokenID: u.TokenID, Element: "Late"}))
	if eff := x.step(Trigger{Kind: TriggerCancel}); len(eff.Tasks) != 0 || x.in.State.Status != StatusCancelling {
		t.Fatalf("cancel: tasks %+v, status %s: want no new job, cancelling", eff.Tasks, x.in.State.Status)
	}
	k = job(t, x.step(done(k, nil)))
	eff := x.step(done(k, nil))
	if x.in.State.Status != StatusCancelled || slices.Contains(eff.Passed, "Late") {
		t.Fatalf("status %s, passed %v: want cancelled without the boundary's flow", x.in.State.Status, eff.Passed)
	}
}

func TestTerminateEndInAParallelBranchWaitsForCancelingListeners(t *testing.T) {
	x := newInstance(t, parse(t, `<bpmn:startEvent id="S" /><bpmn:parallelGateway id="Fork" />`+canceledTask("U")+catchMsg("Stop", "M1")+`
<bpmn:endEvent id="T"><bpmn:terminateEventDefinition /></bpmn:endEvent><bpmn:endEvent id="E" />`+
		flow("F0", "S", "Fork")+flow("F1", "Fork", "U")+flow("F2", "Fork", "Stop")+flow("F3", "Stop", "T")+flow("F4", "U", "E"), msgDefs))
	x.step(Trigger{Kind: TriggerStart})
	eff := x.step(Trigger{Kind: TriggerMessage, Message: "m1"})
	k := job(t, eff)
	if eff.Completed || x.in.State.Then == nil || x.in.State.Then.Kind != ThenTerminate || x.in.State.Status != StatusActive {
		t.Fatalf("completed %v, state %+v: want the instance active, its termination held", eff.Completed, x.in.State)
	}
	k = job(t, x.step(done(k, nil)))
	if eff := x.step(done(k, nil)); !eff.Completed || x.in.State.Status != StatusCompleted {
		t.Fatalf("completed %v, status %s: want the instance completed once the listeners are done", eff.Completed, x.in.State.Status)
	}
}

func TestCancelingListenerFailureIsAnIncidentWhoseRetryRecreatesTheJob(t *testing.T) {
	x := newInstance(t, parse(t, lateTask, ""))
	x.step(Trigger{Kind: TriggerStart})
	k := job(t, x.step(Trigger{Kind: TriggerCancel}))
	eff := x.step(Trigger{Kind: TriggerTaskFailed, TokenID: k.TokenID, Element: "U", ErrorMessage: "down"})
	if len(eff.Incidents) != 1 || eff.Incidents[0].Code != fault.IncidentTaskFailed || !strings.Contains(eff.Incidents[0].Message, "canceling listener 1 of U") {
		t.Fatalf("incidents = %+v, want one naming the canceling listener", eff.Incidents)
	}
	if x.in.State.Status != StatusCancelling {
		t.Fatalf("status %s, want still cancelling", x.in.State.Status)
	}
	k = job(t, x.step(Trigger{Kind: TriggerRetry, TokenID: x.token("U").ID, Retries: 2}))
	if k.Type != "undo" || k.Retries != 2 {
		t.Fatalf("job after the retry = %+v, want undo again with 2 retries", k)
	}
	// A canceling listener may not set variables either.
	eff = x.step(done(k, map[string]any{"x": 1.0}))
	if len(eff.Incidents) != 1 || eff.Incidents[0].Code != fault.IncidentListener {
		t.Fatalf("incidents = %+v, want %s", eff.Incidents, fault.IncidentListener)
	}
	k = job(t, x.step(Trigger{Kind: TriggerRetry, TokenID: x.token("U").ID}))
	k = job(t, x.step(done(k, nil)))
	x.step(done(k, nil))
	if x.in.State.Status != StatusCancelled {
		t.Fatalf("status %s, want cancelled", x.in.State.Status)
	}
}

// A multi-instance user task whose completion condition holds after one
// inner instance: the others run their canceling listeners before the body
// completes.
func TestMultiInstanceCompletionWaitsForCancelingListenersOfTheOthers(t *testing.T) {
	x := newInstance(t, parse(t, `<bpmn:startEvent id="S" />`+strings.Replace(canceledTask("U"), `</bpmn:extensionElements>`,
		`</bpmn:extensionElements><bpmn:multiInstanceLoopCharacteristics><bpmn:extensionElements><zeebe:loopCharacteristics inputCollection="=[1,2]" /></bpmn:extensionElements>
<bpmn:completionCondition xsi:type="bpmn:tFormalExpression">=true</bpmn:completionCondition></bpmn:multiInstanceLoopCharacteristics>`, 1)+
		`<bpmn:endEvent id="E" />`+flow("F1", "S", "U")+flow("F2", "U", "E"), ""))
	eff := x.step(Trigger{Kind: TriggerStart})
	first := eff.Tasks[0]
	k := job(t, x.step(done(first, nil))) // its completing listener
	k = job(t, x.step(done(k, nil)))      // the other inner instance's canceling listener
	if k.Type != "undo" || x.body("U").Then == nil {
		t.Fatalf("job %+v, body %+v: want the other instance canceling, the body held", k, x.body("U"))
	}
	k = job(t, x.step(done(k, nil)))
	if eff := x.step(done(k, nil)); !eff.Completed {
		t.Fatalf("tokens %v: want the body completed and the instance with it", x.at())
	}
}

// An interrupting event subprocess starts once the tasks of its scope ran
// their canceling listeners.
func TestInterruptingEventSubprocessStartsAfterCancelingListeners(t *testing.T) {
	x := newInstance(t, parse(t, `<bpmn:startEvent id="S" />`+canceledTask("U")+`<bpmn:endEvent id="E" />`+flow("F1", "S", "U")+flow("F2", "U", "E")+`
<bpmn:subProcess id="OnStop" triggeredByEvent="true"><bpmn:startEvent id="MS"><bpmn:messageEventDefinition messageRef="M1" /></bpmn:startEvent>
<bpmn:userTask id="Handle"><bpmn:extensionElements><zeebe:userTask /></bpmn:extensionElements></bpmn:userTask>`+flow("H1", "MS", "Handle")+`</bpmn:subProcess>`, msgDefs))
	x.step(Trigger{Kind: TriggerStart})
	k := job(t, x.step(Trigger{Kind: TriggerMessage, Message: "m1", Variables: map[string]any{"why": "stop"}}))
	if got := x.at(); !reflect.DeepEqual(got, []string{"U/listener"}) {
		t.Fatalf("tokens %v: want only U, terminating", got)
	}
	k = job(t, x.step(done(k, nil)))
	eff := x.step(done(k, nil))
	userTask(t, eff, "Handle")
	if x.in.State.Variables["why"] != "stop" || x.in.State.Then != nil {
		t.Fatalf("state %+v: want the event subprocess started with the payload", x.in.State)
	}
}

// Without canceling listeners nothing waits: the same boundary event
// takes its flow in the step that fires it, and the state holds no Then.
func TestUserTaskWithoutCancelingListenersIsInterruptedAtOnce(t *testing.T) {
	plain := strings.Replace(lateTask, `<zeebe:taskListener eventType="canceling" type="undo" /><zeebe:taskListener eventType="cancel" type="notify" />`, "", 1)
	def := parse(t, plain, "")
	if def.ListensCanceling() {
		t.Fatal("ListensCanceling() on a process without canceling listeners")
	}
	x := newInstance(t, def)
	u := userTask(t, x.step(Trigger{Kind: TriggerStart}), "U")
	eff := x.step(Trigger{Kind: TriggerTimer, TokenID: u.TokenID, Element: "Late"})
	if !eff.Completed || len(eff.Tasks) != 0 || !slices.Contains(eff.Passed, "F3") {
		t.Fatalf("effects %+v: want the boundary flow taken at once", eff)
	}
	y := newInstance(t, def)
	y.step(Trigger{Kind: TriggerStart})
	if eff := y.step(Trigger{Kind: TriggerCancel}); y.in.State.Status != StatusCancelled || len(eff.Tasks) != 0 {
		t.Fatalf("cancel: status %s, effects %+v: want cancelled at once", y.in.State.Status, eff)
	}
}

// A terminating token is not migrated.
func TestTerminatingTokenIsNotMigrated(t *testing.T) {
	def := parse(t, lateTask, "")
	x := newInstance(t, def)
	u := userTask(t, x.step(Trigger{Kind: TriggerStart}), "U")
	x.step(Trigger{Kind: TriggerTimer, TokenID: u.TokenID, Element: "Late"})
	if _, _, err := Migrate(def, def, x.in, nil, x.now); !fault.HasCode(err, fault.MigrateListener) {
		t.Fatalf("Migrate: %v, want %s", err, fault.MigrateListener)
	}
}

// A terminate end event inside a subprocess: the subprocess completes once
// the task beside it ran its canceling listeners, and its message event
// subprocess, closed meanwhile, starts nothing inside it.
func TestTerminateEndInASubprocessCompletesItAfterCancelingListeners(t *testing.T) {
	x := newInstance(t, parse(t, `<bpmn:startEvent id="S" />
<bpmn:subProcess id="Sub"><bpmn:startEvent id="SS" /><bpmn:parallelGateway id="Fork" />`+canceledTask("U")+catchMsg("Stop", "M1")+`
<bpmn:endEvent id="T"><bpmn:terminateEventDefinition /></bpmn:endEvent><bpmn:endEvent id="SE" />
<bpmn:subProcess id="Note" triggeredByEvent="true"><bpmn:startEvent id="NS" isInterrupting="false"><bpmn:messageEventDefinition messageRef="M2" /></bpmn:startEvent></bpmn:subProcess>`+
		flow("G0", "SS", "Fork")+flow("G1", "Fork", "U")+flow("G2", "Fork", "Stop")+flow("G3", "Stop", "T")+flow("G4", "U", "SE")+`</bpmn:subProcess>
<bpmn:userTask id="After"><bpmn:extensionElements><zeebe:userTask /></bpmn:extensionElements></bpmn:userTask>`+flow("F1", "S", "Sub")+flow("F2", "Sub", "After"), msgDefs))
	x.step(Trigger{Kind: TriggerStart})
	k := job(t, x.step(Trigger{Kind: TriggerMessage, Message: "m1"}))
	if sub := x.token("Sub"); sub.Then == nil || sub.Then.Kind != ThenTerminate || len(sub.Armed) != 0 {
		t.Fatalf("subprocess token %+v: want its completion held, its event subprocess closed", sub)
	}
	if err := x.fail(Trigger{Kind: TriggerMessage, Message: "m2"}); !fault.HasCode(err, fault.NotWaiting) {
		t.Fatalf("the event subprocess of a terminating scope: %v, want %s", err, fault.NotWaiting)
	}
	k = job(t, x.step(done(k, nil)))
	userTask(t, x.step(done(k, nil)), "After")
	if got := x.at(); !reflect.DeepEqual(got, []string{"After/task"}) {
		t.Fatalf("tokens %v, want only After", got)
	}
}

// An ad-hoc subprocess whose completion condition cancels the remaining
// activations completes once a user task among them ran its canceling
// listeners.
func TestAdHocCancelRemainingWaitsForCancelingListeners(t *testing.T) {
	bpmnText := strings.Replace(adHocBPMN("", `<bpmn:completionCondition>=count(results) &gt;= 1</bpmn:completionCondition>`),
		`<bpmn:serviceTask id="B"><bpmn:extensionElements><zeebe:taskDefinition type="b" /></bpmn:extensionElements></bpmn:serviceTask>`, canceledTask("B"), 1)
	x := newInstance(t, parse(t, bpmnText, ""))
	eff := x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"tools": []any{"A", "B"}}})
	a := tasksAt(eff.Tasks)["A"]
	k := job(t, x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: a.TokenID, Element: "A", Variables: map[string]any{"result": 1.0}}))
	if x.in.State.Status != StatusActive || k.Type != "undo" || x.adHocToken("AH").Then == nil {
		t.Fatalf("status %s, job %+v, tokens %v: want the subprocess held by B's canceling listener", x.in.State.Status, k, x.at())
	}
	k = job(t, x.step(done(k, nil)))
	x.step(done(k, nil))
	if x.in.State.Status != StatusCompleted || !reflect.DeepEqual(x.in.State.Variables["results"], []any{1.0}) {
		t.Fatalf("status %s, results %v: want completed with A's result", x.in.State.Status, x.in.State.Variables["results"])
	}
}

package engine

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/fault"
)

// serviceTask is a service task of type typ.
func serviceTask(id, typ string) string {
	return `<bpmn:serviceTask id="` + id + `"><bpmn:extensionElements><zeebe:taskDefinition type="` + typ + `" /></bpmn:extensionElements></bpmn:serviceTask>`
}

// undoable gives activity id a compensation boundary event whose handler
// is service task "Undo"+id of type "undo-"+id.
func undoable(id string) string {
	return `<bpmn:boundaryEvent id="` + id + `_C" attachedToRef="` + id + `"><bpmn:compensateEventDefinition /></bpmn:boundaryEvent>
<bpmn:serviceTask id="Undo` + id + `" isForCompensation="true"><bpmn:extensionElements><zeebe:taskDefinition type="undo-` + id + `" /></bpmn:extensionElements></bpmn:serviceTask>
<bpmn:association id="` + id + `_A" sourceRef="` + id + `_C" targetRef="Undo` + id + `" />`
}

// compensableTask is a service task of type id that Undo+id compensates.
func compensableTask(id string) string { return serviceTask(id, id) + undoable(id) }

// compensableScript is a script task (it completes at once) that Undo+id
// compensates.
func compensableScript(id, expr, result string) string {
	return `<bpmn:scriptTask id="` + id + `"><bpmn:extensionElements><zeebe:script expression="` + expr + `" resultVariable="` + result + `" /></bpmn:extensionElements></bpmn:scriptTask>` + undoable(id)
}

// compensation is a compensation intermediate throw (or, with end, end)
// event compensating activity ref ("" = every completed activity).
func compensation(id, ref string, end bool) string {
	typ := "intermediateThrowEvent"
	if end {
		typ = "endEvent"
	}
	def := `<bpmn:compensateEventDefinition />`
	if ref != "" {
		def = `<bpmn:compensateEventDefinition activityRef="` + ref + `" />`
	}
	return `<bpmn:` + typ + ` id="` + id + `">` + def + `</bpmn:` + typ + `>`
}

// completeAt completes the one task waiting at element.
func (x *instance) completeAt(element string, vars map[string]any) Effects {
	x.t.Helper()
	tok := x.token(element)
	if tok.Wait != WaitTask {
		x.t.Fatalf("%s waits as %s, not on a task", element, tok.Wait)
	}
	return x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: tok.ID, Element: element, Variables: vars})
}

// taskElements lists the elements of the tasks eff creates, in order.
func taskElements(eff Effects) []string {
	var out []string
	for _, task := range eff.Tasks {
		out = append(out, task.Element)
	}
	return out
}

func (x *instance) wantAt(want ...string) {
	x.t.Helper()
	if got := x.at(); !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
		x.t.Fatalf("tokens at %v, want %v", got, want)
	}
}

// TestCompensationThrowStartsHandlersOfCompletedActivitiesLatestFirstAndWaits:
// A and B complete, then the throw starts B's handler and A's (the latest
// completion first, all at once) and waits until both have completed.
// Active, still running when the throw is reached, and Never, not reached
// yet, are not compensated.
func TestCompensationThrowStartsHandlersOfCompletedActivitiesLatestFirstAndWaits(t *testing.T) {
	x := newInstance(t, parse(t, `<bpmn:startEvent id="S" /><bpmn:parallelGateway id="Fork" />`+
		compensableTask("A")+compensableTask("B")+compensation("Throw", "", false)+`<bpmn:endEvent id="End" />`+
		compensableTask("Active")+compensableTask("Never")+`<bpmn:endEvent id="End2" />`+
		flow("F0", "S", "Fork")+flow("F1", "Fork", "A")+flow("F2", "Fork", "Active")+flow("F3", "A", "B")+flow("F4", "B", "Throw")+
		flow("F5", "Throw", "End")+flow("F6", "Active", "Never")+flow("F7", "Never", "End2"), ""))
	x.step(Trigger{Kind: TriggerStart})
	x.completeAt("A", nil)
	if got := x.in.State.Compensable; !reflect.DeepEqual(got, []Compensable{{Element: "A", Times: 1}}) {
		t.Fatalf("compensable = %+v", got)
	}
	eff := x.completeAt("B", nil)
	if got := taskElements(eff); !reflect.DeepEqual(got, []string{"UndoB", "UndoA"}) {
		t.Fatalf("the throw created tasks %v, want UndoB then UndoA", got)
	}
	if eff.Tasks[0].Type != "undo-B" || eff.Tasks[1].Type != "undo-A" {
		t.Errorf("handler task types %q %q", eff.Tasks[0].Type, eff.Tasks[1].Type)
	}
	x.wantAt("Throw/compensation", "Active/task", "UndoB/task", "UndoA/task")
	if len(x.in.State.Compensable) != 0 {
		t.Errorf("compensated records left: %+v", x.in.State.Compensable)
	}

	// The throw waits for every handler: one completing is not enough.
	x.completeAt("UndoB", map[string]any{"undoneB": true})
	x.wantAt("Throw/compensation", "Active/task", "UndoA/task")
	x.completeAt("UndoA", nil)
	x.wantAt("Active/task")
	if x.in.State.Variables["undoneB"] != true {
		t.Errorf("variables = %v: the handler's result is merged like any task's", x.in.State.Variables)
	}

	x.completeAt("Active", nil)
	if got := x.in.State.Compensable; !reflect.DeepEqual(got, []Compensable{{Element: "Active", Times: 1}}) {
		t.Fatalf("compensable = %+v", got)
	}
	eff = x.completeAt("Never", nil)
	if !eff.Completed || x.in.State.Compensable != nil {
		t.Errorf("completed %v, records %+v: an ended instance keeps none", eff.Completed, x.in.State.Compensable)
	}
}

// TestCompensationThrowWithActivityRefCompensatesOnlyThatActivity: the
// first throw names A; the second, naming none, finds A compensated
// already and undoes B only.
func TestCompensationThrowWithActivityRefCompensatesOnlyThatActivity(t *testing.T) {
	x := newInstance(t, parse(t, `<bpmn:startEvent id="S" />`+compensableTask("A")+compensableTask("B")+
		compensation("ThrowA", "A", false)+compensation("ThrowAll", "", false)+`<bpmn:endEvent id="End" />`+
		flow("F1", "S", "A")+flow("F2", "A", "B")+flow("F3", "B", "ThrowA")+flow("F4", "ThrowA", "ThrowAll")+flow("F5", "ThrowAll", "End"), ""))
	x.step(Trigger{Kind: TriggerStart})
	x.completeAt("A", nil)
	if got := taskElements(x.completeAt("B", nil)); !reflect.DeepEqual(got, []string{"UndoA"}) {
		t.Fatalf("ThrowA created tasks %v, want UndoA only", got)
	}
	x.wantAt("ThrowA/compensation", "UndoA/task")
	if got := taskElements(x.completeAt("UndoA", nil)); !reflect.DeepEqual(got, []string{"UndoB"}) {
		t.Fatalf("ThrowAll created tasks %v, want UndoB only", got)
	}
	if eff := x.completeAt("UndoB", nil); !eff.Completed {
		t.Errorf("the instance did not complete: %v", x.at())
	}
}

// TestCompensationHandlerRunsAsAnOrdinaryTask: the handler's input
// mappings are its task's variables, a worker completes it, and its output
// mappings apply.
func TestCompensationHandlerRunsAsAnOrdinaryTask(t *testing.T) {
	x := newInstance(t, parse(t, `<bpmn:startEvent id="S" />`+serviceTask("Charge", "charge")+`
<bpmn:boundaryEvent id="ChargeC" attachedToRef="Charge"><bpmn:compensateEventDefinition /></bpmn:boundaryEvent>
<bpmn:serviceTask id="Refund" isForCompensation="true"><bpmn:extensionElements><zeebe:taskDefinition type="refund" retries="5" />
  <zeebe:ioMapping><zeebe:input source="=0 - amount" target="refund" /><zeebe:output source="=receipt" target="refundReceipt" /></zeebe:ioMapping>
</bpmn:extensionElements></bpmn:serviceTask>
<bpmn:association id="As" sourceRef="ChargeC" targetRef="Refund" />`+compensation("Undo", "", true)+
		flow("F1", "S", "Charge")+flow("F2", "Charge", "Undo"), ""))
	x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"amount": 5.0}})
	eff := x.completeAt("Charge", nil)
	want := []Task{{TokenID: x.token("Refund").ID, Element: "Refund", Type: "refund", Retries: 5, Variables: map[string]any{"refund": -5.0}}}
	if !reflect.DeepEqual(eff.Tasks, want) {
		t.Fatalf("tasks = %+v\nwant %+v", eff.Tasks, want)
	}
	if eff := x.completeAt("Refund", map[string]any{"receipt": "r-1"}); !eff.Completed {
		t.Fatalf("not completed: %v", x.at())
	}
	if x.in.State.Variables["refundReceipt"] != "r-1" || x.in.State.Variables["receipt"] != nil {
		t.Errorf("variables = %v", x.in.State.Variables)
	}
}

// TestCompensationEndEventInASubprocessCompensatesItsScopeOnly: the
// subprocess's compensation end event undoes A inside it, not A0 before
// it, and the subprocess completes once the handler has.
func TestCompensationEndEventInASubprocessCompensatesItsScopeOnly(t *testing.T) {
	x := newInstance(t, parse(t, `<bpmn:startEvent id="S" />`+compensableTask("A0")+`
<bpmn:subProcess id="Sub"><bpmn:startEvent id="SS" />`+compensableTask("A")+compensation("CompEnd", "", true)+
		flow("FS1", "SS", "A")+flow("FS2", "A", "CompEnd")+`</bpmn:subProcess>`+receive("After", "M1")+
		flow("F1", "S", "A0")+flow("F2", "A0", "Sub")+flow("F3", "Sub", "After"), msgDefs))
	x.step(Trigger{Kind: TriggerStart})
	x.completeAt("A0", nil)
	if got := taskElements(x.completeAt("A", nil)); !reflect.DeepEqual(got, []string{"UndoA"}) {
		t.Fatalf("tasks %v, want UndoA only", got)
	}
	x.wantAt("Sub/scope", "CompEnd/compensation", "UndoA/task")
	if x.token("UndoA").Scope != x.token("Sub").ID {
		t.Errorf("the handler runs in %s, not in the subprocess", x.token("UndoA").Scope)
	}
	x.completeAt("UndoA", nil)
	x.wantAt("After/message")
	if got := x.in.State.Compensable; !reflect.DeepEqual(got, []Compensable{{Element: "A0", Times: 1}}) {
		t.Errorf("compensable = %+v, want A0 alone", got)
	}
}

// TestCompensationReachesIntoCompletedSubprocesses: A and B complete
// inside Sub, which completes; a throw naming Sub undoes them (B first)
// and not C, completed after Sub; a throw naming none then undoes C.
func TestCompensationReachesIntoCompletedSubprocesses(t *testing.T) {
	x := newInstance(t, parse(t, `<bpmn:startEvent id="S" />
<bpmn:subProcess id="Sub"><bpmn:startEvent id="SS" />`+compensableTask("A")+compensableTask("B")+`<bpmn:endEvent id="SE" />`+
		flow("FS1", "SS", "A")+flow("FS2", "A", "B")+flow("FS3", "B", "SE")+`</bpmn:subProcess>`+compensableTask("C")+
		compensation("ThrowSub", "Sub", false)+compensation("ThrowAll", "", false)+`<bpmn:endEvent id="End" />`+
		flow("F1", "S", "Sub")+flow("F2", "Sub", "C")+flow("F3", "C", "ThrowSub")+flow("F4", "ThrowSub", "ThrowAll")+flow("F5", "ThrowAll", "End"), ""))
	x.step(Trigger{Kind: TriggerStart})
	x.completeAt("A", nil)
	if got := x.in.State.Compensable; len(got) != 1 || got[0].Scope != x.token("Sub").ID {
		t.Fatalf("compensable = %+v: A is in the running subprocess's scope", got)
	}
	x.completeAt("B", nil)
	want := []Compensable{{Element: "A", In: []string{"Sub"}, Times: 1}, {Element: "B", In: []string{"Sub"}, Times: 1}}
	if got := x.in.State.Compensable; !reflect.DeepEqual(got, want) {
		t.Fatalf("compensable = %+v\nwant %+v", got, want)
	}
	if got := taskElements(x.completeAt("C", nil)); !reflect.DeepEqual(got, []string{"UndoB", "UndoA"}) {
		t.Fatalf("ThrowSub created tasks %v, want UndoB, UndoA", got)
	}
	x.wantAt("ThrowSub/compensation", "UndoB/task", "UndoA/task")
	x.completeAt("UndoA", nil)
	if got := taskElements(x.completeAt("UndoB", nil)); !reflect.DeepEqual(got, []string{"UndoC"}) {
		t.Fatalf("ThrowAll created tasks %v, want UndoC", got)
	}
	if eff := x.completeAt("UndoC", nil); !eff.Completed {
		t.Errorf("not completed: %v", x.at())
	}
}

// TestCompensationOfMultiInstanceActivities: a multi-instance task's
// handler runs once for all its instances, as in Zeebe; a compensable
// task inside a multi-instance subprocess is undone once per completed
// inner instance, from one record.
func TestCompensationOfMultiInstanceActivities(t *testing.T) {
	loop := `<bpmn:multiInstanceLoopCharacteristics><bpmn:extensionElements><zeebe:loopCharacteristics inputCollection="=[1,2,3]" inputElement="item" /></bpmn:extensionElements></bpmn:multiInstanceLoopCharacteristics>`
	t.Run("multi-instance task", func(t *testing.T) {
		x := newInstance(t, parse(t, `<bpmn:startEvent id="S" />
<bpmn:serviceTask id="A"><bpmn:extensionElements><zeebe:taskDefinition type="a" /></bpmn:extensionElements>`+loop+`</bpmn:serviceTask>`+undoable("A")+
			compensation("Throw", "", true)+flow("F1", "S", "A")+flow("F2", "A", "Throw"), ""))
		x.step(Trigger{Kind: TriggerStart})
		var tasks []string
		for _, tok := range x.in.State.Tokens {
			if tok.Wait == WaitTask {
				tasks = append(tasks, tok.ID)
			}
		}
		var eff Effects
		for k, id := range tasks {
			eff = x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: id, Element: "A"})
			if k < len(tasks)-1 && len(x.in.State.Compensable) != 0 {
				t.Fatalf("a record before every instance completed: %+v", x.in.State.Compensable)
			}
		}
		if got := taskElements(eff); !reflect.DeepEqual(got, []string{"UndoA"}) {
			t.Fatalf("tasks %v, want UndoA once", got)
		}
	})
	t.Run("task inside a multi-instance subprocess", func(t *testing.T) {
		x := newInstance(t, parse(t, `<bpmn:startEvent id="S" />
<bpmn:subProcess id="Sub"><bpmn:startEvent id="SS" />`+compensableScript("B", "=item", "b")+`<bpmn:endEvent id="SE" />`+
			flow("FS1", "SS", "B")+flow("FS2", "B", "SE")+loop+`</bpmn:subProcess>`+receive("Wait", "M1")+
			compensation("Throw", "", true)+flow("F1", "S", "Sub")+flow("F2", "Sub", "Wait")+flow("F3", "Wait", "Throw"), msgDefs))
		x.step(Trigger{Kind: TriggerStart})
		if got, want := x.in.State.Compensable, []Compensable{{Element: "B", In: []string{"Sub"}, Times: 3}}; !reflect.DeepEqual(got, want) {
			t.Fatalf("compensable = %+v\nwant %+v", got, want)
		}
		eff := x.step(Trigger{Kind: TriggerMessage, Message: "m1"})
		if got := taskElements(eff); !reflect.DeepEqual(got, []string{"UndoB", "UndoB", "UndoB"}) {
			t.Fatalf("tasks %v, want UndoB three times", got)
		}
	})
}

// TestCompensationRecordsStayBoundedInALoop: an activity a loop runs five
// times holds one record, and its handler runs five times.
func TestCompensationRecordsStayBoundedInALoop(t *testing.T) {
	x := newInstance(t, parse(t, `<bpmn:startEvent id="S" />`+compensableScript("A", "=count + 1", "count")+
		`<bpmn:exclusiveGateway id="G" default="FOut" />`+receive("Wait", "M1")+compensation("Throw", "", true)+
		flow("F1", "S", "A")+flow("F2", "A", "G")+cond("FBack", "G", "A", "=count &lt; 5")+flow("FOut", "G", "Wait")+flow("F3", "Wait", "Throw"), msgDefs))
	x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"count": 0.0}})
	if got := x.in.State.Compensable; !reflect.DeepEqual(got, []Compensable{{Element: "A", Times: 5}}) {
		t.Fatalf("compensable = %+v, want one record of 5 completions", got)
	}
	eff := x.step(Trigger{Kind: TriggerMessage, Message: "m1"})
	if got := taskElements(eff); len(got) != 5 {
		t.Fatalf("tasks %v, want UndoA five times", got)
	}
}

// TestCompensationForgetsInterruptedScopes: what completed inside a
// subprocess that an interrupting boundary event ended is not compensated,
// and a throw that reaches nothing completes at once.
func TestCompensationForgetsInterruptedScopes(t *testing.T) {
	x := newInstance(t, parse(t, `<bpmn:startEvent id="S" />
<bpmn:subProcess id="Sub"><bpmn:startEvent id="SS" />`+compensableScript("A", "=1", "a")+receive("W", "M1")+
		flow("FS1", "SS", "A")+flow("FS2", "A", "W")+`</bpmn:subProcess>
<bpmn:boundaryEvent id="Cancel" attachedToRef="Sub"><bpmn:messageEventDefinition messageRef="M2" /></bpmn:boundaryEvent>`+
		compensation("Throw", "", false)+`<bpmn:endEvent id="End" />`+
		flow("F1", "S", "Sub")+flow("F2", "Cancel", "Throw")+flow("F3", "Throw", "End"), msgDefs))
	x.step(Trigger{Kind: TriggerStart})
	if len(x.in.State.Compensable) != 1 {
		t.Fatalf("compensable = %+v", x.in.State.Compensable)
	}
	eff := x.step(Trigger{Kind: TriggerMessage, Message: "m2"})
	if !eff.Completed || len(eff.Tasks) != 0 {
		t.Errorf("completed %v, tasks %+v: nothing to compensate", eff.Completed, eff.Tasks)
	}
}

// TestCompensationFromAnEventSubprocess: an error event subprocess's
// compensation end event undoes what completed in the scope around it.
func TestCompensationFromAnEventSubprocess(t *testing.T) {
	x := newInstance(t, parse(t, `<bpmn:startEvent id="S" />`+compensableScript("A", "=1", "a")+
		`<bpmn:endEvent id="Fail"><bpmn:errorEventDefinition errorRef="Err" /></bpmn:endEvent>
<bpmn:subProcess id="OnError" triggeredByEvent="true"><bpmn:startEvent id="ES"><bpmn:errorEventDefinition errorRef="Err" /></bpmn:startEvent>`+
		compensation("CompEnd", "A", true)+flow("FE", "ES", "CompEnd")+`</bpmn:subProcess>`+
		flow("F1", "S", "A")+flow("F2", "A", "Fail"), `<bpmn:error id="Err" errorCode="E" />`))
	eff := x.step(Trigger{Kind: TriggerStart})
	if got := taskElements(eff); !reflect.DeepEqual(got, []string{"UndoA"}) {
		t.Fatalf("tasks %v, want UndoA", got)
	}
	x.wantAt("OnError/scope", "CompEnd/compensation", "UndoA/task")
	if eff := x.completeAt("UndoA", nil); !eff.Completed {
		t.Errorf("not completed: %v", x.at())
	}
}

// TestCompensationWithTooManyHandlersFailsTheStep: a throw that would
// start more handlers than a step may execute fails the step, bounded,
// rather than building them.
func TestCompensationWithTooManyHandlersFailsTheStep(t *testing.T) {
	x := newInstance(t, parse(t, `<bpmn:startEvent id="S" />`+compensableScript("A", "=1", "a")+receive("Wait", "M1")+
		compensation("Throw", "", true)+flow("F1", "S", "A")+flow("F2", "A", "Wait")+flow("F3", "Wait", "Throw"), msgDefs))
	x.step(Trigger{Kind: TriggerStart})
	x.in.State.Compensable[0].Times = maxExecutions + 1
	err := x.fail(Trigger{Kind: TriggerMessage, Message: "m1"})
	if !fault.HasCode(err, fault.StepFailed) || !strings.Contains(err.Error(), "would start 10001 compensation handlers") {
		t.Errorf("err = %v", err)
	}
	// The same when a retry runs the throw again, outside the step's queue.
	inc := &Incident{TokenID: "t9", Element: "Throw", Code: fault.IncidentExpressionLimit, Stage: StageActivate}
	x.in.State.Tokens = []Token{{ID: "t9", Element: "Throw", Wait: WaitIncident, Incident: inc}}
	err = x.fail(Trigger{Kind: TriggerRetry, TokenID: "t9"})
	if !fault.HasCode(err, fault.StepFailed) || !strings.Contains(err.Error(), "would start 10001 compensation handlers") {
		t.Errorf("retry: err = %v", err)
	}
}

// TestCompensationOfTheMembershipCorpusFile runs the corpus file that
// compensation kept out, along its declined path: the claim made at the
// start is revoked by the compensation end event's handler.
func TestCompensationOfTheMembershipCorpusFile(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "bpmn", "testdata", "corpus", "emaarco__easy-zeebe__membership.bpmn"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	def, err := bpmn.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	x := newInstance(t, def)
	x.step(Trigger{Kind: TriggerStart, Element: "startEvent_MembershipRequested", Variables: map[string]any{"membershipId": "m-7"}})
	x.completeAt("serviceTask_ClaimMembership", map[string]any{"hasEmptySpots": true})
	x.step(Trigger{Kind: TriggerMessage, Message: "miravelo.confirmationRejected", CorrelationKey: "m-7"})
	eff := x.completeAt("serviceTask_RevokeMembershipRequest", nil)
	if len(eff.Tasks) != 1 || eff.Tasks[0].Type != "miravelo.revokeClaim" {
		t.Fatalf("tasks = %+v, want the revokeClaim handler", eff.Tasks)
	}
	x.wantAt("endEvent_MembershipDeclined/compensation", "serviceTask_RevokeClaim/task")
	if eff := x.completeAt("serviceTask_RevokeClaim", nil); !eff.Completed {
		t.Errorf("not completed: %v", x.at())
	}
}

// TestMigrateCarriesCompensationRecordsOrRefuses: a record follows the
// mapping of its activity and of the subprocess around it; a target
// without the handler, or a running compensation, refuses the migration.
func TestMigrateCarriesCompensationRecordsOrRefuses(t *testing.T) {
	v1 := `<bpmn:startEvent id="S" /><bpmn:subProcess id="Sub"><bpmn:startEvent id="SS" />` + compensableScript("A", "=1", "a") +
		`<bpmn:endEvent id="SE" />` + flow("FS1", "SS", "A") + flow("FS2", "A", "SE") + `</bpmn:subProcess>` + receive("Wait", "M1") +
		compensableTask("B") + compensation("Throw", "", true) +
		flow("F1", "S", "Sub") + flow("F2", "Sub", "Wait") + flow("F3", "Wait", "B") + flow("F4", "B", "Throw")
	x := newInstance(t, parse(t, v1, msgDefs))
	x.step(Trigger{Kind: TriggerStart})

	v2 := strings.NewReplacer(`"Sub"`, `"Sub2"`, `"A"`, `"A2"`).Replace(v1)
	st, _, err := x.migrate(v2, map[string]string{"Sub": "Sub2", "A": "A2"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []Compensable{{Element: "A2", In: []string{"Sub2"}, Times: 1}}; !reflect.DeepEqual(st.Compensable, want) {
		t.Errorf("compensable = %+v\nwant %+v", st.Compensable, want)
	}

	noHandler := strings.Replace(v1, undoable("A"), "", 1)
	if _, _, err := x.migrate(noHandler, nil); !fault.HasCode(err, fault.MigrateUnreachable) || !strings.Contains(err.Error(), `target "A" has no compensation handler`) {
		t.Errorf("err = %v", err)
	}
	flat := `<bpmn:startEvent id="S" />` + compensableScript("A", "=1", "a") + receive("Wait", "M1") + flow("F1", "S", "A") + flow("F2", "A", "Wait")
	if _, _, err := x.migrate(flat, nil); !fault.HasCode(err, fault.MigrateUnreachable) || !strings.Contains(err.Error(), `target "Sub" is not an embedded subprocess`) &&
		!strings.Contains(err.Error(), `no element "Sub"`) {
		t.Errorf("err = %v", err)
	}

	x.step(Trigger{Kind: TriggerMessage, Message: "m1"})
	x.completeAt("B", nil)
	x.wantAt("Throw/compensation", "UndoB/task", "UndoA/task")
	if _, _, err := x.migrate(v1, nil); !fault.HasCode(err, fault.MigrateUnreachable) || !strings.Contains(err.Error(), "a compensation is running") {
		t.Errorf("err = %v", err)
	}
}

// TestCompensationHandlersMayBeSubprocessesAndMultiInstance: an embedded
// subprocess handler and a multi-instance handler each count as one
// handler, complete when their content has, and then let the throw go on.
func TestCompensationHandlersMayBeSubprocessesAndMultiInstance(t *testing.T) {
	x := newInstance(t, parse(t, `<bpmn:startEvent id="S" />`+
		serviceTask("A", "a")+`<bpmn:boundaryEvent id="AC" attachedToRef="A"><bpmn:compensateEventDefinition /></bpmn:boundaryEvent>
<bpmn:subProcess id="UndoA" isForCompensation="true"><bpmn:startEvent id="US" />`+serviceTask("Refund", "refund")+serviceTask("Notify", "notify")+
		`<bpmn:endEvent id="UE" />`+flow("FU1", "US", "Refund")+flow("FU2", "Refund", "Notify")+flow("FU3", "Notify", "UE")+`</bpmn:subProcess>
<bpmn:association id="AA" sourceRef="AC" targetRef="UndoA" />`+
		serviceTask("B", "b")+`<bpmn:boundaryEvent id="BC" attachedToRef="B"><bpmn:compensateEventDefinition /></bpmn:boundaryEvent>
<bpmn:serviceTask id="UndoB" isForCompensation="true"><bpmn:extensionElements><zeebe:taskDefinition type="undo-b" /></bpmn:extensionElements>
  <bpmn:multiInstanceLoopCharacteristics><bpmn:extensionElements><zeebe:loopCharacteristics inputCollection="=[1,2]" /></bpmn:extensionElements></bpmn:multiInstanceLoopCharacteristics>
</bpmn:serviceTask><bpmn:association id="BA" sourceRef="BC" targetRef="UndoB" />`+
		compensation("Throw", "", false)+receive("After", "M1")+
		flow("F1", "S", "A")+flow("F2", "A", "B")+flow("F3", "B", "Throw")+flow("F4", "Throw", "After"), msgDefs))
	x.step(Trigger{Kind: TriggerStart})
	x.completeAt("A", nil)
	x.completeAt("B", nil)
	x.wantAt("Throw/compensation", "UndoB/multi", "UndoA/scope", "UndoB/task", "UndoB/task", "Refund/task")
	for _, tok := range x.in.State.Tokens {
		if tok.Element == "UndoB" && tok.Wait == WaitTask {
			x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: tok.ID, Element: "UndoB"})
		}
	}
	x.wantAt("Throw/compensation", "UndoA/scope", "Refund/task")
	x.completeAt("Refund", nil)
	x.wantAt("Throw/compensation", "UndoA/scope", "Notify/task")
	x.completeAt("Notify", nil)
	x.wantAt("After/message")
}

package bpmn

import (
	"strings"
	"testing"

	"github.com/sutra-run/worker/fault"
)

// Zeebe accepts execution listeners on a multi-instance activity (they run
// on each inner instance) and on an event subprocess; so does the parser.
func TestListenersOnMultiInstanceActivitiesAndEventSubprocessesParse(t *testing.T) {
	exec := `<zeebe:executionListeners><zeebe:executionListener eventType="start" type="s" /><zeebe:executionListener eventType="end" type="e" /></zeebe:executionListeners>`
	p := mustParse(t, doc(`<bpmn:startEvent id="S" />
<bpmn:serviceTask id="Each"><bpmn:extensionElements><zeebe:taskDefinition type="a" />`+exec+`</bpmn:extensionElements>
  <bpmn:multiInstanceLoopCharacteristics><bpmn:extensionElements><zeebe:loopCharacteristics inputCollection="=xs" /></bpmn:extensionElements></bpmn:multiInstanceLoopCharacteristics></bpmn:serviceTask>
<bpmn:subProcess id="OnMsg" triggeredByEvent="true"><bpmn:extensionElements>`+exec+`</bpmn:extensionElements>
  <bpmn:startEvent id="MS"><bpmn:messageEventDefinition messageRef="M2" /></bpmn:startEvent></bpmn:subProcess>
<bpmn:sequenceFlow id="F" sourceRef="S" targetRef="Each" />`, msgDefs))
	for _, id := range []string{"Each", "OnMsg"} {
		el := p.Element(id)
		if len(el.ListenersOf(ListenerStart)) != 1 || len(el.ListenersOf(ListenerEnd)) != 1 {
			t.Errorf("%s listeners = %+v, want one start and one end", id, el.Listeners)
		}
	}
}

// Zeebe 8.10's beforeAll listeners sit on multi-instance activities only.
func TestBeforeAllListenersNeedAMultiInstanceActivity(t *testing.T) {
	before := `<zeebe:executionListeners><zeebe:executionListener eventType="beforeAll" type="b" /></zeebe:executionListeners>`
	p := mustParse(t, doc(`<bpmn:startEvent id="S" /><bpmn:serviceTask id="Each"><bpmn:extensionElements><zeebe:taskDefinition type="a" />`+before+`</bpmn:extensionElements>
  <bpmn:multiInstanceLoopCharacteristics><bpmn:extensionElements><zeebe:loopCharacteristics inputCollection="=xs" /></bpmn:extensionElements></bpmn:multiInstanceLoopCharacteristics></bpmn:serviceTask>`, ""))
	if l := p.Element("Each").ListenersOf(ListenerBeforeAll); len(l) != 1 || l[0].Type.Source() != "b" {
		t.Fatalf("beforeAll listeners = %+v", l)
	}
	_, err := Parse(strings.NewReader(doc(`<bpmn:startEvent id="S" /><bpmn:serviceTask id="One"><bpmn:extensionElements><zeebe:taskDefinition type="a" />`+before+`</bpmn:extensionElements></bpmn:serviceTask>`, "")))
	if !fault.HasCode(err, fault.BPMNInvalid) || !strings.Contains(err.Error(), `"One"`) {
		t.Fatalf("Parse: %v, want %s naming One", err, fault.BPMNInvalid)
	}
}

// Zeebe 8.6's cancel and 8.7's canceling name one event, which marks the
// process as one whose cancellations wait for listener jobs; a process
// without any does not say so.
func TestCancelingAndCancelTaskListenersAreOneEvent(t *testing.T) {
	user := func(id, event, typ string) string {
		return `<bpmn:userTask id="` + id + `"><bpmn:extensionElements><zeebe:userTask /><zeebe:taskListeners><zeebe:taskListener eventType="` +
			event + `" type="` + typ + `" /></zeebe:taskListeners></bpmn:extensionElements></bpmn:userTask>`
	}
	p := mustParse(t, doc(`<bpmn:startEvent id="S" />`+user("A", "canceling", "a")+user("B", "cancel", "b"), ""))
	for _, id := range []string{"A", "B"} {
		if l := p.Element(id).ListenersOf(ListenerCanceling); len(l) != 1 {
			t.Errorf("%s canceling listeners = %+v, want one", id, p.Element(id).Listeners)
		}
	}
	if !p.ListensCanceling() {
		t.Error("ListensCanceling() = false on a process with canceling listeners")
	}
	if q := mustParse(t, doc(`<bpmn:startEvent id="S" />`+user("C", "completing", "c"), "")); q.ListensCanceling() {
		t.Error("ListensCanceling() = true on a process without canceling listeners")
	}
	_, err := Parse(strings.NewReader(doc(`<bpmn:startEvent id="S" /><bpmn:serviceTask id="T"><bpmn:extensionElements><zeebe:taskDefinition type="a" /><zeebe:taskListeners><zeebe:taskListener eventType="canceling" type="l" /></zeebe:taskListeners></bpmn:extensionElements></bpmn:serviceTask>`, "")))
	if !fault.HasCode(err, fault.BPMNInvalid) {
		t.Fatalf("a canceling listener on a service task: %v, want %s", err, fault.BPMNInvalid)
	}
}

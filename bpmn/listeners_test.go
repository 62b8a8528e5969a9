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

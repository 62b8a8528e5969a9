package bpmn

import "testing"

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

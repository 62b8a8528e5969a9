package bpmn

import (
	"strings"
	"testing"

	"github.com/sutra-run/worker/fault"
)

const sigDefs = `
  <bpmn:signal id="G1" name="go" />
  <bpmn:signal id="GC" name="=&quot;con&quot; + &quot;st&quot;" />
  <bpmn:signal id="GX" name="=&quot;sig-&quot; + kind" />`

func TestParseSignalEvents(t *testing.T) {
	p := mustParse(t, doc(`<bpmn:startEvent id="S"><bpmn:signalEventDefinition signalRef="G1" /></bpmn:startEvent>
		<bpmn:startEvent id="S2"><bpmn:signalEventDefinition signalRef="GC" /></bpmn:startEvent>
		<bpmn:intermediateCatchEvent id="C"><bpmn:signalEventDefinition signalRef="GX" /></bpmn:intermediateCatchEvent>
		<bpmn:serviceTask id="T"><bpmn:extensionElements><zeebe:taskDefinition type="t" /></bpmn:extensionElements></bpmn:serviceTask>
		<bpmn:boundaryEvent id="B" attachedToRef="T" cancelActivity="false"><bpmn:signalEventDefinition signalRef="G1" /></bpmn:boundaryEvent>
		<bpmn:intermediateThrowEvent id="TH"><bpmn:signalEventDefinition signalRef="GX" /></bpmn:intermediateThrowEvent>
		<bpmn:endEvent id="E"><bpmn:signalEventDefinition signalRef="G1" /></bpmn:endEvent>
		<bpmn:subProcess id="ESP" triggeredByEvent="true"><bpmn:startEvent id="ES"><bpmn:signalEventDefinition signalRef="G1" /></bpmn:startEvent></bpmn:subProcess>
		<bpmn:sequenceFlow id="f1" sourceRef="S" targetRef="C" /><bpmn:sequenceFlow id="f2" sourceRef="C" targetRef="T" />
		<bpmn:sequenceFlow id="f3" sourceRef="T" targetRef="TH" /><bpmn:sequenceFlow id="f4" sourceRef="TH" targetRef="E" />
		<bpmn:sequenceFlow id="f5" sourceRef="S2" targetRef="E" /><bpmn:sequenceFlow id="f6" sourceRef="B" targetRef="E" />`, sigDefs))
	if got := p.SignalStarts(); len(got) != 2 || got[0].Signal.Name != "go" || got[1].Signal.Name != "const" {
		t.Errorf("signal starts = %v", got)
	}
	if c := p.Element("C"); c.Kind != KindSignalCatch || c.Signal.NameExpression == nil || c.Signal.Name != "" {
		t.Errorf("catch = %+v", c)
	}
	if b := p.Element("B"); b.Kind != KindBoundary || b.Interrupting || b.Signal.Name != "go" || !b.Armable() {
		t.Errorf("boundary = %+v", b)
	}
	if th := p.Element("TH"); th.Kind != KindThrow || !Publishes(th) {
		t.Errorf("throw = %+v", th)
	}
	if e := p.Element("E"); e.Kind != KindEnd || !Publishes(e) {
		t.Errorf("end = %+v", e)
	}
	if es := p.Element("ES"); !es.IsEventSubStart() || es.Signal.Name != "go" || !es.Interrupting {
		t.Errorf("event subprocess start = %+v", es)
	}
	if p.Start != nil || len(p.MessageNames()) != 0 {
		t.Errorf("start %v, message names %v", p.Start, p.MessageNames())
	}
}

func TestParseRefusesSignalMistakes(t *testing.T) {
	for _, bad := range []struct{ body, code, want string }{
		{`<bpmn:startEvent id="S"><bpmn:signalEventDefinition /></bpmn:startEvent>`, fault.BPMNInvalid, `element "S" has no signalRef`},
		{`<bpmn:startEvent id="S"><bpmn:signalEventDefinition signalRef="NOPE" /></bpmn:startEvent>`, fault.BPMNInvalid, `references signal "NOPE", which is not defined`},
		{`<bpmn:startEvent id="S"><bpmn:signalEventDefinition signalRef="GX" /></bpmn:startEvent>`, fault.BPMNUnsupported, "a signal name expression that reads variables"},
		{`<bpmn:startEvent id="S"><bpmn:signalEventDefinition signalRef="G1" /></bpmn:startEvent>
		  <bpmn:startEvent id="S2"><bpmn:signalEventDefinition signalRef="G1" /></bpmn:startEvent>`, fault.BPMNInvalid, `wait for the same signal "go"`},
		{`<bpmn:startEvent id="S" /><bpmn:eventBasedGateway id="G" />
		  <bpmn:intermediateCatchEvent id="A"><bpmn:signalEventDefinition signalRef="G1" /></bpmn:intermediateCatchEvent>
		  <bpmn:intermediateCatchEvent id="B"><bpmn:signalEventDefinition signalRef="G1" /></bpmn:intermediateCatchEvent>
		  <bpmn:sequenceFlow id="f0" sourceRef="S" targetRef="G" />
		  <bpmn:sequenceFlow id="f1" sourceRef="G" targetRef="A" /><bpmn:sequenceFlow id="f2" sourceRef="G" targetRef="B" />`, fault.BPMNInvalid, `waits for signal "go" twice`},
	} {
		_, err := Parse(strings.NewReader(doc(bad.body, sigDefs)))
		if !fault.HasCode(err, bad.code) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("err = %v, want %s %q", err, bad.code, bad.want)
		}
	}
}

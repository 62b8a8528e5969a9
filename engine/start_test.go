package engine

import (
	"reflect"
	"testing"

	"github.com/sutra-run/worker/fault"
)

// messageStarts has a none start event and a message start event whose
// output mapping takes the order id from the payload; both lead to a
// receive task keyed by the order id.
const messageStarts = `<bpmn:startEvent id="S" />
<bpmn:startEvent id="Ordered"><bpmn:extensionElements><zeebe:ioMapping><zeebe:output source="=order.id" target="orderId" /></zeebe:ioMapping></bpmn:extensionElements>
  <bpmn:messageEventDefinition messageRef="MOrder" /></bpmn:startEvent>
<bpmn:receiveTask id="Wait" messageRef="MPaid" />` + `<bpmn:sequenceFlow id="F1" sourceRef="S" targetRef="Wait" /><bpmn:sequenceFlow id="F2" sourceRef="Ordered" targetRef="Wait" />`

const messageStartDefs = `<bpmn:message id="MOrder" name="order-placed" />
<bpmn:message id="MPaid" name="paid"><bpmn:extensionElements><zeebe:subscription correlationKey="=orderId" /></bpmn:extensionElements></bpmn:message>`

func TestMessageStartAppliesThePayloadThroughItsOutputs(t *testing.T) {
	x := newInstance(t, parse(t, messageStarts, messageStartDefs))
	eff := x.step(Trigger{Kind: TriggerStart, Element: "Ordered", Message: "order-placed",
		Variables: map[string]any{"order": map[string]any{"id": "o-7"}, "noise": 1.0}})
	want := []Subscription{{TokenID: "t1", Element: "Wait", Message: "paid", CorrelationKey: "o-7"}}
	if !reflect.DeepEqual(eff.Subscriptions, want) {
		t.Fatalf("subscriptions = %+v", eff.Subscriptions)
	}
	if !reflect.DeepEqual(x.in.State.Variables, map[string]any{"orderId": "o-7"}) {
		t.Errorf("variables = %v: only the output mapping is written", x.in.State.Variables)
	}
	if tok := x.token("Wait"); tok.Flow != "F2" {
		t.Errorf("token = %+v", tok)
	}
}

func TestNoneStartStillWorksBesideMessageStarts(t *testing.T) {
	x := newInstance(t, parse(t, messageStarts, messageStartDefs))
	x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"orderId": "o-1"}})
	if tok := x.token("Wait"); tok.Flow != "F1" {
		t.Errorf("token = %+v", tok)
	}
}

func TestStartAtAnElementThatIsNoStartEventIsRefused(t *testing.T) {
	def := parse(t, messageStarts, messageStartDefs)
	onlyMessages := parse(t, `<bpmn:startEvent id="Ordered"><bpmn:messageEventDefinition messageRef="MOrder" /></bpmn:startEvent>`, messageStartDefs)
	for _, tt := range []struct {
		name string
		x    *instance
		tr   Trigger
	}{
		{"unknown element", newInstance(t, def), Trigger{Kind: TriggerStart, Element: "Nope"}},
		{"not a start event", newInstance(t, def), Trigger{Kind: TriggerStart, Element: "Wait"}},
		{"the none start by name", newInstance(t, def), Trigger{Kind: TriggerStart, Element: "S"}},
		{"no none start event", newInstance(t, onlyMessages), Trigger{Kind: TriggerStart}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.x.fail(tt.tr); !fault.HasCode(err, fault.NoStartEvent) {
				t.Errorf("err = %v, want %s", err, fault.NoStartEvent)
			}
		})
	}
}

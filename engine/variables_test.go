package engine

import (
	"reflect"
	"testing"

	"github.com/sutra-run/worker/fault"
)

func catchWithOutputs(outputs string) string {
	return `<bpmn:startEvent id="S" /><bpmn:intermediateCatchEvent id="C"><bpmn:extensionElements><zeebe:ioMapping>` + outputs +
		`</zeebe:ioMapping></bpmn:extensionElements><bpmn:messageEventDefinition messageRef="M1" /></bpmn:intermediateCatchEvent>` +
		receive("Next", "M2") + flow("F1", "S", "C") + flow("F2", "C", "Next")
}

func TestMessageOutputMappingsWriteOnlyTheirTargets(t *testing.T) {
	tests := []struct {
		name, outputs string
		payload       map[string]any
		want          map[string]any
	}{
		{"no mappings merge the payload as it is", "",
			map[string]any{"amount": 5.0, "order": "replaced"},
			map[string]any{"amount": 5.0, "order": "replaced"}},
		{"a mapping into a nested object copies it",
			`<zeebe:output source="=amount * 2" target="order.paid" />`,
			map[string]any{"amount": 5.0},
			map[string]any{"order": map[string]any{"id": "o-1", "paid": 10.0}}},
		{"mappings see the instance variables under the payload",
			`<zeebe:output source="=order.id + &quot;/&quot; + ref" target="receipt" />`,
			map[string]any{"ref": "r9"},
			map[string]any{"order": map[string]any{"id": "o-1"}, "receipt": "o-1/r9"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := newInstance(t, parse(t, catchWithOutputs(tt.outputs), msgDefs))
			x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"order": map[string]any{"id": "o-1"}}})
			x.step(Trigger{Kind: TriggerMessage, Message: "m1", Variables: tt.payload})
			if !reflect.DeepEqual(x.in.State.Variables, tt.want) {
				t.Errorf("variables = %v\nwant %v", x.in.State.Variables, tt.want)
			}
		})
	}
}

func TestFailingOutputMappingRaisesIncidentAndKeepsThePayload(t *testing.T) {
	x := newInstance(t, parse(t, catchWithOutputs(`<zeebe:output source="=amount &lt; &quot;x&quot;" target="bad" />`), msgDefs))
	x.step(Trigger{Kind: TriggerStart})
	eff := x.step(Trigger{Kind: TriggerMessage, Message: "m1", Variables: map[string]any{"amount": 5.0}})
	if len(eff.Incidents) != 1 || eff.Incidents[0].Code != fault.IncidentExpression || eff.Incidents[0].Element != "C" {
		t.Fatalf("effects = %+v", eff)
	}
	if !reflect.DeepEqual(eff.CloseWaits, []WaitRef{{TokenID: "t1"}}) || len(eff.Subscriptions) != 0 {
		t.Errorf("the message was consumed: its subscription must close, got %+v", eff)
	}
	if x.in.State.Variables["amount"] != 5.0 {
		t.Errorf("payload lost: %v", x.in.State.Variables)
	}
}

func TestStartWithoutVariablesHasAnEmptyObject(t *testing.T) {
	x := newInstance(t, parse(t, `<bpmn:startEvent id="S" />`+receive("R", "M1")+flow("F", "S", "R"), msgDefs))
	x.step(Trigger{Kind: TriggerStart})
	if x.in.State.Variables == nil {
		t.Error("variables are nil; the store writes them as a JSON object")
	}
}

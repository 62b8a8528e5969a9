package engine

import (
	"reflect"
	"testing"
)

const publishDefs = `
<bpmn:message id="MOut" name="order-confirmed"><bpmn:extensionElements><zeebe:subscription correlationKey="=orderId" /></bpmn:extensionElements></bpmn:message>
<bpmn:message id="MIn" name="m-in" />`

func TestMessageThrowEndAndSendTaskPublishThroughOutbox(t *testing.T) {
	tests := []struct {
		name, body string
		wantVars   map[string]any
	}{
		{"intermediate throw without mappings sends every variable",
			`<bpmn:intermediateThrowEvent id="Send"><bpmn:messageEventDefinition messageRef="MOut" /></bpmn:intermediateThrowEvent>` +
				receive("Wait", "MIn") + flow("F2", "Send", "Wait"),
			map[string]any{"orderId": "o-7", "total": 12.5}},
		{"message end event with input mappings sends exactly the mapped values",
			`<bpmn:endEvent id="Send"><bpmn:extensionElements><zeebe:ioMapping><zeebe:input source="=total * 2" target="doubled" /></zeebe:ioMapping></bpmn:extensionElements>
			<bpmn:messageEventDefinition messageRef="MOut" /></bpmn:endEvent>`,
			map[string]any{"doubled": 25.0}},
		{"send task with a messageRef",
			`<bpmn:sendTask id="Send" messageRef="MOut" />`,
			map[string]any{"orderId": "o-7", "total": 12.5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := newInstance(t, parse(t, `<bpmn:startEvent id="S" />`+tt.body+flow("F1", "S", "Send"), publishDefs))
			x.in.Version = 6
			eff := x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"orderId": "o-7", "total": 12.5}})
			want := []OutboxMessage{{ID: "i-1/7/Send/t1", Element: "Send", Message: "order-confirmed", CorrelationKey: "o-7", Variables: tt.wantVars}}
			if !reflect.DeepEqual(eff.Publish, want) {
				t.Errorf("publish = %+v\nwant %+v", eff.Publish, want)
			}
		})
	}
}

func TestOutboxIDsDifferPerToken(t *testing.T) {
	def := parse(t, `<bpmn:startEvent id="S" /><bpmn:parallelGateway id="Fork" />
		<bpmn:intermediateThrowEvent id="Send"><bpmn:messageEventDefinition messageRef="MOut" /></bpmn:intermediateThrowEvent>`+
		receive("Wait", "MIn")+flow("F1", "S", "Fork")+flow("F2", "Fork", "Send")+flow("F3", "Fork", "Send")+flow("F4", "Send", "Wait"), publishDefs)
	x := newInstance(t, def)
	eff := x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"orderId": "o-1"}})
	if len(eff.Publish) != 2 || eff.Publish[0].ID == eff.Publish[1].ID {
		t.Errorf("publish = %+v", eff.Publish)
	}
}

package engine

import (
	"reflect"
	"strings"
	"testing"

	"github.com/sutra-run/worker/fault"
)

// nameDefs has a message whose name is an expression over the variables.
const nameDefs = msgDefs + `<bpmn:message id="MReply" name="=&quot;reply-&quot; + channel"><bpmn:extensionElements><zeebe:subscription correlationKey="=id" /></bpmn:extensionElements></bpmn:message>`

// namedWaits forks to a catch event on the reply message and a receive task
// whose payload changes the variable the name reads.
var namedWaits = `<bpmn:startEvent id="S" /><bpmn:parallelGateway id="Fork" />` + catchMsg("Reply", "MReply") + receive("Change", "M1") +
	flow("F1", "S", "Fork") + flow("F2", "Fork", "Reply") + flow("F3", "Fork", "Change")

func TestMessageNameIsEvaluatedWhenTheSubscriptionOpensAndKept(t *testing.T) {
	x := newInstance(t, parse(t, namedWaits, nameDefs))
	eff := x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"channel": "sms", "id": "c-1"}})
	want := Subscription{TokenID: "t1", Element: "Reply", Message: "reply-sms", CorrelationKey: "c-1"}
	if len(eff.Subscriptions) != 2 || !reflect.DeepEqual(eff.Subscriptions[0], want) {
		t.Fatalf("subscriptions = %+v", eff.Subscriptions)
	}
	if a := x.token("Reply").Armed; !reflect.DeepEqual(a, []Armed{{Element: "Reply", Key: "c-1", Message: "reply-sms"}}) {
		t.Errorf("armed = %+v: the evaluated name is kept with the wait", a)
	}
	if a := x.token("Change").Armed; a[0].Message != "" {
		t.Errorf("armed = %+v: a static name is not copied", a)
	}
	// A later change of the variable does not move the open subscription.
	x.step(Trigger{Kind: TriggerMessage, Message: "m1", Variables: map[string]any{"channel": "email"}})
	if err := x.fail(Trigger{Kind: TriggerMessage, Message: "reply-email", CorrelationKey: "c-1"}); !fault.HasCode(err, fault.NotWaiting) {
		t.Errorf("reply-email: %v, want %s", err, fault.NotWaiting)
	}
	for _, name := range []string{"=\"reply-\" + channel", "reply-"} {
		if err := x.fail(Trigger{Kind: TriggerMessage, Message: name}); !fault.HasCode(err, fault.NotWaiting) {
			t.Errorf("%s: %v, want %s", name, err, fault.NotWaiting)
		}
	}
	x.step(Trigger{Kind: TriggerMessage, Message: "reply-sms", CorrelationKey: "c-1"})
	if x.in.State.Status != StatusCompleted {
		t.Errorf("status = %s, tokens %v", x.in.State.Status, x.at())
	}
}

func TestMessageNameExpressionOnEveryKindOfWait(t *testing.T) {
	tests := []struct {
		name, body string
		element    string
	}{
		{"receive task", receive("W", "MReply"), "W"},
		{"boundary event", receive("W", "M1") + `<bpmn:boundaryEvent id="B" attachedToRef="W"><bpmn:messageEventDefinition messageRef="MReply" /></bpmn:boundaryEvent>`, "B"},
		{"event subprocess start", receive("W", "M1") + `<bpmn:subProcess id="ESP" triggeredByEvent="true"><bpmn:startEvent id="ES" isInterrupting="false">` +
			`<bpmn:messageEventDefinition messageRef="MReply" /></bpmn:startEvent></bpmn:subProcess>`, "ES"},
		{"event-based gateway", `<bpmn:eventBasedGateway id="W" />` + catchMsg("C1", "MReply") + catchMsg("C2", "M1") +
			flow("G1", "W", "C1") + flow("G2", "W", "C2"), "C1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := newInstance(t, parse(t, `<bpmn:startEvent id="S" />`+tt.body+flow("F", "S", "W"), nameDefs))
			eff := x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"channel": "chat", "id": "c-9"}})
			var got []string
			for _, sub := range eff.Subscriptions {
				if sub.Element == tt.element {
					got = append(got, sub.Message)
				}
			}
			if !reflect.DeepEqual(got, []string{"reply-chat"}) {
				t.Fatalf("subscriptions = %+v", eff.Subscriptions)
			}
			x.step(Trigger{Kind: TriggerMessage, Message: "reply-chat", CorrelationKey: "c-9"})
		})
	}
}

func TestMessageNameThatIsNoStringIsAnIncident(t *testing.T) {
	x := newInstance(t, parse(t, namedWaits, nameDefs))
	eff := x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"id": "c-1"}})
	if len(eff.Incidents) != 1 || eff.Incidents[0].Element != "Reply" || eff.Incidents[0].Code != fault.IncidentExpression ||
		!strings.Contains(eff.Incidents[0].Message, `message name of Reply: feel: evaluating "=\"reply-\" + channel"`) {
		t.Fatalf("incidents = %+v", eff.Incidents)
	}
	y := newInstance(t, parse(t, namedWaits, msgDefs+`<bpmn:message id="MReply" name="=channel" />`))
	eff = y.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"channel": 5.0}})
	if len(eff.Incidents) != 1 || !strings.Contains(eff.Incidents[0].Message, `message name of Reply: "=channel" evaluated to a number, not a non-empty string`) {
		t.Fatalf("incidents = %+v", eff.Incidents)
	}
}

func TestPublishedMessageNameIsEvaluatedWhenSent(t *testing.T) {
	x := newInstance(t, parse(t, `<bpmn:startEvent id="S" /><bpmn:intermediateThrowEvent id="Send"><bpmn:messageEventDefinition messageRef="MReply" /></bpmn:intermediateThrowEvent>`+
		flow("F", "S", "Send"), nameDefs))
	eff := x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"channel": "sms", "id": "c-1"}})
	if len(eff.Publish) != 1 || eff.Publish[0].Message != "reply-sms" || eff.Publish[0].CorrelationKey != "c-1" {
		t.Fatalf("publish = %+v", eff.Publish)
	}
	y := newInstance(t, x.def)
	eff = y.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"id": "c-1"}})
	if len(eff.Publish) != 0 || len(eff.Incidents) != 1 || eff.Incidents[0].Element != "Send" {
		t.Fatalf("effects = %+v", eff)
	}
}

func TestMigrateKeepsASubscriptionWhoseNameExpressionIsUnchanged(t *testing.T) {
	x := newInstance(t, parse(t, namedWaits, nameDefs))
	x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"channel": "sms", "id": "c-1"}})
	x.in.State.Variables["channel"] = "email" // the name is not evaluated again
	same := parse(t, namedWaits, nameDefs)
	st, eff, err := Migrate(x.def, same, x.in, nil, x.now)
	if err != nil || !reflect.DeepEqual(eff, Effects{}) || !reflect.DeepEqual(st.Tokens[0].Armed, x.in.State.Tokens[0].Armed) {
		t.Fatalf("same name expression: %+v, %+v, %v", st.Tokens, eff, err)
	}
	other := parse(t, namedWaits, msgDefs+`<bpmn:message id="MReply" name="=&quot;answer-&quot; + channel" />`)
	_, eff, err = Migrate(x.def, other, x.in, nil, x.now)
	want := Effects{CloseWaits: []WaitRef{{TokenID: "t1", Element: "Reply"}}, Subscriptions: []Subscription{{TokenID: "t1", Element: "Reply", Message: "answer-email"}}}
	if err != nil || !reflect.DeepEqual(eff, want) {
		t.Fatalf("changed name expression: %+v, %v\nwant %+v", eff, err, want)
	}
}

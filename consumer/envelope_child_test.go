package consumer

import (
	"reflect"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/lanes"
)

func TestAChildsRelayDecodesItsEscalationsWithItsEndOrAlone(t *testing.T) {
	for _, tt := range []struct {
		body string
		want engine.Trigger
	}{
		{`{"instance_id":"p-1","child":{"instance":"p-1/t1","token":"t1","el":"Call"},"variables":{"a":1}}`,
			engine.Trigger{Kind: engine.TriggerChildCompleted, TokenID: "t1", Element: "Call", Variables: map[string]any{"a": 1.0}}},
		{`{"instance_id":"p-1","child":{"instance":"p-1/t1","token":"t1","el":"Call","escalations":["STOP"],"escalated":2}}`,
			engine.Trigger{Kind: engine.TriggerChildCompleted, TokenID: "t1", Element: "Call", Escalations: []string{"STOP"}, Escalated: 2}},
		{`{"instance_id":"p-1","child":{"instance":"p-1/t1","token":"t1","el":"Call","escalations":["LATE","LATE"],"running":true}}`,
			engine.Trigger{Kind: engine.TriggerChildEscalated, TokenID: "t1", Element: "Call", Escalations: []string{"LATE", "LATE"}}},
	} {
		r, err := decode(&amqp.Delivery{MessageId: "m-1", Body: []byte(tt.body)}, time.Now())
		want := lanes.ChildEnded{InstanceID: "p-1", MessageID: "m-1", Trigger: tt.want}
		if err != nil || !reflect.DeepEqual(r.Cause, want) {
			t.Errorf("%s: %#v, %v; want %#v", tt.body, r.Cause, err, want)
		}
	}
	for _, body := range []string{
		`{"instance_id":"p-1","child":{"instance":"p-1/t1","token":"t1","el":"Call","running":true}}`,
		`{"instance_id":"p-1","child":{"instance":"p-1/t1","token":"t1","el":"Call","escalated":-1}}`,
		`{"instance_id":"p-1","child":{"instance":"p-1/t1","token":"t1","el":"Call","escalations":["LATE"],"running":true,"escalated":1}}`,
		`{"instance_id":"p-1","child":{"instance":"p-1/t1","token":"t1","el":"Call","escalations":["LATE"],"running":true},"variables":{}}`,
		`{"instance_id":"p-1","child":{"instance":"p-1/t1","token":"t1","el":"Call","escalations":["LATE"],"running":true,"error_code":"E"}}`,
		`{"instance_id":"p-1","child":{"instance":"p-1/t1","token":"t1","el":"Call","escalations":["LATE"],"running":true,"failed":"no"}}`,
	} {
		if _, err := decode(&amqp.Delivery{MessageId: "m-1", Body: []byte(body)}, time.Now()); !fault.HasCode(err, fault.RelayInvalid) {
			t.Errorf("%s: err = %v, want %s", body, err, fault.RelayInvalid)
		}
	}
}

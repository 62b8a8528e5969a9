package consumer

import (
	"reflect"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/lanes"
)

func TestSignalRelaysDecodeToTheirKindsAndMixedFormsAreInvalid(t *testing.T) {
	vars := map[string]any{"level": 2.0}
	for _, tt := range []struct {
		body string
		want lanes.Cause
	}{
		{`{"signal":{"name":"alarm","broadcast":true},"variables":{"level":2}}`,
			lanes.SignalBroadcast{MessageID: "m-1", Name: "alarm", Variables: vars}},
		{`{"instance_id":"i-1","signal":{"name":"alarm","token":"t1","el":"C"},"variables":{"level":2}}`,
			lanes.Signal{InstanceID: "i-1", MessageID: "m-1", Name: "alarm", TokenID: "t1", Element: "C", Variables: vars}},
		{`{"instance_id":"i-1","signal":{"name":"alarm","el":"ES"}}`, // a process-level event subprocess start
			lanes.Signal{InstanceID: "i-1", MessageID: "m-1", Name: "alarm", Element: "ES"}},
		{`{"signal":{"name":"alarm","start":"p","el":"S"},"variables":{"level":2}}`,
			lanes.Signal{InstanceID: lanes.InstanceIDFor("m-1"), MessageID: "m-1", Name: "alarm", Definition: "p", Element: "S", Variables: vars}},
	} {
		r, err := decode(&amqp.Delivery{MessageId: "m-1", Body: []byte(tt.body)}, time.Now())
		if err != nil || !reflect.DeepEqual(r.Cause, tt.want) {
			t.Errorf("%s: %#v, %v; want %#v", tt.body, r.Cause, err, tt.want)
		}
	}
	for _, body := range []string{
		`{"signal":{"broadcast":true}}`, // no name
		`{"instance_id":"i-1","signal":{"name":"alarm","broadcast":true}}`,
		`{"signal":{"name":"alarm","token":"t1","el":"C"}}`, // no instance
		`{"instance_id":"i-1","signal":{"name":"alarm","token":"t1"}}`,
		`{"instance_id":"i-1","signal":{"name":"alarm","start":"p","el":"S"}}`,
		`{"message":"m","signal":{"name":"alarm","broadcast":true}}`,
		`{"start":"p","signal":{"name":"alarm","start":"p","el":"S"}}`,
	} {
		if _, err := decode(&amqp.Delivery{MessageId: "m-1", Body: []byte(body)}, time.Now()); !fault.HasCode(err, fault.RelayInvalid) {
			t.Errorf("%s: err = %v, want %s", body, err, fault.RelayInvalid)
		}
	}
}

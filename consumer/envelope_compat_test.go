package consumer

import (
	"reflect"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/sutra-run/worker/fault"
)

// A relay the worker writes itself, from a newer release with fields this
// one does not know, decodes as it would without them: releases run side
// by side. A relay from outside with an unknown field is still refused.
func TestTheWorkersOwnRelaysFromANewerReleaseDecodeWithTheirUnknownFieldsIgnored(t *testing.T) {
	for _, tt := range []struct{ known, newer string }{
		{`{"instance_id":"p-1","task":{"token":"t1","element":"Pack","outcome":"completed"},"variables":{"a":1}}`,
			`{"instance_id":"p-1","task":{"token":"t1","element":"Pack","outcome":"completed","lease":"x"},"variables":{"a":1},"format":2}`},
		{`{"instance_id":"p-1","child":{"instance":"p-1/t1","token":"t1","el":"Call"}}`,
			`{"instance_id":"p-1","child":{"instance":"p-1/t1","token":"t1","el":"Call","depth":3}}`},
	} {
		want, err := decode(&amqp.Delivery{MessageId: "m-1", Body: []byte(tt.known)}, time.Now())
		if err != nil {
			t.Fatalf("%s: %v", tt.known, err)
		}
		got, err := decode(&amqp.Delivery{MessageId: "m-1", Body: []byte(tt.newer)}, time.Now())
		if err != nil || !reflect.DeepEqual(got.Cause, want.Cause) {
			t.Errorf("%s: %#v, %v; want %#v", tt.newer, got.Cause, err, want.Cause)
		}
	}
	for _, body := range []string{
		`{"start":"order","instance_id":"o-1","varibles":{}}`,
		`{"message":"paid","correlation_key":"o-1","tll":"PT1M"}`,
	} {
		if _, err := decode(&amqp.Delivery{MessageId: "m-1", Body: []byte(body)}, time.Now()); !fault.HasCode(err, fault.RelayInvalid) {
			t.Errorf("%s: err = %v, want %s", body, err, fault.RelayInvalid)
		}
	}
}

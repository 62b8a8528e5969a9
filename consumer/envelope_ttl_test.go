package consumer

import (
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/lanes"
)

func TestRelayTTLBuffersOnlyCorrelateByKeyRelays(t *testing.T) {
	now := time.Date(2026, 1, 31, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		body string
		ttl  time.Duration
		code string
	}{
		{`{"message":"m","correlation_key":"k","ttl":"PT10M"}`, 10 * time.Minute, ""},
		{`{"message":"m","correlation_key":"k","ttl":"P1M"}`, 28 * 24 * time.Hour, ""}, // calendar month from now
		{`{"message":"m","correlation_key":"k"}`, 0, ""},
		{`{"message":"m","instance_id":"i","ttl":"PT1M"}`, 0, fault.RelayInvalid},
		{`{"start":"p","ttl":"PT1M"}`, 0, fault.RelayInvalid},
		{`{"message":"m","correlation_key":"k","ttl":"10 minutes"}`, 0, fault.RelayInvalid},
		{`{"message":"m","correlation_key":"k","ttl":"PT0S"}`, 0, fault.RelayInvalid},
	}
	for _, tt := range tests {
		d := &amqp.Delivery{MessageId: "id", Body: []byte(tt.body), RoutingKey: "rk"}
		r, err := decode(d, now)
		if code := fault.Code(err); code != tt.code {
			t.Errorf("%s: code %q, want %q (%v)", tt.body, code, tt.code, err)
			continue
		}
		c, ok := r.Cause.(lanes.Correlate)
		if err != nil || !ok {
			continue
		}
		if c.TTL != tt.ttl {
			t.Errorf("%s: ttl %s, want %s", tt.body, c.TTL, tt.ttl)
		}
		if tt.ttl > 0 && (string(c.Body) != tt.body || c.RoutingKey != "rk") {
			t.Errorf("%s: the buffered relay must keep its body and routing key", tt.body)
		}
	}
}

package consumer

import (
	"fmt"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/lanes"
)

// An id longer than lanes.MaxIDBytes is refused as invalid (the relay is
// dead-lettered), and the reason names its length, not the id: a megabyte
// id is not echoed into every log line and header that carries the reason.
func TestARelayWithAnIDLongerThanTheCapIsInvalidAndItsReasonDoesNotEchoTheID(t *testing.T) {
	long := strings.Repeat("x", lanes.MaxIDBytes+1)
	fits := strings.Repeat("y", lanes.MaxIDBytes)
	for _, tt := range []struct {
		body string
		code string
	}{
		{fmt.Sprintf(`{"message":"m","instance_id":%q}`, long), fault.RelayInvalid},
		{fmt.Sprintf(`{"message":"m","correlation_key":%q}`, long), fault.RelayInvalid},
		{fmt.Sprintf(`{"start":"p","instance_id":%q}`, long), fault.RelayInvalid},
		{fmt.Sprintf(`{"message":"m","instance_id":%q}`, fits), ""},
		{fmt.Sprintf(`{"message":"m","correlation_key":%q}`, fits), ""},
	} {
		_, err := decode(&amqp.Delivery{MessageId: "id", Body: []byte(tt.body)}, time.Now())
		if code := fault.Code(err); code != tt.code {
			t.Errorf("%.60s…: code %q, want %q (%v)", tt.body, code, tt.code, err)
		}
		if err != nil && (strings.Contains(err.Error(), long[:32]) || !strings.Contains(err.Error(), "256 bytes")) {
			t.Errorf("the reason echoes the id or does not say its length: %.200s", err)
		}
	}
}

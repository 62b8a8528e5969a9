package sweeper

import (
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/sutra-run/worker/broker"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/store"
)

// deadLetters are the dead letters of expired buffered messages, made the
// way the consumer dead-letters a relay: the original body and message id,
// with x-sutra-code and x-sutra-reason, to the dead-letter exchange.
func (s *Sweeper) deadLetters(msgs []store.BufferedMessage) []broker.Message {
	out := make([]broker.Message, len(msgs))
	for i, m := range msgs {
		reason := fmt.Sprintf("no subscription to message %q with correlation key %q opened within the relay's ttl (expired %s)",
			m.Message, m.CorrelationKey, m.ExpiresAt.UTC().Format(time.RFC3339))
		out[i] = broker.Message{Exchange: s.cfg.DeadExchange, RoutingKey: m.RoutingKey, Publishing: amqp.Publishing{
			Headers: amqp.Table{
				"x-sutra-code": fault.RelayUncorrelated, "x-sutra-reason": reason,
				"x-sutra-exchange": s.cfg.RelayExchange, "x-sutra-routing-key": m.RoutingKey,
			},
			ContentType: "application/json", DeliveryMode: amqp.Persistent, MessageId: m.MessageID, Body: m.Body,
		}}
	}
	return out
}

package sweeper

import (
	"context"
	"errors"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/store"
)

// AMQPDeadLetters dead-letters expired buffered messages the way the
// consumer dead-letters a relay: the original body and message id, with
// x-sutra-code and x-sutra-reason, confirmed by the broker. Expiries are
// rare, so it dials a connection per batch instead of keeping one.
type AMQPDeadLetters struct {
	URL            string
	Exchange       string // the dead-letter exchange
	RelayExchange  string // reported in x-sutra-exchange
	ConnectionName string
}

// DeadLetter publishes msgs and waits for every confirm.
func (a AMQPDeadLetters) DeadLetter(ctx context.Context, msgs []store.BufferedMessage) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := amqp.DialConfig(a.URL, amqp.Config{Properties: amqp.Table{"connection_name": a.ConnectionName}})
	if err != nil {
		return fault.Wrap(fault.Unavailable, err, "dialing broker to dead-letter expired messages")
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return fault.Wrap(fault.Unavailable, err, "opening channel")
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		return fault.Wrap(fault.Unavailable, err, "enabling publisher confirms")
	}
	confirms := make([]*amqp.DeferredConfirmation, 0, len(msgs))
	for _, m := range msgs {
		reason := fmt.Sprintf("no subscription to message %q with correlation key %q opened within the relay's ttl (expired %s)",
			m.Message, m.CorrelationKey, m.ExpiresAt.UTC().Format(time.RFC3339))
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, a.Exchange, m.RoutingKey, false, false, amqp.Publishing{
			Headers: amqp.Table{
				"x-sutra-code": fault.RelayUncorrelated, "x-sutra-reason": reason,
				"x-sutra-exchange": a.RelayExchange, "x-sutra-routing-key": m.RoutingKey,
			},
			ContentType: "application/json", DeliveryMode: amqp.Persistent, MessageId: m.MessageID, Body: m.Body,
		})
		if err != nil {
			return fault.Wrap(fault.Unavailable, err, "publishing dead letter %s", m.MessageID)
		}
		confirms = append(confirms, dc)
	}
	for _, dc := range confirms {
		ok, err := dc.WaitContext(ctx)
		if err == nil && !ok {
			err = errors.New("broker nacked the dead letter")
		}
		if err != nil {
			return fault.Wrap(fault.Unavailable, err, "confirming dead letters")
		}
	}
	return nil
}

package broker

import (
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Topology is every exchange, queue and binding the worker relies on. Empty
// names are left out. Declaring is idempotent; an existing entity declared
// with other arguments fails the connection (PRECONDITION_FAILED), which is
// retried with backoff and logged.
type Topology struct {
	// RelayExchange (durable topic) is bound to RelayQueue with RelayBindingKey.
	RelayExchange   string
	RelayQueue      string
	RelayBindingKey string
	// DeadExchange (durable topic) is bound to DeadQueue with "#".
	DeadExchange string
	DeadQueue    string
	// OutboxExchange (durable topic) receives the outbox's messages; the
	// worker binds nothing to it (operators do).
	OutboxExchange string
	// QueueType sets x-queue-type on the declared queues when not empty
	// (classic or quorum); empty leaves the broker's default.
	QueueType string
}

// DefaultRelayBindingKey binds the relay queue when RelayBindingKey is
// empty: every routing key.
const DefaultRelayBindingKey = "#"

// Declare declares the topology on ch.
func (t Topology) Declare(ch *amqp.Channel) error {
	var args amqp.Table
	if t.QueueType != "" {
		args = amqp.Table{"x-queue-type": t.QueueType}
	}
	exchange := func(name string) error {
		if name == "" {
			return nil
		}
		if err := ch.ExchangeDeclare(name, "topic", true, false, false, false, nil); err != nil {
			return fmt.Errorf("declaring exchange %s: %w", name, err)
		}
		return nil
	}
	queue := func(name, key, exchange string) error {
		if name == "" {
			return nil
		}
		if _, err := ch.QueueDeclare(name, true, false, false, false, args); err != nil {
			return fmt.Errorf("declaring queue %s: %w", name, err)
		}
		if err := ch.QueueBind(name, key, exchange, false, nil); err != nil {
			return fmt.Errorf("binding queue %s to %s: %w", name, exchange, err)
		}
		return nil
	}
	key := t.RelayBindingKey
	if key == "" {
		key = DefaultRelayBindingKey
	}
	for _, step := range []func() error{
		func() error { return exchange(t.RelayExchange) },
		func() error { return queue(t.RelayQueue, key, t.RelayExchange) },
		func() error { return exchange(t.DeadExchange) },
		func() error { return queue(t.DeadQueue, "#", t.DeadExchange) },
		func() error { return exchange(t.OutboxExchange) },
	} {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

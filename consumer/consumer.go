// Package consumer owns the AMQP connection and its channel: topology, QoS,
// decoding relays, dispatching them to lanes, and acting on each outcome
// (ack, delayed nack-requeue, or dead-letter then ack) on the channel that
// delivered it. It reconnects by itself.
package consumer

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/defaults"
	"github.com/sutra-run/worker/internal/startstop"
	"github.com/sutra-run/worker/internal/testsignal"
	"github.com/sutra-run/worker/lanes"
	"github.com/sutra-run/worker/metrics"
)

// Dispatcher is what the consumer needs from the lanes. Dispatch must not block.
type Dispatcher interface {
	Dispatch(lanes.Resume)
}

// Config configures the consumer. Names live in the connection's vhost.
type Config struct {
	URL          string
	Exchange     string // relay exchange (durable topic), default sutra.relays
	Queue        string // relay queue, default sutra.relays
	BindingKey   string // default "#"
	DeadExchange string // default sutra.relays.dead
	DeadQueue    string // default sutra.relays.dead
	// QueueType sets x-queue-type on the relay queue when not empty
	// (classic or quorum); empty leaves the broker's default.
	QueueType string
	Prefetch  int // unacked deliveries in flight, default 256
	// ConnectionName is shown by the broker (default sutra-worker).
	ConnectionName string
	// RequeueBackoff is the first delay before a refused relay is nacked back;
	// it doubles per bounce of the same message id up to RequeueBackoffMax.
	RequeueBackoff    time.Duration // default 50ms
	RequeueBackoffMax time.Duration // default 2s
	// MaxRetries caps the transient failures of one relay (default 50): the
	// next one dead-letters it with fault.RetriesExhausted. Refusals (a held
	// claim, a fenced commit) and outages are not failures and never capped.
	MaxRetries   int
	ReconnectMin time.Duration // default 100ms
	ReconnectMax time.Duration // default 5s
}

func (c *Config) setDefaults() {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&c.URL, "amqp://guest:guest@127.0.0.1:5672/")
	def(&c.Exchange, "sutra.relays")
	def(&c.Queue, "sutra.relays")
	def(&c.BindingKey, "#")
	def(&c.DeadExchange, "sutra.relays.dead")
	def(&c.DeadQueue, "sutra.relays.dead")
	def(&c.ConnectionName, "sutra-worker")
	defaults.Set(&c.RequeueBackoff, 50*time.Millisecond)
	defaults.Set(&c.RequeueBackoffMax, 2*time.Second)
	defaults.Set(&c.ReconnectMin, 100*time.Millisecond)
	defaults.Set(&c.ReconnectMax, 5*time.Second)
	defaults.Set(&c.Prefetch, 256)
	defaults.Set(&c.MaxRetries, 50)
}

// Deps are the consumer's collaborators.
type Deps struct {
	Lanes   Dispatcher
	Metrics *metrics.Metrics
	Logger  *slog.Logger
}

// TestSignals tell tests what the consumer did; inert unless Init'ed.
type TestSignals struct {
	// Requeued carries every relay nacked back for a later try.
	Requeued testsignal.Signal[Requeue]
	// DeadLettered carries every relay dead-lettered and acked.
	DeadLettered testsignal.Signal[DeadLetter]
	// Acked carries the message id of every relay acked as applied
	// (committed, duplicate or buffered).
	Acked testsignal.Signal[string]
	// Disconnected carries why each connection ended or failed to open.
	Disconnected testsignal.Signal[error]
}

// Requeue is one relay scheduled for requeue.
type Requeue struct {
	MessageID string
	Reason    string
	// Bounce is the relay's requeue count in this replica; Delay its backoff.
	Bounce int
	Delay  time.Duration
}

// DeadLetter is one relay dead-lettered.
type DeadLetter struct {
	MessageID, Code string
}

// Init switches every signal on.
func (s *TestSignals) Init() {
	s.Requeued.Init()
	s.DeadLettered.Init()
	s.Acked.Init()
	s.Disconnected.Init()
}

// Consumer consumes relays. Start it once; Stop it once or more.
type Consumer struct {
	startstop.Base
	TestSignals TestSignals

	cfg       Config
	deps      Deps
	connected atomic.Bool
	// bounces counts requeues per message id so repeated bounces back off;
	// failures counts the transient failures among them, for the retry cap.
	// Only the session goroutine touches them; both forget a relay once it
	// is answered for good.
	bounces  map[string]int
	failures map[string]int
}

// New builds a consumer.
func New(deps Deps, cfg Config) *Consumer {
	cfg.setDefaults()
	return &Consumer{cfg: cfg, deps: deps, bounces: map[string]int{}, failures: map[string]int{}}
}

// Connected reports whether a channel is consuming (for readiness).
func (c *Consumer) Connected() bool { return c.connected.Load() }

// Start connects in the background and consumes until Stop, reconnecting
// with backoff whenever the connection or channel closes. Stop
// (startstop.Base) stops consuming at once and lets in-flight relays be
// answered (acked, requeued or dead-lettered) until its deadline, then
// closes the connection: anything still unanswered is redelivered by the
// broker.
func (c *Consumer) Start(ctx context.Context) error {
	return c.Run(ctx, "consumer", c.run)
}

func (c *Consumer) run(soft, hard context.Context) {
	delay := c.cfg.ReconnectMin
	for soft.Err() == nil {
		err := c.connectAndConsume(soft, hard)
		c.connected.Store(false)
		if soft.Err() != nil {
			return
		}
		c.TestSignals.Disconnected.Signal(err)
		c.deps.Logger.Warn("broker connection lost; reconnecting", "code", fault.Unavailable, "err", err, "backoff", delay)
		select {
		case <-soft.Done():
			return
		case <-time.After(delay):
		}
		delay = min(delay*2, c.cfg.ReconnectMax)
		if err == nil {
			delay = c.cfg.ReconnectMin
		}
	}
}

// connectAndConsume runs one connection's life. It returns when the
// connection or channel closes, or after a stop has drained.
func (c *Consumer) connectAndConsume(soft, hard context.Context) error {
	conn, err := amqp.DialConfig(c.cfg.URL, amqp.Config{
		Heartbeat:  10 * time.Second,
		Properties: amqp.Table{"connection_name": c.cfg.ConnectionName},
	})
	if err != nil {
		return fmt.Errorf("dialing broker: %w", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("opening channel: %w", err)
	}
	defer ch.Close()
	if err := c.declare(ch); err != nil {
		return err
	}
	if err := ch.Qos(c.cfg.Prefetch, 0, false); err != nil {
		return fmt.Errorf("setting QoS: %w", err)
	}
	if err := ch.Confirm(false); err != nil {
		return fmt.Errorf("enabling publisher confirms: %w", err)
	}
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	connClosed := conn.NotifyClose(make(chan *amqp.Error, 1))
	const tag = "sutra-worker"
	deliveries, err := ch.Consume(c.cfg.Queue, tag, false, false, false, false, nil)
	if err != nil {
		return fmt.Errorf("consuming %s: %w", c.cfg.Queue, err)
	}
	c.connected.Store(true)
	s := &session{c: c, ch: ch, tag: tag, hard: hard, results: make(chan result, c.cfg.Prefetch+1)}
	return s.loop(soft, hard, deliveries, closed, connClosed)
}

// declare declares the relay and dead-letter topology (idempotent).
func (c *Consumer) declare(ch *amqp.Channel) error {
	var args amqp.Table
	if c.cfg.QueueType != "" {
		args = amqp.Table{"x-queue-type": c.cfg.QueueType}
	}
	steps := []struct {
		what string
		do   func() error
	}{
		{"exchange " + c.cfg.Exchange, func() error {
			return ch.ExchangeDeclare(c.cfg.Exchange, "topic", true, false, false, false, nil)
		}},
		{"queue " + c.cfg.Queue, func() error {
			_, err := ch.QueueDeclare(c.cfg.Queue, true, false, false, false, args)
			return err
		}},
		{"binding " + c.cfg.Queue, func() error {
			return ch.QueueBind(c.cfg.Queue, c.cfg.BindingKey, c.cfg.Exchange, false, nil)
		}},
		{"exchange " + c.cfg.DeadExchange, func() error {
			return ch.ExchangeDeclare(c.cfg.DeadExchange, "topic", true, false, false, false, nil)
		}},
		{"queue " + c.cfg.DeadQueue, func() error {
			_, err := ch.QueueDeclare(c.cfg.DeadQueue, true, false, false, false, args)
			return err
		}},
		{"binding " + c.cfg.DeadQueue, func() error {
			return ch.QueueBind(c.cfg.DeadQueue, "#", c.cfg.DeadExchange, false, nil)
		}},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			return fmt.Errorf("declaring %s: %w", s.what, err)
		}
	}
	return nil
}

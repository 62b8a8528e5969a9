// Package consumer owns the AMQP connection and its channel: topology, QoS,
// decoding relays, dispatching them to lanes, and acting on each outcome
// (ack, delayed nack-requeue, or dead-letter then ack) on the channel that
// delivered it. It reconnects by itself.
package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/defaults"
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
	ReconnectMin      time.Duration // default 100ms
	ReconnectMax      time.Duration // default 5s
	// DrainTimeout bounds how long Stop waits for in-flight steps to answer.
	DrainTimeout time.Duration // default 10s
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
	defaults.Set(&c.DrainTimeout, 10*time.Second)
	defaults.Set(&c.Prefetch, 256)
}

// Deps are the consumer's collaborators.
type Deps struct {
	Lanes   Dispatcher
	Metrics *metrics.Metrics
	Logger  *slog.Logger
}

// Consumer consumes relays. Start it once; Stop it once or more.
type Consumer struct {
	cfg       Config
	deps      Deps
	connected atomic.Bool
	started   atomic.Bool
	stopOnce  sync.Once
	soft      context.CancelFunc // stop consuming, drain, close
	hard      context.CancelFunc // close now
	done      chan struct{}
	// bounces counts requeues per message id so repeated bounces back off.
	// Only the session goroutine touches it.
	bounces map[string]int
}

// New builds a consumer.
func New(deps Deps, cfg Config) *Consumer {
	cfg.setDefaults()
	return &Consumer{cfg: cfg, deps: deps, done: make(chan struct{}), bounces: map[string]int{}}
}

// Connected reports whether a channel is consuming (for readiness).
func (c *Consumer) Connected() bool { return c.connected.Load() }

// Start connects in the background and consumes until Stop, reconnecting
// with backoff whenever the connection or channel closes.
func (c *Consumer) Start(ctx context.Context) error {
	if !c.started.CompareAndSwap(false, true) {
		return errors.New("consumer: already started")
	}
	hardCtx, hard := context.WithCancel(context.WithoutCancel(ctx))
	softCtx, soft := context.WithCancel(hardCtx)
	c.soft, c.hard = soft, hard
	go func() {
		defer close(c.done)
		c.run(softCtx, hardCtx)
	}()
	return nil
}

// Stop stops consuming, waits up to DrainTimeout for in-flight relays to be
// answered (acked, requeued or dead-lettered), then closes the connection:
// anything still unanswered is redelivered by the broker. Safe before Start
// and twice.
func (c *Consumer) Stop() {
	if !c.started.Load() {
		return
	}
	c.stopOnce.Do(func() {
		c.soft()
		select {
		case <-c.done:
		case <-time.After(c.cfg.DrainTimeout):
			c.hard()
			<-c.done
		}
		c.hard()
	})
}

func (c *Consumer) run(soft, hard context.Context) {
	delay := c.cfg.ReconnectMin
	for soft.Err() == nil {
		err := c.connectAndConsume(soft, hard)
		c.connected.Store(false)
		if soft.Err() != nil {
			return
		}
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
	s := &session{c: c, ch: ch, tag: tag, results: make(chan result, c.cfg.Prefetch+1)}
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

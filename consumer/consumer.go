// Package consumer consumes relays on a channel the broker owner hands it:
// QoS, decoding relays, dispatching them to lanes, and acting on each outcome
// (ack, delayed nack-requeue, or dead-letter then ack) on the channel that
// delivered it. When the channel closes it asks the owner for another.
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

	"github.com/sutra-run/worker/broker"
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

// Broker is what the consumer needs from the connection owner (*broker.Owner).
type Broker interface {
	WaitConnected(ctx context.Context) error
	// Channel opens a channel on the current connection and sets it up
	// within ctx and the owner's deadline, or fails at once when there is
	// no connection.
	Channel(ctx context.Context, setup func(*amqp.Channel) error) (*amqp.Channel, error)
	// Changed is closed at the owner's next connect or disconnect.
	Changed() <-chan struct{}
	Publish(ctx context.Context, msgs []broker.Message) []error
}

// Config configures the consumer. The broker owner declares the queue and
// the dead-letter exchange.
type Config struct {
	Queue        string // relay queue, default sutra.relays
	DeadExchange string // default sutra.relays.dead
	Prefetch     int    // unacked deliveries in flight, default 256
	// RequeueBackoff is the first delay before a refused relay is nacked back;
	// it doubles per bounce of the same message id up to RequeueBackoffMax.
	RequeueBackoff    time.Duration // default 50ms
	RequeueBackoffMax time.Duration // default 2s
	// MaxRetries caps the transient failures of one relay (default 50),
	// counted durably over every replica (Deps.Attempts): the failure that
	// reaches it dead-letters the relay with fault.RetriesExhausted.
	// Refusals (a held claim, a fenced commit), outages and stops are not
	// failures and never capped.
	MaxRetries int
	// RetryMin is the first wait before consuming again after the channel
	// closed or could not open (sooner when the owner reconnects); it
	// doubles per failure up to RetryMax (defaults 100ms, 5s).
	RetryMin time.Duration
	RetryMax time.Duration
	// AckHold bounds how long an answered delivery's ack waits for the
	// deliveries below it, so that one ack with multiple=true settles them
	// all (default 10ms); past it the ack is sent on its own.
	AckHold time.Duration
}

func (c *Config) setDefaults() {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&c.Queue, "sutra.relays")
	def(&c.DeadExchange, "sutra.relays.dead")
	defaults.Set(&c.RequeueBackoff, 50*time.Millisecond)
	defaults.Set(&c.RequeueBackoffMax, 2*time.Second)
	defaults.Set(&c.RetryMin, 100*time.Millisecond)
	defaults.Set(&c.RetryMax, 5*time.Second)
	defaults.Set(&c.Prefetch, 256)
	defaults.Set(&c.MaxRetries, 50)
	defaults.Set(&c.AckHold, 10*time.Millisecond)
}

// DefaultConfig is the configuration New fills unset fields from; the
// worker's defaults (app.Defaults) are read here, not written again.
func DefaultConfig() Config {
	var c Config
	c.setDefaults()
	return c
}

// Attempts counts relays' transient failures durably (*store.Store), so that
// the retry cap holds across replicas and restarts.
type Attempts interface {
	CountRelayFailure(ctx context.Context, messageID string) (int, error)
	ForgetRelayFailures(ctx context.Context, messageID string) error
}

// Deps are the consumer's collaborators.
type Deps struct {
	Broker   Broker
	Lanes    Dispatcher
	Attempts Attempts
	Metrics  *metrics.Metrics
	Logger   *slog.Logger
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
	// Disconnected carries why each consuming channel ended or failed to open.
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
	// consuming is closed once the first channel consumes (WaitConsuming).
	consuming     chan struct{}
	consumingOnce sync.Once
	// bounces counts requeues per message id so repeated bounces back off.
	// Only the session goroutine touches it; it forgets a relay once it is
	// answered for good.
	bounces map[string]int
}

// New builds a consumer.
func New(deps Deps, cfg Config) *Consumer {
	cfg.setDefaults()
	return &Consumer{cfg: cfg, deps: deps, bounces: map[string]int{}, consuming: make(chan struct{})}
}

// Connected reports whether a channel is consuming (for readiness).
func (c *Consumer) Connected() bool { return c.connected.Load() }

// WaitConsuming waits until the consumer has consumed on a channel once (the
// broker confirmed the consumer), or ctx ends.
func (c *Consumer) WaitConsuming(ctx context.Context) error {
	select {
	case <-c.consuming:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Start consumes in the background until Stop, on a channel of the broker
// owner's connection, asking for another (with backoff) whenever it closes.
// Stop (startstop.Base) stops consuming at once and lets in-flight relays be
// answered (acked, requeued or dead-lettered) until its deadline, then closes
// the channel: anything still unanswered is redelivered by the broker.
func (c *Consumer) Start(ctx context.Context) error {
	return c.Run(ctx, "consumer", c.run)
}

func (c *Consumer) run(soft, hard context.Context) {
	// The owner dials at the same time: not a failure to report.
	if c.deps.Broker.WaitConnected(soft) != nil {
		return
	}
	delay := c.cfg.RetryMin
	for soft.Err() == nil {
		// Taken before asking for a channel, so that a reconnection in
		// between is not missed.
		changed := c.deps.Broker.Changed()
		err := c.consume(soft, hard)
		if c.connected.Swap(false) {
			delay = c.cfg.RetryMin // it consumed: this is a new failure
		}
		if soft.Err() != nil {
			return
		}
		c.TestSignals.Disconnected.Signal(err)
		c.deps.Logger.Warn("not consuming; trying again", "code", fault.Unavailable, "err", err, "backoff", delay)
		select {
		case <-soft.Done():
			return
		case <-changed:
		case <-time.After(delay):
		}
		delay = min(delay*2, c.cfg.RetryMax)
	}
}

// consume runs one channel's life. It returns when the channel closes (with
// its connection or alone), or after a stop has drained.
func (c *Consumer) consume(soft, hard context.Context) error {
	const tag = "sutra-worker"
	// Set on the owner's goroutine; read once Channel returned.
	var closed <-chan *amqp.Error
	var deliveries <-chan amqp.Delivery
	ch, err := c.deps.Broker.Channel(soft, func(ch *amqp.Channel) (err error) {
		if err := ch.Qos(c.cfg.Prefetch, 0, false); err != nil {
			return fmt.Errorf("setting QoS: %w", err)
		}
		closed = ch.NotifyClose(make(chan *amqp.Error, 1))
		if deliveries, err = ch.Consume(c.cfg.Queue, tag, false, false, false, false, nil); err != nil {
			return fmt.Errorf("consuming %s: %w", c.cfg.Queue, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	defer ch.Close()
	c.connected.Store(true)
	c.consumingOnce.Do(func() { close(c.consuming) })
	s := &session{c: c, ch: ch, tag: tag, hard: hard, results: make(chan result, c.cfg.Prefetch+1), byTag: map[uint64]*tracked{}}
	return s.loop(soft, hard, deliveries, closed)
}

// closeReason is why a channel closed: the broker's error, if it sent one.
func closeReason(err *amqp.Error) error {
	if err == nil {
		return errors.New("channel closed")
	}
	return err
}

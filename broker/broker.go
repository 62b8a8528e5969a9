// Package broker is the one owner of the worker's AMQP connection. It dials
// with backoff, re-declares the topology on every (re)connection, hands the
// consumer a channel on the current connection, and publishes with publisher
// confirms for every role that publishes (dead letters, the outbox) through
// one helper, Publish, on a few confirming channels.
//
// Errors are classified here: a lost connection or channel is
// fault.Unavailable; a refusal no reconnect can cure (credentials, a missing
// virtual host, missing permissions, an exchange or queue declared with other
// arguments, a malformed URL) is fault.Misconfigured, with what to change; a
// message the broker returned (mandatory, unroutable) or nacked is a failure
// of that message only (ErrReturned, ErrNacked).
package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/defaults"
	"github.com/sutra-run/worker/internal/startstop"
	"github.com/sutra-run/worker/internal/testsignal"
)

// Config configures the owner.
type Config struct {
	URL string
	// ConnectionName is shown by the broker (default sutra-worker).
	ConnectionName string
	// Topology is declared on every (re)connection, before anyone uses it.
	Topology Topology
	// ReconnectMin is the first wait before dialing again after a failure;
	// it doubles per failure up to ReconnectMax (defaults 100ms, 5s).
	ReconnectMin time.Duration
	ReconnectMax time.Duration
	// PublishChannels is how many Publish calls may await confirms at once,
	// each on its own confirming channel (default 8).
	PublishChannels int
}

func (c *Config) setDefaults() {
	if c.URL == "" {
		c.URL = "amqp://guest:guest@127.0.0.1:5672/"
	}
	if c.ConnectionName == "" {
		c.ConnectionName = "sutra-worker"
	}
	defaults.Set(&c.ReconnectMin, 100*time.Millisecond)
	defaults.Set(&c.ReconnectMax, 5*time.Second)
	defaults.Set(&c.PublishChannels, 8)
}

// heartbeat detects a dead peer on an idle connection.
const heartbeat = 10 * time.Second

// handshakeTimeout bounds the TCP connect and the AMQP handshake of one dial.
const handshakeTimeout = 30 * time.Second

// TestSignals tell tests what the owner did; inert unless Init'ed.
type TestSignals struct {
	// Connected carries the number of each connection opened (1, 2, …) once
	// its topology is declared.
	Connected testsignal.Signal[int]
	// Disconnected carries why each connection ended or failed to open.
	Disconnected testsignal.Signal[error]
}

// Init switches every signal on.
func (s *TestSignals) Init() {
	s.Connected.Init()
	s.Disconnected.Init()
}

// state is the connection's state.
type state int

const (
	// connecting has no connection: it dials, with backoff after failures.
	connecting state = iota
	// connected has a connection whose topology is declared.
	connected
	// stopped is final; the connection is closed on the way here.
	stopped
)

func (s state) String() string {
	return [...]string{"connecting", "connected", "stopped"}[s]
}

// Owner owns the AMQP connection. Start it once; Stop it once or more,
// after every component that uses it has stopped.
type Owner struct {
	startstop.Base
	TestSignals TestSignals

	cfg Config
	log *slog.Logger

	// mu guards the state, the connection and changed.
	mu    sync.Mutex
	state state
	conn  *amqp.Connection
	// changed is closed at the next transition, then replaced.
	changed chan struct{}
	// isConnected mirrors state == connected for lock-free readers.
	isConnected atomic.Bool
	opened      int
	// first is closed when the first connection attempt ended; firstErr is
	// its refusal, if it was one (set before first closes).
	first    chan struct{}
	firstErr error

	// slots hold the confirming channels, one per Publish in flight:
	// returns are matched to the batch in flight on their channel.
	slots chan *slot
	// closing waits for what the owner runs in the background: channels
	// being opened or closed (see background).
	closing sync.WaitGroup
}

// New builds an owner.
func New(logger *slog.Logger, cfg Config) *Owner {
	cfg.setDefaults()
	o := &Owner{cfg: cfg, log: logger, changed: make(chan struct{}), slots: make(chan *slot, cfg.PublishChannels), first: make(chan struct{})}
	for range cfg.PublishChannels {
		o.slots <- &slot{}
	}
	return o
}

// transition documents what may follow what:
//
//	connecting → connected   dialled, and the topology declared
//	connected  → connecting  the connection closed (broker, network)
//	any        → stopped     Stop
//
// Every transition wakes whoever waits on Changed.
func (o *Owner) transition(to state, conn *amqp.Connection) {
	o.mu.Lock()
	defer o.mu.Unlock()
	from := o.state
	if from == stopped || from == to {
		panic("broker: transition " + from.String() + " → " + to.String())
	}
	o.state, o.conn = to, conn
	o.isConnected.Store(to == connected)
	close(o.changed)
	o.changed = make(chan struct{})
	if to == connected {
		o.opened++
		o.TestSignals.Connected.Signal(o.opened)
	}
}

// Connected reports whether a connection is open and its topology declared
// (for readiness).
func (o *Owner) Connected() bool { return o.isConnected.Load() }

// Changed is closed at the next connect, disconnect or stop. Take it before
// looking at the connection, so that no change is missed in between.
func (o *Owner) Changed() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.changed
}

// WaitConnected returns once connected, or ctx's error.
func (o *Owner) WaitConnected(ctx context.Context) error {
	for {
		o.mu.Lock()
		st, changed := o.state, o.changed
		o.mu.Unlock()
		switch st {
		case connected:
			return nil
		case stopped:
			return fault.New(fault.Unavailable, "broker connection stopped")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// Channel opens a channel on the current connection; the caller closes it.
// It never waits for a connection: without one it fails with
// fault.Unavailable (wait on Changed and ask again). It does wait for the
// broker's answer to the open (until the connection closes, on a broker that
// does not answer). The channel closes with the connection.
func (o *Owner) Channel() (*amqp.Channel, error) {
	o.mu.Lock()
	conn := o.conn
	o.mu.Unlock()
	if conn == nil {
		return nil, fault.New(fault.Unavailable, "broker not connected")
	}
	ch, err := conn.Channel()
	if err != nil {
		return nil, fault.Wrap(fault.Unavailable, err, "opening channel")
	}
	return ch, nil
}

// QueueDepth is the number of messages ready in queue name (a passive
// declare: it creates nothing).
func (o *Owner) QueueDepth(name string) (int, error) {
	ch, err := o.Channel()
	if err != nil {
		return 0, err
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(name, true, false, false, false, nil)
	if err != nil {
		return 0, fault.Wrap(fault.Unavailable, err, "inspecting queue %s", name)
	}
	return q.Messages, nil
}

// Start connects in the background and keeps a connection open until Stop,
// reconnecting with backoff whenever it closes. Stop closes the connection
// (and every channel on it) at once: stop the components that use it first.
func (o *Owner) Start(ctx context.Context) error {
	return o.Run(ctx, "broker", o.run)
}

// FirstRefusal waits for the first connection attempt (or ctx) and returns
// its error when the broker refused the worker in a way no reconnect can
// cure (fault.Misconfigured), nil otherwise: a start can then fail with what
// to change instead of retrying for ever. An unreachable broker is not a
// refusal: the owner keeps dialing.
func (o *Owner) FirstRefusal(ctx context.Context) error {
	select {
	case <-o.first:
		return o.firstErr
	case <-ctx.Done():
		return nil
	}
}

func (o *Owner) run(soft, _ context.Context) {
	delay := o.cfg.ReconnectMin
	for attempt := 0; ; attempt++ {
		conn, err := o.connect(soft)
		if hint, refused := refusal(err); refused {
			err = fault.Wrap(fault.Misconfigured, err, "%s", hint)
		}
		if attempt == 0 {
			if fault.Code(err) == fault.Misconfigured {
				o.firstErr = err
			}
			close(o.first)
		}
		if err == nil {
			delay = o.cfg.ReconnectMin
			closed := conn.NotifyClose(make(chan *amqp.Error, 1))
			o.transition(connected, conn)
			select {
			case <-soft.Done():
				o.stop(conn)
				return
			case e := <-closed:
				err = errors.New("connection closed")
				if e != nil {
					err = e
				}
				o.transition(connecting, nil)
			}
		}
		if soft.Err() != nil {
			o.stop(nil)
			return
		}
		o.TestSignals.Disconnected.Signal(err)
		if fault.Code(err) == fault.Misconfigured {
			o.log.Error("the broker refuses the worker; retrying in case it is fixed", "code", fault.Misconfigured, "err", err, "backoff", delay.String())
		} else {
			o.log.Warn("broker connection lost; reconnecting", "code", fault.Unavailable, "err", err, "backoff", delay.String())
		}
		select {
		case <-soft.Done():
			o.stop(nil)
			return
		case <-time.After(delay):
		}
		delay = min(delay*2, o.cfg.ReconnectMax)
	}
}

// refusal says what to change when err is a refusal no reconnect can cure.
func refusal(err error) (hint string, ok bool) {
	var aerr *amqp.Error
	var uri uriError
	switch {
	case err == nil:
		return "", false
	case errors.As(err, &uri):
		return "SUTRA_AMQP_URL is not a valid AMQP URL (amqp://user:password@host:5672/vhost)", true
	case errors.Is(err, amqp.ErrCredentials), errors.Is(err, amqp.ErrSASL):
		return "the broker refused the user name or password: correct the credentials in SUTRA_AMQP_URL", true
	case errors.Is(err, amqp.ErrVhost):
		return "the virtual host does not exist or the user may not use it: create it, grant the user access, or correct the path of SUTRA_AMQP_URL", true
	case !errors.As(err, &aerr):
		return "", false
	case aerr.Code == amqp.NotAllowed:
		return "the broker does not allow this connection: check the virtual host in SUTRA_AMQP_URL and the user's access to it", true
	case aerr.Code == amqp.AccessRefused:
		return "the user may not declare or use the worker's exchanges and queues: grant it configure, write and read permissions on them", true
	case aerr.Code == amqp.PreconditionFailed:
		return "an exchange or queue exists with other arguments than the worker declares: delete it, or set SUTRA_QUEUE_TYPE and the SUTRA_*_EXCHANGE/QUEUE names to match it", true
	}
	return "", false
}

// uriError is a malformed broker URL.
type uriError struct{ err error }

func (e uriError) Error() string { return e.err.Error() }
func (e uriError) Unwrap() error { return e.err }

// connect dials and declares the topology. A stop interrupts the dial.
func (o *Owner) connect(ctx context.Context) (*amqp.Connection, error) {
	if _, err := amqp.ParseURI(o.cfg.URL); err != nil {
		return nil, uriError{err}
	}
	var interrupt func() bool
	conn, err := amqp.DialConfig(o.cfg.URL, amqp.Config{
		Heartbeat:  heartbeat,
		Properties: amqp.Table{"connection_name": o.cfg.ConnectionName},
		Dial: func(network, addr string) (net.Conn, error) {
			d := net.Dialer{Timeout: handshakeTimeout}
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			// The handshake has no context: closing the socket ends it.
			interrupt = context.AfterFunc(ctx, func() { c.Close() })
			return c, c.SetDeadline(time.Now().Add(handshakeTimeout))
		},
	})
	if interrupt != nil {
		interrupt()
	}
	if err != nil {
		return nil, fmt.Errorf("dialing broker: %w", err)
	}
	ch, err := conn.Channel()
	if err == nil {
		err = o.cfg.Topology.Declare(ch)
		ch.Close()
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// stop closes the connection, which closes every channel on it, and waits
// for the channels being closed in the background.
func (o *Owner) stop(conn *amqp.Connection) {
	o.transition(stopped, nil)
	if conn != nil {
		if err := conn.CloseDeadline(time.Now().Add(startstop.Grace)); err != nil && !errors.Is(err, amqp.ErrClosed) {
			o.log.Warn("closing broker connection", "err", err)
		}
	}
	o.closing.Wait()
}

// Package broker is the one owner of the worker's AMQP connections. It keeps
// two open, each dialled with backoff and its topology re-declared on every
// (re)connection: one consumes, hands the consumer its channels and carries
// its acks; the other publishes, with publisher confirms, for every role
// that publishes (dead letters, the outbox, relays sent through the API)
// through one helper, Publish, on a few confirming channels. A broker short
// of memory or disk blocks the connections that publish (connection.blocked)
// and stops reading from them: publishing on a connection of its own, as
// RabbitMQ advises, keeps the acks flowing meanwhile.
//
// Nothing waits on the broker without a bound: every write has a deadline
// (Config.WriteTimeout; a write that misses it closes its connection, which
// is redialled), opening a channel has one (Config.ChannelTimeout, or the
// caller's context), and so does every confirm (the caller's context).
//
// Errors are classified here: a lost connection or channel, and a blocked
// one, is fault.Unavailable; a refusal no reconnect can cure (credentials, a
// missing virtual host, missing permissions, an exchange or queue declared
// with other arguments, a malformed URL) is fault.Misconfigured, with what
// to change; a message the broker returned (mandatory, unroutable) or nacked
// is a failure of that message only (ErrReturned, ErrNacked).
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
	"github.com/sutra-run/worker/metrics"
)

// Config configures the owner.
type Config struct {
	// URL is the broker's AMQP URL, or a comma-separated list of the URLs
	// of one cluster's nodes (see Nodes): each connection dials the first
	// that answers and, once that connection is lost, the next.
	URL string
	// ConnectionName is shown by the broker for the consuming connection
	// (default sutra-worker); the publishing one adds "/publish".
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
	// WriteTimeout bounds every write to the broker, on either connection
	// (default 10s). amqp091 looks at a call's context only before its
	// write, and a broker that stops reading (a resource alarm, a stalled
	// peer) would hold the write, and every publish, ack and heartbeat
	// queued behind the connection's write lock, for good. A write that
	// misses it fails, and its connection is closed and redialled.
	WriteTimeout time.Duration
	// ChannelTimeout bounds how long Channel waits for the broker's answers
	// to a channel's opening and its set-up (default 10s).
	ChannelTimeout time.Duration
	// Metrics, when set, shows which connections the broker blocks.
	Metrics *metrics.Metrics
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
	defaults.Set(&c.WriteTimeout, 10*time.Second)
	defaults.Set(&c.ChannelTimeout, 10*time.Second)
}

// DefaultConfig is the configuration New fills unset fields from; the
// worker's defaults (app.Defaults) are read here, not written again.
func DefaultConfig() Config {
	var c Config
	c.setDefaults()
	return c
}

// heartbeat detects a dead peer on an idle connection.
const heartbeat = 10 * time.Second

// handshakeTimeout bounds the TCP connect and the AMQP handshake of one dial.
const handshakeTimeout = 30 * time.Second

// The owner's connections, as the logs and sutra_broker_blocked name them.
const (
	Consuming  = metrics.BrokerConsuming
	Publishing = metrics.BrokerPublishing
)

// TestSignals tell tests what the owner did; inert unless Init'ed.
type TestSignals struct {
	// Connected carries the number of each consuming connection opened
	// (1, 2, …) once its topology is declared; PublishConnected the same
	// of the publishing connection.
	Connected        testsignal.Signal[int]
	PublishConnected testsignal.Signal[int]
	// Disconnected carries why each consuming connection ended or failed
	// to open; PublishDisconnected the same of the publishing connection.
	Disconnected        testsignal.Signal[error]
	PublishDisconnected testsignal.Signal[error]
	// Blocked carries every connection.blocked and connection.unblocked.
	Blocked testsignal.Signal[Blocking]
}

// Init switches every signal on.
func (s *TestSignals) Init() {
	s.Connected.Init()
	s.PublishConnected.Init()
	s.Disconnected.Init()
	s.PublishDisconnected.Init()
	s.Blocked.Init()
}

// Blocking is the broker's flow control of one connection.
type Blocking struct {
	Connection string // Consuming or Publishing
	Active     bool
	Reason     string // the broker's, e.g. "low on memory"
}

// state is a connection's state.
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

// link is one of the owner's two connections. The fields after
// isConnected are guarded by the owner's mu.
type link struct {
	role string // Consuming or Publishing
	name string // shown by the broker
	// node is the index in the owner's nodes of the node dialled first
	// next time: the one that served last, or the one after it once its
	// connection is lost. Only keep reads and writes it.
	node         int
	connected    *testsignal.Signal[int]
	disconnected *testsignal.Signal[error]
	// isConnected mirrors state == connected for lock-free readers.
	isConnected atomic.Bool

	state  state
	conn   *amqp.Connection
	opened int
	// blocked is set while the broker blocks the connection, for reason.
	blocked bool
	reason  string
}

// Owner owns the AMQP connections. Start it once; Stop it once or more,
// after every component that uses it has stopped.
type Owner struct {
	startstop.Base
	TestSignals TestSignals

	cfg Config
	log *slog.Logger
	// nodes are the URLs of cfg.URL (Nodes); nodesErr, when set, refuses
	// every connection attempt (a malformed list).
	nodes    []string
	nodesErr error

	consuming, publishing *link

	// mu guards the links' states, connections and flow control, changed,
	// stopped and the first attempts.
	mu sync.Mutex
	// changed is closed at the next transition of either link, then replaced.
	changed chan struct{}
	// stopped is set once both links stopped: nothing starts in the
	// background any more.
	stopped bool
	// first is closed when both links' first connection attempts ended;
	// firstErr is a refusal among them, if any (set before first closes).
	first        chan struct{}
	firstPending int
	firstErr     error

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
	o := &Owner{cfg: cfg, log: logger, changed: make(chan struct{}), slots: make(chan *slot, cfg.PublishChannels),
		first: make(chan struct{}), firstPending: 2}
	o.consuming = &link{role: Consuming, name: cfg.ConnectionName,
		connected: &o.TestSignals.Connected, disconnected: &o.TestSignals.Disconnected}
	o.publishing = &link{role: Publishing, name: cfg.ConnectionName + "/publish",
		connected: &o.TestSignals.PublishConnected, disconnected: &o.TestSignals.PublishDisconnected}
	for range cfg.PublishChannels {
		o.slots <- &slot{}
	}
	o.nodes, o.nodesErr = Nodes(cfg.URL)
	return o
}

func (o *Owner) links() [2]*link { return [2]*link{o.consuming, o.publishing} }

// transition documents what may follow what, for each link:
//
//	connecting → connected   dialled, and the topology declared
//	connected  → connecting  the connection closed (broker, network, a missed write deadline)
//	any        → stopped     Stop
//
// A connection's flow control ends with it. Every transition wakes
// whoever waits on Changed.
func (o *Owner) transition(l *link, to state, conn *amqp.Connection) {
	o.mu.Lock()
	defer o.mu.Unlock()
	from := l.state
	if from == stopped || from == to {
		panic("broker: " + l.role + " connection: transition " + from.String() + " → " + to.String())
	}
	l.state, l.conn = to, conn
	l.isConnected.Store(to == connected)
	if l.blocked {
		l.blocked, l.reason = false, ""
		o.gauge(l, 0)
	}
	close(o.changed)
	o.changed = make(chan struct{})
	if to == connected {
		l.opened++
		l.connected.Signal(l.opened)
	}
}

// flowControl records the broker's connection.blocked or
// connection.unblocked of l's connection.
func (o *Owner) flowControl(l *link, b amqp.Blocking) {
	o.mu.Lock()
	l.blocked, l.reason = b.Active, b.Reason
	o.mu.Unlock()
	if b.Active {
		o.gauge(l, 1)
		o.log.Warn("the broker blocks a connection: not ready until it unblocks it", "connection", l.role,
			"reason", b.Reason, "code", fault.Unavailable)
	} else {
		o.gauge(l, 0)
		o.log.Info("the broker unblocked a connection", "connection", l.role)
	}
	o.TestSignals.Blocked.Signal(Blocking{Connection: l.role, Active: b.Active, Reason: b.Reason})
}

func (o *Owner) gauge(l *link, v float64) {
	if o.cfg.Metrics != nil {
		o.cfg.Metrics.BrokerBlocked.WithLabelValues(l.role).Set(v)
	}
}

// Connected reports whether both connections are open and their topology
// declared.
func (o *Owner) Connected() bool {
	return o.consuming.isConnected.Load() && o.publishing.isConnected.Load()
}

// Ready is nil when both connections are open, their topology declared, and
// the broker blocks neither; otherwise it says which is not, in a few words
// (for /readyz).
func (o *Owner) Ready() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, l := range o.links() {
		switch {
		case l.state != connected:
			return fmt.Errorf("broker not connected (%s connection)", l.role)
		case l.blocked:
			return fmt.Errorf("broker blocks the %s connection (%s)", l.role, l.reason)
		}
	}
	return nil
}

// Changed is closed at the next connect, disconnect or stop of either
// connection. Take it before looking at a connection, so that no change is
// missed in between.
func (o *Owner) Changed() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.changed
}

// WaitConnected returns once both connections are connected, or ctx's error.
func (o *Owner) WaitConnected(ctx context.Context) error {
	for {
		o.mu.Lock()
		c, p, changed := o.consuming.state, o.publishing.state, o.changed
		o.mu.Unlock()
		switch {
		case c == connected && p == connected:
			return nil
		case c == stopped || p == stopped:
			return fault.New(fault.Unavailable, "broker connection stopped")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// Channel opens a channel on the consuming connection and runs setup on it
// (when not nil: QoS, a consume, a declare); the caller closes the channel,
// which closes with the connection too. It never waits for a connection:
// without one it fails with fault.Unavailable (wait on Changed and ask
// again). It waits for the broker's answers until ctx ends or
// Config.ChannelTimeout passes, then fails with fault.Unavailable; a channel
// that opens later is closed unused.
func (o *Owner) Channel(ctx context.Context, setup func(*amqp.Channel) error) (*amqp.Channel, error) {
	ctx, cancel := context.WithTimeout(ctx, o.cfg.ChannelTimeout)
	defer cancel()
	return within(o, ctx, "opening a channel", func() (*amqp.Channel, error) { return o.open(o.consuming, setup) },
		func(ch *amqp.Channel) { _ = ch.Close() })
}

// open opens a channel on l's connection and runs setup on it.
func (o *Owner) open(l *link, setup func(*amqp.Channel) error) (*amqp.Channel, error) {
	o.mu.Lock()
	conn := l.conn
	o.mu.Unlock()
	if conn == nil {
		return nil, fault.New(fault.Unavailable, "broker not connected")
	}
	ch, err := conn.Channel()
	if err != nil {
		return nil, fault.Wrap(fault.Unavailable, err, "opening channel")
	}
	if setup != nil {
		if err := setup(ch); err != nil {
			_ = ch.Close()
			return nil, err
		}
	}
	return ch, nil
}

// within runs f on a goroutine the owner's stop waits for and returns what
// f returns, or gives up when ctx ends first: then what f returns later is
// handed to undo. f waits for the broker's answers, which a sick connection
// may not give; it must end once the connection closes.
func within[T any](o *Owner, ctx context.Context, what string, f func() (T, error), undo func(T)) (T, error) {
	type result struct {
		v   T
		err error
	}
	var zero T
	done := make(chan result, 1)
	if !o.background(func() {
		v, err := f()
		done <- result{v, err}
	}) {
		return zero, fault.New(fault.Unavailable, "broker not connected: the owner stopped")
	}
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		o.background(func() {
			if r := <-done; r.err == nil {
				undo(r.v)
			}
		})
		return zero, fault.Wrap(fault.Unavailable, ctx.Err(), "%s", what)
	}
}

// QueueDepth is the number of messages ready in queue name (a passive
// declare: it creates nothing), within Config.ChannelTimeout.
func (o *Owner) QueueDepth(name string) (int, error) {
	// Read only once Channel returned it (set on another goroutine).
	var depth int
	ch, err := o.Channel(context.Background(), func(ch *amqp.Channel) error {
		q, err := ch.QueueDeclarePassive(name, true, false, false, false, nil)
		if err != nil {
			return fault.Wrap(fault.Unavailable, err, "inspecting queue %s", name)
		}
		depth = q.Messages
		return nil
	})
	if err != nil {
		return 0, err
	}
	o.closeChannel(ch)
	return depth, nil
}

// Start connects in the background and keeps both connections open until
// Stop, reconnecting each with backoff whenever it closes. Stop closes the
// connections (and every channel on them) at once: stop the components that
// use them first.
func (o *Owner) Start(ctx context.Context) error {
	return o.Run(ctx, "broker", o.run)
}

// FirstRefusal waits for the first connection attempts (or ctx) and returns
// an error when the broker refused the worker in a way no reconnect can
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
	var links sync.WaitGroup
	for _, l := range o.links() {
		links.Go(func() { o.keep(soft, l) })
	}
	links.Wait()
	o.mu.Lock()
	o.stopped = true
	o.mu.Unlock()
	o.closing.Wait()
}

// keep keeps l's connection open until the stop.
func (o *Owner) keep(soft context.Context, l *link) {
	delay := o.cfg.ReconnectMin
	for attempt := 0; ; attempt++ {
		conn, err := o.dialAny(soft, l)
		if attempt == 0 {
			o.attempted(err)
		}
		if err == nil {
			delay = o.cfg.ReconnectMin
			if err = o.serve(soft, l, conn); err == nil {
				o.stop(l, conn)
				return
			}
			// The node went away (or dropped us): the next one is tried
			// first, while this one may be restarting.
			l.node = (l.node + 1) % len(o.nodes)
		}
		if soft.Err() != nil {
			o.stop(l, nil)
			return
		}
		l.disconnected.Signal(err)
		if fault.Code(err) == fault.Misconfigured {
			o.log.Error("the broker refuses the worker; retrying in case it is fixed", "connection", l.role, "code", fault.Misconfigured, "err", err, "backoff", delay.String())
		} else {
			o.log.Warn("broker connection lost; reconnecting", "connection", l.role, "code", fault.Unavailable, "err", err, "backoff", delay.String())
		}
		select {
		case <-soft.Done():
			o.stop(l, nil)
			return
		case <-time.After(delay):
		}
		delay = min(delay*2, o.cfg.ReconnectMax)
	}
}

// attempted records the end of a link's first connection attempt.
func (o *Owner) attempted(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if fault.Code(err) == fault.Misconfigured && o.firstErr == nil {
		o.firstErr = err
	}
	if o.firstPending--; o.firstPending == 0 {
		close(o.first)
	}
}

// serve holds l's new connection conn until it closes (why) or the owner
// stops (nil), and follows the broker's flow control of it meanwhile.
func (o *Owner) serve(soft context.Context, l *link, conn *amqp.Connection) error {
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	blocked := conn.NotifyBlocked(make(chan amqp.Blocking, 1))
	o.transition(l, connected, conn)
	for {
		select {
		case <-soft.Done():
			return nil
		case b, ok := <-blocked:
			if ok {
				o.flowControl(l, b)
			} else {
				blocked = nil // the connection is closing: closed tells why
			}
		case e := <-closed:
			o.transition(l, connecting, nil)
			if e == nil {
				return errors.New("connection closed")
			}
			return e
		}
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
		return "SUTRA_AMQP_URL is not a valid AMQP URL (amqp://user:password@host:5672/vhost) or comma-separated list of the URLs of one cluster's nodes", true
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

// dialAny dials l's connection to the nodes in turn, from l.node on, until
// one answers and takes the topology; l.node is then that one. A refusal
// no reconnect can cure ends the round (the nodes of one cluster share
// their users, virtual hosts and definitions: the next would refuse too);
// otherwise the error is the last node's.
func (o *Owner) dialAny(ctx context.Context, l *link) (*amqp.Connection, error) {
	var conn *amqp.Connection
	err := error(uriError{o.nodesErr})
	for range o.nodes {
		if conn, err = o.connect(ctx, l, o.nodes[l.node]); err == nil {
			if len(o.nodes) > 1 {
				o.log.Info("broker connected", "connection", l.role, "node", nodeAddress(o.nodes[l.node]))
			}
			return conn, nil
		}
		if _, refused := refusal(err); refused || ctx.Err() != nil {
			break
		}
		l.node = (l.node + 1) % len(o.nodes)
	}
	if hint, refused := refusal(err); refused {
		err = fault.Wrap(fault.Misconfigured, err, "%s", hint)
	}
	return nil, err
}

// connect dials one connection to the node at rawURL and declares the
// topology on it. A stop interrupts the dial.
func (o *Owner) connect(ctx context.Context, l *link, rawURL string) (*amqp.Connection, error) {
	var interrupt func() bool
	conn, err := amqp.DialConfig(rawURL, amqp.Config{
		Heartbeat:  heartbeat,
		Properties: amqp.Table{"connection_name": l.name},
		Dial: func(network, addr string) (net.Conn, error) {
			d := net.Dialer{Timeout: handshakeTimeout}
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			// The handshake has no context: closing the socket ends it.
			interrupt = context.AfterFunc(ctx, func() { c.Close() })
			return deadlineConn{Conn: c, timeout: o.cfg.WriteTimeout}, c.SetDeadline(time.Now().Add(handshakeTimeout))
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

// deadlineConn gives every write its own deadline. amqp091 closes a
// connection whose write failed: a broker that stopped reading from it costs
// one connection (redialled) instead of every call behind its write lock.
// Reads keep amqp091's deadlines (the handshake's, then the heartbeat's).
type deadlineConn struct {
	net.Conn
	timeout time.Duration
}

func (c deadlineConn) Write(b []byte) (int, error) {
	if err := c.Conn.SetWriteDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}

// stop closes l's connection, which closes every channel on it.
func (o *Owner) stop(l *link, conn *amqp.Connection) {
	o.transition(l, stopped, nil)
	if conn != nil {
		if err := conn.CloseDeadline(time.Now().Add(startstop.Grace)); err != nil && !errors.Is(err, amqp.ErrClosed) {
			o.log.Warn("closing broker connection", "connection", l.role, "err", err)
		}
	}
}

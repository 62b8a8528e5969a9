// Package bench holds what the benchmark programs share: the benchmark
// process, the pgbench script of the ceiling, and the isolated environment of
// one measured run (a fresh schema holding K started instances, and fresh
// broker names), so that no run sees another's rows, plans or queue.
package bench

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/internal/loadgen"
	"github.com/sutra-run/worker/store"
)

// ProcessXML is the benchmark process: an instance waits for message "ping"
// at one catch event whose outgoing flow loops back to it, so every relay is
// exactly one step (close the subscription, open the next) forever.
//
//go:embed ping.bpmn
var ProcessXML []byte

// PingOutXML is ProcessXML with a message throw in its loop: every ping is
// one step that writes one outbox message (for the outbox measurement).
//
//go:embed pingout.bpmn
var PingOutXML []byte

// TasksXML is the task round trip's process: three sequential service
// tasks of topic TaskTopic.
//
//go:embed tasks.bpmn
var TasksXML []byte

// TaskTopic is the topic of TasksXML's tasks.
const TaskTopic = "work"

// CeilingScript is the pgbench script of the ceiling: one relay's SQL as the
// worker runs it, with no broker, no Go and no engine.
//
//go:embed ceiling.sql
var CeilingScript []byte

// BatchScript is the pgbench script of the batch ceiling: N relays' steps
// claimed in one statement and committed in one transaction of set-based
// statements, with no broker, no Go and no engine.
//
//go:embed batch.sql
var BatchScript []byte

// Names in ProcessXML.
const (
	ProcessKey   = "ping"
	Message      = "ping"
	CatchElement = "Catch"
	LoopFlow     = "Flow_Loop"
)

// ClaimTimeout is the claim timeout of every benchmark client; no claim ever
// gets near it.
const ClaimTimeout = 30 * time.Second

// InstanceID is the id of benchmark instance i. It is the bare number so that
// the pgbench script can pass its integer variable as the very parameter the
// worker sends.
func InstanceID(i int) string { return strconv.Itoa(i) }

// Env is one run's isolated environment.
type Env struct {
	// Config points a worker at this run's schema and broker names.
	Config    app.Config
	Schema    string
	Instances int
	// SinkQueue is bound to the outbox exchange with "#", so that outbox
	// messages are routed (they are published mandatory); it keeps the
	// newest 10 000.
	SinkQueue string
	serverURL string
	process   []byte
}

// NewEnv creates a schema named after label with the migrations applied, the
// benchmark process (ProcessXML or PingOutXML) deployed and k instances
// started (each waiting for its first ping), and picks broker names for it.
// Nothing here is timed.
func NewEnv(ctx context.Context, serverURL, amqpURL, label string, k int, process []byte) (*Env, error) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "bench_" + label + "_" + hex.EncodeToString(b[:])
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return nil, err
	}
	_, err = conn.Exec(ctx, "CREATE SCHEMA "+name)
	conn.Close(ctx)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(serverURL)
	if err != nil {
		return nil, err
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	queue := "sutra.bench." + name
	e := &Env{Schema: name, Instances: k, serverURL: serverURL, process: process, SinkQueue: queue + ".outbox", Config: app.Config{
		Process:  app.Process{ReplicaID: "bench", HTTPAddr: "127.0.0.1:0", ShutdownTimeout: 10 * time.Second},
		Database: app.Database{URL: u.String()},
		Broker: app.Broker{URL: amqpURL, RelayExchange: queue, RelayQueue: queue, RelayBindingKey: "#",
			DeadExchange: queue + ".dead", DeadQueue: queue + ".dead", OutboxExchange: queue + ".outbox",
			// The soak's worker inherits the environment: its queues are
			// declared here first, so they must be of the type it declares.
			QueueType: os.Getenv("SUTRA_QUEUE_TYPE")},
		Lanes:    app.Lanes{ClaimTimeout: ClaimTimeout, StepHistory: true},
		Consumer: app.Consumer{RequeueBackoff: 50 * time.Millisecond, RequeueBackoffMax: 2 * time.Second},
		API:      app.API{Addr: "127.0.0.1:0", Insecure: true},
		Gateway:  app.Gateway{Addr: "127.0.0.1:0"},
	}}
	if err := e.populate(ctx); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// populate migrates the schema, deploys the process and starts the instances.
func (e *Env) populate(ctx context.Context) error {
	const workers = 8
	st, err := store.Open(ctx, e.Config.Database.URL, store.Options{MaxConns: workers})
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		return err
	}
	ds, err := st.Deploy(ctx, e.process)
	if err != nil {
		return err
	}
	proc, err := st.Process(ctx, ds[0].Key, ds[0].Version)
	if err != nil {
		return err
	}
	ids := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := fmt.Sprintf("bench/setup/%d", w)
			for i := range ids {
				if err := start(ctx, st, proc, owner, InstanceID(i)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
feed:
	for i := range e.Instances {
		select {
		case ids <- i:
		case err = <-errs:
			break feed
		}
	}
	close(ids)
	wg.Wait()
	if err == nil && len(errs) > 0 {
		err = <-errs
	}
	return err
}

// start runs an instance's first step through the store and the engine, as
// the lanes would for a start relay, without the broker.
func start(ctx context.Context, st *store.Store, proc *bpmn.Process, owner, id string) error {
	inst, err := st.Claim(ctx, store.ClaimRequest{InstanceID: id, Owner: owner, Timeout: ClaimTimeout, StartKey: proc.ID})
	if err != nil {
		return fmt.Errorf("starting instance %s: %w", id, err)
	}
	next, eff, err := engine.Step(proc, engine.Instance{ID: id}, engine.Trigger{
		Kind: engine.TriggerStart, Variables: map[string]any{"key": id},
	}, time.Now())
	if err != nil {
		return fmt.Errorf("starting instance %s: %w", id, err)
	}
	return st.WriteStep(ctx, store.StepWrites{InstanceID: id, Owner: owner, Version: inst.Version, State: next, Effects: eff})
}

// DeclareQueues declares the run's relay topology as the worker does, so
// that relays published before a consumer attaches are kept, and the outbox
// exchange with its sink queue.
func (e *Env) DeclareQueues() error {
	conn, err := amqp.Dial(e.Config.Broker.URL)
	if err != nil {
		return err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	if err := e.Config.Topology().Declare(ch); err != nil {
		return err
	}
	// Durable, so the broker persists each message as a real consumer's
	// queue would make it; capped, since nothing consumes it.
	if _, err := ch.QueueDeclare(e.SinkQueue, true, false, false, false, amqp.Table{"x-max-length": 10000}); err != nil {
		return err
	}
	return ch.QueueBind(e.SinkQueue, "#", e.Config.OutboxExchange, false, nil)
}

// Pings are n ping relays, addressed by instance id round-robin over the
// instances. Their message ids start with PingPrefix.
func (e *Env) Pings(n int) []loadgen.Relay {
	relays := make([]loadgen.Relay, n)
	for j := range relays {
		relays[j] = e.Ping(j)
	}
	return relays
}

// Ping is the j-th timed ping relay: to instance j mod K.
func (e *Env) Ping(j int) loadgen.Relay {
	return loadgen.Relay{ID: PingPrefix + strconv.Itoa(j), Body: map[string]any{
		"instance_id": InstanceID(j % e.Instances), "message": Message,
	}}
}

// PingPrefix starts the message id of every timed relay.
const PingPrefix = "ping-"

// Close drops the schema and deletes the broker names, best effort: a
// leftover never disturbs another run, which uses fresh names.
func (e *Env) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if conn, err := pgx.Connect(ctx, e.serverURL); err == nil {
		_, _ = conn.Exec(ctx, "DROP SCHEMA "+e.Schema+" CASCADE")
		conn.Close(ctx)
	}
	if conn, err := amqp.Dial(e.Config.Broker.URL); err == nil {
		if ch, err := conn.Channel(); err == nil {
			c := e.Config
			_, _ = ch.QueueDelete(c.RelayQueue, false, false, false)
			_, _ = ch.QueueDelete(c.DeadQueue, false, false, false)
			_, _ = ch.QueueDelete(e.SinkQueue, false, false, false)
			_ = ch.ExchangeDelete(c.RelayExchange, false, false)
			_ = ch.ExchangeDelete(c.DeadExchange, false, false)
			_ = ch.ExchangeDelete(c.OutboxExchange, false, false)
		}
		conn.Close()
	}
}

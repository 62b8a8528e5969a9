// Package app wires the worker's components and runs them with a two-phase
// shutdown. cmd/worker only parses configuration and signals.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/sutra-run/worker/api"
	apiadmin "github.com/sutra-run/worker/api/admin"
	"github.com/sutra-run/worker/api/rest"
	"github.com/sutra-run/worker/api/tasks"
	"github.com/sutra-run/worker/api/taskwait"
	"github.com/sutra-run/worker/api/zeebe"
	"github.com/sutra-run/worker/broker"
	"github.com/sutra-run/worker/console"
	"github.com/sutra-run/worker/consumer"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/clip"
	"github.com/sutra-run/worker/internal/clock"
	"github.com/sutra-run/worker/internal/startstop"
	"github.com/sutra-run/worker/lanes"
	"github.com/sutra-run/worker/metrics"
	"github.com/sutra-run/worker/operations"
	"github.com/sutra-run/worker/outbox"
	"github.com/sutra-run/worker/replica"
	"github.com/sutra-run/worker/store"
	"github.com/sutra-run/worker/sweeper"
	"github.com/sutra-run/worker/timers"
	"github.com/sutra-run/worker/upgrade"
	"github.com/sutra-run/worker/usecase"
)

// Options are what a test may inject into a worker besides Config.
type Options struct {
	Logger   *slog.Logger
	Registry *prometheus.Registry
	Hooks    *lanes.Hooks
	// Listening, when set, receives the HTTP listener's address once bound.
	Listening func(addr string)
	// SyncClaims makes claims and releases wait for the WAL flush too (the
	// benchmark measures what skipping it saves).
	SyncClaims bool
	// Clock, when set, stamps and checks the access tokens of POST
	// /oauth/token (tests move it past their expiry); default the real one.
	Clock clock.Clock
}

// Worker is a running worker.
type Worker struct {
	cfg        Config
	opt        Options
	log        *slog.Logger
	store      *store.Store
	replica    *replica.Registration
	lanes      *lanes.Pool
	timers     *timers.Poller
	sweeper    *sweeper.Sweeper
	broker     *broker.Owner
	consumer   *consumer.Consumer
	handoff    *consumer.Handoff
	outbox     *outbox.Publisher
	api        *api.Server
	tasks      *tasks.API
	waiters    *taskwait.Waiters
	usecases   *usecase.UseCases
	ends       *usecase.Ends
	gateway    *zeebe.Gateway
	rest       *rest.API
	migrations *operations.Runner
	batches    *operations.BatchRunner
	contracts  *upgrade.Contracts
	durability *durabilityWatch
	http       *http.Server
	listener   net.Listener
	metrics    *metrics.Metrics
	wg         sync.WaitGroup
	stopOnce   sync.Once
	stopErr    error
}

// Start connects to PostgreSQL (migrating first when cfg.Migrate), registers
// the replica id (refusing with fault.ReplicaIDInUse when another live
// process has it), then starts the broker connection owner, the lanes, the
// timer poller, the sweeper, the outbox publisher, the consumer and the HTTP
// listener.
func Start(ctx context.Context, cfg Config, opt Options) (*Worker, error) {
	if cfg.ReplicaID == "" {
		cfg.ReplicaID = DefaultReplicaID()
	}
	if err := cfg.apiAuth(); err != nil {
		return nil, err
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if opt.Hooks == nil {
		opt.Hooks = testHooks(opt.Logger)
	}
	if opt.Registry == nil {
		opt.Registry = prometheus.NewRegistry()
		opt.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	log := opt.Logger
	var st *store.Store
	var waiting error // a contract migration waiting for older replicas to leave
	err := untilAvailable(ctx, log, "opening the database", func() (err error) {
		st, waiting, err = openStore(ctx, cfg, opt.SyncClaims)
		return err
	})
	if err != nil {
		return nil, err
	}
	w := &Worker{cfg: cfg, opt: opt, log: log, store: st, metrics: metrics.New(opt.Registry)}
	w.contracts = upgrade.New(upgrade.Deps{Migrate: st.Migrate, Logger: log}, upgrade.Config{Interval: cfg.LeaseTTL})
	if waiting != nil {
		log.Warn("starting without a contract migration; trying it again until the older replicas have left",
			"code", fault.MigrateContractWaiting, "err", waiting, "every", cfg.LeaseTTL.String())
	}
	opt.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sutra_ready",
		Help: "1 when /readyz would answer 200 (the database answers, the broker is connected, the lanes run, the replica id is registered), else 0.",
	}, func() float64 {
		if w.Ready(context.Background()) == nil {
			return 1
		}
		return 0
	}))
	w.durability = &durabilityWatch{store: st, log: log}
	opt.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sutra_database_synchronous",
		Help: "1 while the database's commits wait for a synchronous standby (synchronous_standby_names set, synchronous_commit on, remote_write or remote_apply), read every 10 s; else 0.",
	}, w.durability.synchronous))
	w.replica = replica.New(st, log, cfg.replicaConfig())
	var limit store.ConnectionLimit
	err = untilAvailable(ctx, log, "checking the connection limit", func() (err error) {
		limit, err = st.ConnectionLimit(ctx, replica.LeaseName(""), replica.LeaseName(cfg.ReplicaID))
		return err
	})
	if err == nil {
		err = cfg.checkConnectionLimit(limit, log)
	}
	if err == nil {
		err = cfg.checkDescriptorLimit()
	}
	if err != nil {
		st.Close()
		return nil, err
	}
	if err := untilAvailable(ctx, log, "registering the replica id", func() error { return w.replica.Start(ctx) }); err != nil {
		st.Close()
		return nil, err
	}
	armed := func(due time.Time) { w.timers.Armed(due) }
	apiConfig := cfg.apiConfig()
	apiConfig.Credentials.Clock = opt.Clock
	// Failed credentials are counted and throttled per source address
	// across both listeners.
	authFailures := api.NewAuthFailures(w.metrics, log, opt.Clock, cfg.API.AuthFailureBurst)
	w.api = api.New(api.Deps{Metrics: w.metrics, Logger: log, AuthFailures: authFailures}, apiConfig)
	// The lanes and the publisher exist only once the APIs are built.
	w.handoff = consumer.NewHandoff(lanesDispatcher{w}, func() { w.outbox.Wake() }, w.metrics, cfg.Tasks.FastPath)
	// Both job protocols' long polls and streams wait for tasks in one
	// place, which the lanes tell of the tasks they create.
	w.waiters = taskwait.New(taskwait.Deps{Store: st, Acquire: w.api.AcquireDB, Logger: log}, cfg.jobsConfig())
	// Starts with their result, of either protocol, wait for the
	// instance's end in one place, which the lanes tell of the ends here.
	w.ends = usecase.NewEnds(st, log, cfg.Gateway.MaxStreams, cfg.Tasks.PollInterval)
	// Every protocol calls one set of use cases.
	w.usecases = usecase.New(usecase.Deps{Store: st, Metrics: w.metrics, Logger: log, Lanes: lanesDispatcher{w}, Waiters: w.waiters,
		PublishRelay: w.publishRelay, Handoff: w.handoff.Relay, Ends: w.ends}, cfg.useCasesConfig())
	w.tasks = tasks.New(w.api, tasks.Deps{Store: st, UseCases: w.usecases, Metrics: w.metrics, Logger: log},
		cfg.tasksConfig())
	apiadmin.New(w.api, apiadmin.Deps{Store: st, UseCases: w.usecases, Metrics: w.metrics, Logger: log,
		MigrationCreated: func() { w.migrations.Wake() }, BatchCreated: func() { w.batches.Wake() }}, cfg.adminAPIConfig())
	w.rest = rest.New(w.api, rest.Deps{Store: st, UseCases: w.usecases, Metrics: w.metrics, Logger: log}, cfg.restConfig())
	if cfg.API.UI {
		ui := console.Handler()
		w.api.Public("GET "+console.Prefix, ui)
		w.api.Public("GET "+console.Favicon, ui)
	}
	w.lanes = lanes.New(lanes.Deps{Store: st, Metrics: w.metrics, Logger: log, Hooks: opt.Hooks, TimerArmed: armed,
		TasksCreated: w.waiters.Created, ClaimGuard: w.replica.Valid, Ended: w.ends.Ended}, cfg.lanesConfig())
	gatewayConfig := cfg.gatewayConfig()
	gatewayConfig.Credentials.Clock = opt.Clock
	w.gateway = zeebe.New(zeebe.Deps{Store: st, Metrics: w.metrics, Logger: log,
		UseCases: w.usecases, AcquireDB: w.api.AcquireDB, AuthFailures: authFailures, Clock: opt.Clock}, gatewayConfig)
	w.migrations = operations.NewRunner(operations.RunnerDeps{Store: st, Lanes: w.lanes, Metrics: w.metrics, Logger: log}, cfg.migrationsConfig())
	// A batch retries each incident through the one incident-retry use case.
	retryIncident := func(ctx context.Context, id int64) error {
		_, err := w.usecases.ResolveIncident(ctx, usecase.Conn{}, usecase.IncidentRetry{ID: id, Retries: new(0)})
		return err
	}
	w.batches = operations.NewBatchRunner(operations.BatchDeps{Store: st, Lanes: w.lanes, RetryIncident: retryIncident, Logger: log},
		cfg.batchesConfig())
	w.timers = timers.New(timers.Deps{Store: st, Lanes: w.lanes, Metrics: w.metrics, Logger: log}, cfg.timersConfig())
	brokerConfig := cfg.brokerConfig()
	brokerConfig.Metrics = w.metrics
	w.broker = broker.New(log, brokerConfig)
	w.sweeper = sweeper.New(sweeper.Deps{Store: st, Broker: w.broker, Metrics: w.metrics, Logger: log}, cfg.sweeperConfig())
	w.consumer = consumer.New(consumer.Deps{Broker: w.broker, Lanes: w.lanes, Attempts: st, Metrics: w.metrics, Logger: log}, cfg.consumerConfig())
	w.outbox = outbox.New(outbox.Deps{Store: st, Broker: w.broker, Metrics: w.metrics, Logger: log}, cfg.outboxConfig())
	// Commits that wrote outbox rows wake this replica's publisher: no wait
	// for a poll.
	st.NotifyOutbox(w.outbox.Wake)
	if err := w.serveHTTP(); err != nil {
		w.abort()
		return nil, err
	}
	services := []startstop.Service{w.durability, w.broker, w.lanes, w.timers, w.sweeper, w.outbox, w.consumer, w.migrations, w.batches, w.waiters, w.ends}
	if cfg.API.Addr != "" { // empty: no API listener (Stop of a server never started is a no-op)
		services = append(services, w.api)
	}
	if cfg.Gateway.Addr != "" { // empty: no Zeebe gateway
		services = append(services, w.gateway)
	}
	if waiting != nil {
		services = append(services, w.contracts)
	}
	for _, c := range services {
		if err := c.Start(ctx); err != nil {
			w.abort()
			return nil, err
		}
	}
	// A broker that refuses the worker (credentials, virtual host,
	// permissions, a queue declared otherwise) fails the start with what to
	// change; one that is only unreachable is waited for, not ready meanwhile.
	fctx, cancel := context.WithTimeout(ctx, firstConnectWait)
	defer cancel()
	err = w.broker.FirstRefusal(fctx)
	if err != nil {
		w.abort()
		return nil, err
	}
	// Started (and ready) only once relays are consumed, within the same
	// wait: a broker that does not let the consumer attach by then is waited
	// for in the background, not ready meanwhile.
	if err := w.consumer.WaitConsuming(fctx); err != nil {
		if ctx.Err() != nil {
			w.abort()
			return nil, ctx.Err()
		}
		log.Warn("not consuming relays yet; starting not ready", "code", fault.Unavailable, "waited", firstConnectWait.String())
	}
	log.Info("worker started", "lanes", cfg.Lanes.Count, "prefetch", cfg.Consumer.Prefetch, "http", w.listener.Addr().String(), "api", w.api.Addr(),
		"gateway", w.gateway.Addr())
	return w, nil
}

// firstConnectWait bounds how long a start waits for the broker's first
// answer: a refusal after it is logged at ERROR and retried, not fatal.
const firstConnectWait = 10 * time.Second

// publishRelay publishes a relay sent through the admin API (POST
// /v1/messages) to the relay exchange, as an upstream service would, and
// returns once the broker confirmed it.
func (w *Worker) publishRelay(ctx context.Context, routingKey, messageID string, body []byte) error {
	err := w.broker.Publish(ctx, []broker.Message{{Exchange: w.cfg.Broker.RelayExchange, RoutingKey: routingKey, Publishing: amqp.Publishing{
		MessageId: messageID, ContentType: "application/json", DeliveryMode: amqp.Persistent, Timestamp: time.Now(), Body: body,
	}}})[0]
	if err != nil && fault.Code(err) == "" {
		// Returned (no queue bound for the routing key) or nacked: not delivered.
		return fault.Wrap(fault.Unavailable, err, "publishing to %s with routing key %q", w.cfg.Broker.RelayExchange, clip.String(routingKey))
	}
	return err
}

// untilAvailable runs f again, with backoff, while it fails because the
// database cannot serve right now (down, starting, out of connection slots):
// a worker started before its database waits for it. Any other error (a bad
// URL, a wrong password, a replica id in use) is returned at once: no retry
// cures it.
func untilAvailable(ctx context.Context, log *slog.Logger, what string, f func() error) error {
	for delay := 100 * time.Millisecond; ; delay = min(delay*2, 5*time.Second) {
		err := f()
		if fault.Code(err) != fault.Unavailable {
			return err
		}
		log.Warn(what+": the database is not available yet; retrying", "code", fault.Unavailable, "err", err, "backoff", delay.String())
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
	}
}

// abort undoes a Start that failed half-way.
func (w *Worker) abort() {
	ctx, cancel := context.WithTimeout(context.Background(), startstop.Grace)
	defer cancel()
	_ = w.Stop(ctx)
}

// OpenStore opens the database pool, creating the database and applying
// migrations first when cfg.Migrate is set.
// A contract step waiting for older replicas fails it with
// fault.MigrateContractWaiting, the other migrations applied.
func OpenStore(ctx context.Context, cfg Config) (*store.Store, error) {
	st, waiting, err := openStore(ctx, cfg, false)
	if err == nil && waiting != nil {
		st.Close()
		return nil, fmt.Errorf("migrating: %w", waiting)
	}
	return st, err
}

// openStore opens the store; waiting is the migration error of a contract
// step left waiting for older replicas (the store is open all the same).
func openStore(ctx context.Context, cfg Config, syncClaims bool) (st *store.Store, waiting, err error) {
	if cfg.Migrate {
		if err := store.EnsureDatabase(ctx, cfg.Database.URL); err != nil {
			return nil, nil, err
		}
	}
	st, err = store.Open(ctx, cfg.Database.URL, cfg.storeOptions(syncClaims))
	if err != nil {
		return nil, nil, err
	}
	if cfg.Migrate {
		if err := st.Migrate(ctx); fault.Code(err) == fault.MigrateContractWaiting {
			return st, err, nil
		} else if err != nil {
			st.Close()
			return nil, nil, fmt.Errorf("migrating: %w", err)
		}
	}
	return st, nil, nil
}

// Store is the worker's store (for tests and tools).
func (w *Worker) Store() *store.Store { return w.store }

// Lanes is the worker's lane pool.
func (w *Worker) Lanes() *lanes.Pool { return w.lanes }

// APIAddr is the bound address of the HTTP API ("" when it is off).
func (w *Worker) APIAddr() string { return w.api.Addr() }

// GatewayAddr is the bound address of the Zeebe gateway ("" when it is off).
func (w *Worker) GatewayAddr() string { return w.gateway.Addr() }

// API is the worker's API listener (for tests: its TestSignals, its routes).
func (w *Worker) API() *api.Server { return w.api }

// Gateway is the worker's Zeebe gateway (for tests: its TestSignals).
func (w *Worker) Gateway() *zeebe.Gateway { return w.gateway }

// UseCases are the operations every protocol calls (for tests).
func (w *Worker) UseCases() *usecase.UseCases { return w.usecases }

// REST is Camunda's REST API v2 served under /v2.
func (w *Worker) REST() *rest.API { return w.rest }

// Waiters are where the job protocols' fetches wait (for tests: their
// TestSignals).
func (w *Worker) Waiters() *taskwait.Waiters { return w.waiters }

// Tasks is the worker's task API (for tests: its TestSignals).
func (w *Worker) Tasks() *tasks.API { return w.tasks }

// Timers is the worker's timer poller (for tests: its TestSignals).
func (w *Worker) Timers() *timers.Poller { return w.timers }

// Consumer is the worker's relay consumer (for tests: its TestSignals).
func (w *Worker) Consumer() *consumer.Consumer { return w.consumer }

// Broker is the worker's broker connection owner (for tests: its TestSignals).
func (w *Worker) Broker() *broker.Owner { return w.broker }

// Sweeper is the worker's sweeper (for tests: its TestSignals).
func (w *Worker) Sweeper() *sweeper.Sweeper { return w.sweeper }

// Handoff is the worker's fast path of task outcomes (for tests: its
// TestSignals).
func (w *Worker) Handoff() *consumer.Handoff { return w.handoff }

// Outbox is the worker's outbox publisher (for tests: its TestSignals).
func (w *Worker) Outbox() *outbox.Publisher { return w.outbox }

// Ready reports whether the database answers and takes writes without
// holding them for a missing synchronous standby, both broker connections
// are open and not blocked by the broker, relays are consumed, the lanes
// run and the replica registration is valid. The
// outbox publisher does not count: rows wait while it cannot publish, and
// relays may still be applied meanwhile.
func (w *Worker) Ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := w.broker.Ready(); err != nil { // not connected, or blocked by the broker
		return err
	}
	switch {
	case !w.lanes.Running():
		return errors.New("lanes not running")
	case !w.consumer.Connected():
		return errors.New("not consuming relays")
	}
	// The database first: during its failover the replica's registration
	// lapses too, and the database is what the operator must look at.
	if err := w.store.Ping(ctx); errors.Is(err, store.ErrReadOnly) {
		return notReady{reason: "the database is read-only", cause: err}
	} else if err != nil {
		return notReady{reason: "the database is unreachable", cause: err}
	}
	if err := w.durability.blocked(); err != nil {
		return err
	}
	return w.replica.Valid()
}

// notReady is a reason /readyz gives in a few words; the cause (a driver's
// error, with addresses and server messages) stays behind Unwrap, out of an
// answer that whoever reaches the port reads.
type notReady struct {
	reason string
	cause  error
}

func (e notReady) Error() string { return e.reason }
func (e notReady) Unwrap() error { return e.cause }

// Lost is closed when another process took this worker's replica id over:
// the worker must stop (cmd/worker exits non-zero).
func (w *Worker) Lost() <-chan struct{} { return w.replica.Lost() }

func (w *Worker) serveHTTP() error {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(w.opt.Registry, promhttp.HandlerOpts{}))
	// /healthz names the replica, so that a caller can tell this process
	// from another one listening where it expected this one.
	mux.HandleFunc("GET /healthz", func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(rw, "{\"status\":\"ok\",\"replica\":%q}\n", w.cfg.ReplicaID)
	})
	mux.HandleFunc("GET /readyz", func(rw http.ResponseWriter, r *http.Request) {
		if err := w.Ready(r.Context()); err != nil {
			http.Error(rw, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(rw, "ready")
		fmt.Fprintln(rw, "database:", w.durability.detail())
	})
	ln, err := net.Listen("tcp", w.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", w.cfg.HTTPAddr, err)
	}
	w.listener = ln
	w.http = newHTTPServer(mux)
	if w.opt.Listening != nil {
		w.opt.Listening(ln.Addr().String())
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		if err := w.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			w.opt.Logger.Error("http server", "err", err)
		}
	}()
	return nil
}

// newHTTPServer serves /metrics, /healthz and /readyz. Each request and
// each idle connection is bounded in time: a client that sends slowly or
// keeps connections open cannot pile up goroutines and descriptors.
func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute}
}

// Stop shuts down within the deadline ctx carries, in two phases: at once
// the consumer stops consuming and the poller stops taking timers, while
// every step in flight commits or releases its claim, relays are acked or
// requeued and timer fires answered; at the deadline, steps still running
// are cancelled (they release their claims within startstop.Grace) and
// whatever is unanswered is left to the broker (redelivered) and to the
// other replicas' pollers (leases handed back). Then the broker connection
// is closed, the replica registration and the sweeper lease are given up and
// the pool closed. It
// returns after at most the deadline plus about 2 × startstop.Grace; its
// error says what had to be cut short. Safe to call twice.
func (w *Worker) Stop(ctx context.Context) error {
	w.stopOnce.Do(func() {
		var errs []error
		httpStop := serviceFunc(func(ctx context.Context) error {
			if w.http == nil {
				return nil
			}
			err := w.http.Shutdown(ctx)
			w.wg.Wait()
			return err
		})
		// Order does not matter between these: lanes keep running until
		// every resume they accepted is answered, the consumer and the
		// poller keep answering until theirs are, and the outbox publisher
		// finishes its batch. Rows committed meanwhile wait for a replica.
		stopped := startstop.StopAllParallel(ctx, w.consumer, w.timers, w.lanes, w.sweeper, w.outbox, w.migrations, w.batches, w.api, w.gateway, w.waiters, w.ends, w.durability, httpStop,
			w.contracts)
		// Everything that publishes or consumes has stopped: the connection
		// may close (a relay still unanswered is redelivered elsewhere).
		bctx, cancel := startstop.FinalContext(ctx)
		errs = append(errs, stopped, w.broker.Stop(bctx))
		cancel()
		// No step runs any more: the replica id may go. If a step was
		// abandoned still running, the id stays registered until its lease
		// lapses, so that no other process claims as this one meanwhile.
		if !errors.Is(stopped, startstop.ErrAbandoned) {
			fctx, cancel := startstop.FinalContext(ctx)
			errs = append(errs, w.replica.Stop(fctx))
			cancel()
			w.store.Close() // waits for connections in use: not with a step abandoned
		}
		w.stopErr = errors.Join(errs...)
		if w.stopErr != nil {
			w.log.Warn("stop cut short at its deadline", "err", w.stopErr)
		}
	})
	return w.stopErr
}

// lanesDispatcher hands the API's admin steps and the fast path's relays to
// the lanes, which exist only once the API is built.
type lanesDispatcher struct{ w *Worker }

func (d lanesDispatcher) Dispatch(r lanes.Resume) { d.w.lanes.Dispatch(r) }

// serviceFunc is a stop-only service.
type serviceFunc func(ctx context.Context) error

func (f serviceFunc) Start(context.Context) error    { return nil }
func (f serviceFunc) Stop(ctx context.Context) error { return f(ctx) }

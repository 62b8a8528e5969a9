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

	"github.com/sutra-run/worker/consumer"
	"github.com/sutra-run/worker/lanes"
	"github.com/sutra-run/worker/metrics"
	"github.com/sutra-run/worker/store"
	"github.com/sutra-run/worker/sweeper"
	"github.com/sutra-run/worker/timers"
)

// Options are what a test may inject into a worker besides Config.
type Options struct {
	Logger   *slog.Logger
	Registry *prometheus.Registry
	Hooks    *lanes.Hooks
	// Listening, when set, receives the HTTP listener's address once bound.
	Listening func(addr string)
}

// Worker is a running worker.
type Worker struct {
	cfg      Config
	opt      Options
	store    *store.Store
	lanes    *lanes.Pool
	timers   *timers.Poller
	sweeper  *sweeper.Sweeper
	consumer *consumer.Consumer
	http     *http.Server
	listener net.Listener
	metrics  *metrics.Metrics
	wg       sync.WaitGroup
}

// Start connects to PostgreSQL (migrating first when cfg.Migrate), starts the
// lanes, the timer poller, the sweeper, the consumer and the HTTP listener.
func Start(ctx context.Context, cfg Config, opt Options) (*Worker, error) {
	if cfg.ReplicaID == "" {
		cfg.ReplicaID = defaultReplicaID()
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
	log := opt.Logger.With("replica", cfg.ReplicaID)
	st, err := OpenStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	w := &Worker{cfg: cfg, opt: opt, store: st, metrics: metrics.New(opt.Registry)}
	inflight := cfg.TimerMaxInFlight
	if inflight <= 0 {
		inflight = timers.DefaultMaxInFlight
	}
	armed := func(due time.Time) { w.timers.Armed(due) }
	w.lanes = lanes.New(lanes.Deps{Store: st, Metrics: w.metrics, Logger: log, Hooks: opt.Hooks, TimerArmed: armed}, lanes.Config{
		// Room for every resume that can be in flight: relays and timer fires.
		Replica: cfg.ReplicaID, Lanes: cfg.Lanes, InboxSize: cfg.Prefetch + inflight + 1,
		ClaimTimeout: cfg.ClaimTimeout, DrainTimeout: cfg.ShutdownTimeout,
	})
	w.timers = timers.New(timers.Deps{Store: st, Lanes: w.lanes, Metrics: w.metrics, Logger: log}, timers.Config{
		Replica: cfg.ReplicaID, PollInterval: cfg.TimerPollInterval, BatchSize: cfg.TimerBatch, MaxInFlight: inflight,
		Lease: cfg.TimerLease, Backoff: cfg.TimerBackoff, BackoffMax: cfg.TimerBackoffMax, DrainTimeout: cfg.ShutdownTimeout,
	})
	w.sweeper = sweeper.New(sweeper.Deps{Store: st, Metrics: w.metrics, Logger: log, DeadLetter: sweeper.AMQPDeadLetters{
		URL: cfg.AMQPURL, Exchange: cfg.DeadExchange, RelayExchange: cfg.RelayExchange, ConnectionName: "sutra-worker/" + cfg.ReplicaID + "/sweeper",
	}}, sweeper.Config{
		Replica: cfg.ReplicaID, Interval: cfg.SweepInterval, LeaseTTL: cfg.LeaseTTL,
		ClaimTimeout: cfg.ClaimTimeout, InboxRetention: cfg.InboxRetention,
	})
	w.consumer = consumer.New(consumer.Deps{Lanes: w.lanes, Metrics: w.metrics, Logger: log}, consumer.Config{
		URL: cfg.AMQPURL, ConnectionName: "sutra-worker/" + cfg.ReplicaID, Exchange: cfg.RelayExchange, Queue: cfg.RelayQueue, BindingKey: cfg.RelayBindingKey,
		DeadExchange: cfg.DeadExchange, DeadQueue: cfg.DeadQueue, QueueType: cfg.QueueType, Prefetch: cfg.Prefetch,
		RequeueBackoff: cfg.RequeueBackoff, RequeueBackoffMax: cfg.RequeueBackoffMax, DrainTimeout: cfg.ShutdownTimeout,
	})
	if err := w.serveHTTP(); err != nil {
		st.Close()
		return nil, err
	}
	if err := w.lanes.Start(ctx); err != nil {
		w.Stop()
		return nil, err
	}
	if err := w.timers.Start(ctx); err != nil {
		w.Stop()
		return nil, err
	}
	if err := w.sweeper.Start(ctx); err != nil {
		w.Stop()
		return nil, err
	}
	if err := w.consumer.Start(ctx); err != nil {
		w.Stop()
		return nil, err
	}
	log.Info("worker started", "lanes", cfg.Lanes, "prefetch", cfg.Prefetch, "http", w.listener.Addr().String())
	return w, nil
}

// OpenStore opens the database pool, creating the database and applying
// migrations first when cfg.Migrate is set.
func OpenStore(ctx context.Context, cfg Config) (*store.Store, error) {
	if cfg.Migrate {
		if err := store.EnsureDatabase(ctx, cfg.DatabaseURL); err != nil {
			return nil, err
		}
	}
	st, err := store.Open(ctx, cfg.DatabaseURL, store.Options{MaxConns: int32(cfg.Lanes + 4)})
	if err != nil {
		return nil, err
	}
	if cfg.Migrate {
		if err := st.Migrate(ctx); err != nil {
			st.Close()
			return nil, fmt.Errorf("migrating: %w", err)
		}
	}
	return st, nil
}

// Store is the worker's store (for tests and tools).
func (w *Worker) Store() *store.Store { return w.store }

// Lanes is the worker's lane pool.
func (w *Worker) Lanes() *lanes.Pool { return w.lanes }

// Ready reports whether the database answers, the broker is connected and
// the lanes run.
func (w *Worker) Ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	switch {
	case !w.lanes.Running():
		return errors.New("lanes not running")
	case !w.consumer.Connected():
		return errors.New("broker not connected")
	}
	return w.store.Ping(ctx)
}

func (w *Worker) serveHTTP() error {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(w.opt.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(rw http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(rw, "ok")
	})
	mux.HandleFunc("GET /readyz", func(rw http.ResponseWriter, r *http.Request) {
		if err := w.Ready(r.Context()); err != nil {
			http.Error(rw, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(rw, "ready")
	})
	ln, err := net.Listen("tcp", w.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", w.cfg.HTTPAddr, err)
	}
	w.listener = ln
	w.http = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
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

// Stop shuts down in two phases: stop consuming relays and taking timers,
// and let in-flight steps commit or release (bounded by ShutdownTimeout),
// then close. Unanswered relays are redelivered by the broker, timers not
// fired are handed back to the other replicas' pollers, the sweeper lease is
// released; no claim is left held.
func (w *Worker) Stop() {
	// The poller drains its fires while the lanes still run.
	w.timers.Stop()
	w.consumer.Stop()
	w.lanes.Stop()
	w.sweeper.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = w.http.Shutdown(ctx)
	w.wg.Wait()
	w.store.Close()
}

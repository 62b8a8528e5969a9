// Command load is `make bench`: the throughput benchmark of the worker on
// this machine. For each lane count it starts a worker in-process on a fresh
// schema holding K started instances and fresh broker names, publishes ping
// relays as fast as the broker confirms them, and measures steps/s and
// publish→commit latency. In the same run it measures the same SQL run by
// pgbench (the ceiling), the batched protocol's SQL by pgbench (the batch
// ceiling) and by a plain consumer with K goroutines, no lanes and no engine
// (the baseline); then the fastest lane count at fixed rates (latency), on
// seeded tables (-data), the outbox and the task round trip; and prints the
// tables and the ratios of the targets. -plans writes the hot statements'
// plans instead. See BENCHMARKS.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/internal/loadgen"
	"github.com/sutra-run/worker/metrics"
	"github.com/sutra-run/worker/store"
	"github.com/sutra-run/worker/tools/bench"
	"github.com/sutra-run/worker/tools/bench/baseline"
)

type options struct {
	db, amqp       string
	lanes          []int
	instances      int
	relays         int
	prefetch       int
	batchMax       int
	batchWait      time.Duration
	pgbenchClients []int
	pgbenchTime    time.Duration
	baselineConns  int
	syncClaims     bool
	profileDir     string
	quietWait      time.Duration
	repeat         int
	baseline       bool
	ceilingScript  string
	// batchSize is N of the batch ceiling (0: not measured); batchScript
	// replaces bench/batch.sql when set.
	batchSize   int
	batchScript string
	outboxLanes int
	outboxLoads []float64
	taskLanes   int
	taskWorkers int
	taskLoads   []float64
	taskRates   []int
	// jobLanes and jobWorkers configure the job round trip over the Zeebe
	// gateway (0 lanes: skip it).
	jobLanes   int
	jobWorkers int
	// latencyLoads are the fixed rates, as fractions of the baseline's peak
	// steps/s, of the latency measurement; each lasts latencyTime.
	latencyLoads []float64
	latencyTime  time.Duration
	// data are the data sets (bench.DataSets) the best lane count is
	// measured on besides the small table.
	data []string
	// plansDir, when set, makes the program write the hot statements'
	// plans on the large data set there and do nothing else.
	plansDir string
}

func main() {
	var o options
	var lanesFlag, clientsFlag string
	flag.StringVar(&o.db, "db", envOr("SUTRA_BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/sutra_bench"),
		"PostgreSQL URL of the benchmark database (created if missing; each run uses a fresh schema in it)")
	flag.StringVar(&o.amqp, "amqp", envOr("SUTRA_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/"), "RabbitMQ URL")
	flag.StringVar(&lanesFlag, "lanes", "1,2,4,16,64", "lane counts to measure the worker at (empty: none)")
	flag.IntVar(&o.instances, "instances", 256, "K: instances started before each run; also the baseline's goroutines")
	flag.IntVar(&o.relays, "relays", 12000, "ping relays published per worker or baseline run")
	flag.IntVar(&o.prefetch, "prefetch", 256, "the worker's AMQP prefetch (SUTRA_PREFETCH)")
	flag.IntVar(&o.batchMax, "batch-max", 0, "the worker's SUTRA_BATCH_MAX (0: its default; 1: one step per transaction)")
	flag.DurationVar(&o.batchWait, "batch-wait", 2*time.Millisecond, "the worker's SUTRA_BATCH_WAIT (its default 2ms; 0: never wait)")
	flag.StringVar(&clientsFlag, "pgbench-clients", "1,4,16,64", "pgbench client counts; the best is the ceiling (empty: no pgbench)")
	flag.StringVar(&o.ceilingScript, "ceiling-script", "", "pgbench script to run instead of bench/ceiling.sql (to measure a change to the SQL)")
	flag.IntVar(&o.batchSize, "batch-size", 16, "N of the batch ceiling: pgbench of bench/batch.sql, N steps a transaction, at the -pgbench-clients C with C*N <= K (0: skip it)")
	flag.StringVar(&o.batchScript, "batch-script", "", "pgbench script to run instead of bench/batch.sql")
	flag.DurationVar(&o.pgbenchTime, "pgbench-time", 10*time.Second, "duration of each pgbench run")
	flag.BoolVar(&o.baseline, "baseline", true, "measure the baseline")
	flag.IntVar(&o.baselineConns, "baseline-conns", 64, "database connections of the baseline's pool")
	flag.BoolVar(&o.syncClaims, "sync-claims", true, "also measure the best worker, the baseline and the ceiling with synchronous claims")
	flag.StringVar(&o.profileDir, "profile", "", "write a CPU profile of each worker, baseline and task run into this directory")
	flag.DurationVar(&o.quietWait, "quiet-wait", 5*time.Second, "how long each run waits for other programs to leave the CPU idle")
	flag.IntVar(&o.repeat, "repeat", 1, "measure everything this many times and keep the fastest run of each")
	flag.IntVar(&o.outboxLanes, "outbox-lanes", 16, "lanes of the outbox measurement: steps that each write an outbox message (0: skip it)")
	var loadsFlag, taskLoadsFlag, taskRatesFlag string
	flag.StringVar(&loadsFlag, "outbox-loads", "1,0.75,0.5", "loads of the outbox measurement: 1 (full) first, then fractions of its step rate")
	flag.IntVar(&o.taskLanes, "task-lanes", 16, "lanes of the task round trip measurement (0: skip it)")
	flag.IntVar(&o.taskWorkers, "task-workers", 16, "concurrent task workers of the task round trip")
	flag.StringVar(&taskLoadsFlag, "task-loads", "1,0.5", "loads of the task round trip: 1 (full) first, then fractions of its task rate")
	flag.StringVar(&taskRatesFlag, "task-rates", "100", "fixed task rates (tasks/s) of the task round trip, after its loads (empty: none)")
	flag.IntVar(&o.jobLanes, "job-lanes", 16, "lanes of the job round trip over the Zeebe gateway (0: skip it)")
	flag.IntVar(&o.jobWorkers, "job-workers", 16, "Go client job workers (streamed activation) of the job round trip")
	var latencyFlag, dataFlag string
	flag.StringVar(&latencyFlag, "latency-loads", "0.5,0.25", "fixed rates of the latency measurement, worker and baseline side by side, as fractions of the baseline's peak steps/s (of the best lane count's without -baseline; empty: skip it)")
	flag.DurationVar(&o.latencyTime, "latency-time", 5*time.Second, "duration of each fixed-rate run (at least 1000 relays, for p999)")
	flag.StringVar(&dataFlag, "data", "", "data sets to measure the best lane count on besides the small table: large, large-2k, 1m, 10m (make bench-data)")
	flag.StringVar(&o.plansDir, "plans", "", "write the generic plan of every hot statement on the large data set into this directory (tools/bench/plans), and on a new schema into its subdirectory new, and exit")
	flag.Parse()
	var err error
	if o.lanes, err = ints(lanesFlag); err == nil && o.repeat < 1 {
		err = fmt.Errorf("-repeat %d: measure at least once", o.repeat)
	}
	if err == nil {
		o.pgbenchClients, err = ints(clientsFlag)
	}
	if err == nil {
		o.outboxLoads, err = loads(loadsFlag)
	}
	if err == nil {
		o.taskLoads, err = loads(taskLoadsFlag)
	}
	if err == nil {
		o.taskRates, err = ints(taskRatesFlag)
	}
	if err == nil {
		o.latencyLoads, err = fractions(latencyFlag)
	}
	if err == nil {
		o.data, err = dataSets(dataFlag)
	}
	if err == nil {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		err = run(ctx, o)
		stop()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// ints parses a list of counts; an empty list skips what it counts.
func ints(s string) ([]int, error) {
	var out []int
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a list of positive counts", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// loads parses the outbox loads: 1 first, then fractions of it.
func loads(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		x, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || x <= 0 || x > 1 || len(out) == 0 && x != 1 {
			return nil, fmt.Errorf("loads %q: 1 first, then fractions of it", s)
		}
		out = append(out, x)
	}
	return out, nil
}

// fractions parses the latency loads: fractions of the full rate, in (0, 1].
func fractions(s string) ([]float64, error) {
	var out []float64
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	for _, f := range strings.Split(s, ",") {
		x, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || x <= 0 || x > 1 {
			return nil, fmt.Errorf("%q is not a list of fractions in (0, 1]", s)
		}
		out = append(out, x)
	}
	return out, nil
}

// dataSets parses the data sets to measure besides the small table.
func dataSets(s string) ([]string, error) {
	var out []string
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if _, ok := bench.DataSets[f]; !ok || f == "small" {
			return nil, fmt.Errorf("-data %q: the data sets are large, large-2k, 1m and 10m", s)
		}
		out = append(out, f)
	}
	return out, nil
}

// result is one measured run.
type result struct {
	// kind is worker, baseline or pgbench; fixed is the worker at a fixed
	// rate (load of the best lane count's steps/s), data the worker on the
	// data set named data.
	kind  string
	load  float64
	rate  float64 // relays/s offered by a fixed-rate run
	batch int     // N of a batch ceiling run
	data  string
	// conc is the concurrency: lanes, goroutines or pgbench clients.
	conc       int
	syncClaims bool
	steps      int
	perSecond  float64
	// p50 and p99 are publish→commit latencies (none for pgbench, which has
	// no broker: its clients run back to back).
	p50, p99, p999 time.Duration
	requeued       int64
	// churn is what the worker's steps left in the tables and the WAL.
	churn churn
	cpu   cpuUse
	round int
	// api are the console's /v1 answer times on a data run (api.go).
	api []apiTiming
}

func run(ctx context.Context, o options) error {
	if err := store.EnsureDatabase(ctx, o.db); err != nil {
		return err
	}
	script, batchScript := o.ceilingScript, o.batchScript
	for _, s := range []struct {
		path    *string
		content []byte
	}{{&script, bench.CeilingScript}, {&batchScript, bench.BatchScript}} {
		if *s.path != "" {
			continue
		}
		f, err := os.CreateTemp("", "sutra-pgbench-*.sql")
		if err != nil {
			return err
		}
		defer os.Remove(f.Name())
		if _, err := f.Write(s.content); err != nil {
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		*s.path = f.Name()
	}
	dbCfg, err := pgx.ParseConfig(o.db)
	if err != nil {
		return err
	}
	b := &bencher{o: o, dbName: dbCfg.Database, script: script, batchScript: batchScript,
		log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if o.plansDir != "" {
		return b.writePlans(ctx, o.plansDir)
	}
	fmt.Printf("K=%d instances, %d relays per run, pgbench %v per run, %d cores\n", o.instances, o.relays, o.pgbenchTime, runtime.NumCPU())

	for b.round = range o.repeat {
		if o.repeat > 1 {
			fmt.Fprintf(os.Stderr, "round %d of %d\n", b.round+1, o.repeat)
		}
		if err := b.measureAll(ctx); err != nil {
			return err
		}
	}
	fmt.Println()
	report(os.Stdout, b.results, o.repeat)
	reportLatency(os.Stdout, b.results, o.latencyTime)
	reportData(os.Stdout, b.results)
	reportAPI(os.Stdout, b.results)
	reportChurn(os.Stdout, b.results)
	reportOutbox(os.Stdout, b.outboxRuns, o.outboxLanes)
	reportTasks(os.Stdout, b.taskRuns, o.taskLanes)
	reportJobs(os.Stdout, b.jobRuns, b.idleRuns, fastestSteps(b.results), o.jobLanes, o.jobWorkers)
	return nil
}

// measureAll measures every configuration once: the lane counts, the
// baseline and the ceiling's client counts, then the same with synchronous
// claims at the first round's fastest lane and client counts, then the
// outbox.
func (b *bencher) measureAll(ctx context.Context) error {
	if err := b.measureSteps(ctx); err != nil {
		return err
	}
	if err := b.measureLatency(ctx); err != nil {
		return err
	}
	if err := b.measureData(ctx); err != nil {
		return err
	}
	if b.o.outboxLanes > 0 {
		if err := b.measureOutbox(ctx); err != nil {
			return err
		}
	}
	if b.o.taskLanes > 0 {
		if err := b.measureTasks(ctx); err != nil {
			return err
		}
	}
	if b.o.jobLanes > 0 {
		return b.measureJobs(ctx)
	}
	return nil
}

// measureSteps measures the step rate of every configuration.
func (b *bencher) measureSteps(ctx context.Context) error {
	o := b.o
	for _, n := range o.lanes {
		if err := b.measure(b.worker(ctx, n, false)); err != nil {
			return fmt.Errorf("worker with %d lanes: %w", n, err)
		}
	}
	if o.baseline {
		if err := b.measure(b.baseline(ctx, false)); err != nil {
			return fmt.Errorf("baseline: %w", err)
		}
	}
	for _, c := range o.pgbenchClients {
		if err := b.measure(b.pgbench(ctx, c, false)); err != nil {
			return fmt.Errorf("pgbench with %d clients: %w", c, err)
		}
	}
	for _, c := range o.pgbenchClients {
		if o.batchSize == 0 || c*o.batchSize > o.instances {
			continue
		}
		if err := b.measure(b.pgbenchRun(ctx, c, false, b.batchScript, o.batchSize)); err != nil {
			return fmt.Errorf("batch pgbench with %d clients: %w", c, err)
		}
	}
	if o.batchSize > 0 && len(o.lanes) > 0 {
		if err := b.measure(b.brokerFloor(ctx)); err != nil {
			return fmt.Errorf("broker floor: %w", err)
		}
	}
	if !o.syncClaims {
		return nil
	}
	// Every round compares at the concurrencies fastest in the first, so that
	// the rounds measure the same pairs.
	if b.round == 0 {
		b.syncLanes, b.syncClients = bestOf(b.results, "worker").conc, bestOf(b.results, "pgbench").conc
	}
	if b.syncLanes > 0 {
		if err := b.measure(b.worker(ctx, b.syncLanes, true)); err != nil {
			return fmt.Errorf("worker with synchronous claims: %w", err)
		}
	}
	if o.baseline {
		if err := b.measure(b.baseline(ctx, true)); err != nil {
			return fmt.Errorf("baseline with synchronous claims: %w", err)
		}
	}
	if b.syncClients > 0 {
		if err := b.measure(b.pgbench(ctx, b.syncClients, true)); err != nil {
			return fmt.Errorf("pgbench with synchronous claims: %w", err)
		}
	}
	return nil
}

// best keeps the fastest run of each configuration: on a shared machine
// other programs only ever slow a run down, so the fastest of several is the
// closest to what this machine does.
func best(rs []result) []result {
	var out []result
	for _, r := range rs {
		i := slices.IndexFunc(out, func(o result) bool {
			return o.kind == r.kind && o.conc == r.conc && o.syncClaims == r.syncClaims && o.load == r.load && o.data == r.data
		})
		switch {
		case i < 0:
			out = append(out, r)
		case r.perSecond > out[i].perSecond:
			out[i] = r
		}
	}
	return out
}

type bencher struct {
	o      options
	dbName string
	// script and batchScript are the pgbench scripts of the ceiling and the
	// batch ceiling.
	script, batchScript string
	log                 *slog.Logger
	// results are every run so far; round counts the rounds from 0.
	results []result
	round   int
	// syncLanes and syncClients are the worker's and pgbench's concurrency
	// measured with synchronous claims.
	syncLanes, syncClients int
	// outboxRuns, taskRuns and jobRuns are every outbox, task and job round trip
	// measurement so far.
	outboxRuns []outboxRun
	taskRuns   []taskRun
	jobRuns    []jobRun
	idleRuns   []idleRun
}

// measure records a run and shows it at once.
func (b *bencher) measure(r result, err error) error {
	if err != nil {
		return err
	}
	r.round = b.round
	fmt.Fprintf(os.Stderr, "  %s\n", r.row())
	b.results = append(b.results, r)
	return nil
}

// worker measures the worker with n lanes. Asynchronous claims are the
// worker as app.Start wires it; synchronous ones need the same wiring by
// hand, since app.Config has no knob for store.Options.SyncClaims.
func (b *bencher) worker(ctx context.Context, n int, syncClaims bool) (result, error) {
	return b.workerRun(ctx, workerSpec{lanes: n, syncClaims: syncClaims, relays: b.o.relays})
}

// workerSpec is one worker run: lanes, claims, the data in the tables
// (a bench.DataSets name; "" the K instances only), and the relays, published
// at rate a second (0: as fast as the broker confirms them) after warm
// relays at the same rate that are not timed.
type workerSpec struct {
	lanes      int
	syncClaims bool
	data       string
	rate       float64
	relays     int
	warm       int
}

func (b *bencher) workerRun(ctx context.Context, s workerSpec) (result, error) {
	n, syncClaims := s.lanes, s.syncClaims
	label := fmt.Sprintf("worker%d", n)
	if s.data != "" {
		label += "_" + strings.ReplaceAll(s.data, "-", "_")
	}
	env, err := b.env(ctx, label, bench.ProcessXML)
	if err != nil {
		return result{}, err
	}
	defer env.Close()
	if s.data != "" {
		began := time.Now()
		if err := env.Seed(ctx, bench.DataSets[s.data]); err != nil {
			return result{}, err
		}
		fmt.Fprintf(os.Stderr, "  seeded %s (%s) in %v\n", s.data, bench.DataSets[s.data], time.Since(began).Round(time.Second))
	}
	db, err := pgxpool.New(ctx, env.Config.Database.URL)
	if err != nil {
		return result{}, err
	}
	defer db.Close()
	before, err := readChurn(ctx, db, env.Schema)
	if err != nil {
		return result{}, err
	}
	w, reg, stop, err := b.startWorker(ctx, env, n, syncClaims)
	if err != nil {
		return result{}, err
	}
	defer stop()
	ready := func() bool { return w.Ready(ctx) == nil }
	committed := func() int64 { return int64(counter(reg, "sutra_relays_total", metrics.OutcomeCommitted)) }
	name := runName(fmt.Sprintf("worker-%d", n), syncClaims)
	if s.data != "" {
		name += "-" + s.data
	}
	if s.rate > 0 {
		name += fmt.Sprintf("-at-%.0f", s.rate)
	}
	r, err := b.drive(ctx, env, name, ready, committed, s)
	r.kind, r.conc, r.syncClaims, r.data = "worker", n, syncClaims, s.data
	r.requeued = int64(counter(reg, "sutra_relays_total", metrics.OutcomeRequeued))
	if err != nil {
		return r, err
	}
	if s.data != "" {
		if r.api, err = measureAPI(ctx, w.APIAddr(), bench.DataSets[s.data]); err != nil {
			return r, err
		}
	}
	// The worker's backends report their table statistics when they exit.
	stop()
	r.churn, err = settledChurn(ctx, db, env.Schema, before, r.churn, int64(s.warm+r.steps))
	return r, err
}

// startWorker starts a worker on env's schema and broker names with lanes
// lanes and the run's prefetch, batch size and batch wait; stop stops it (once, however
// often it is called).
func (b *bencher) startWorker(ctx context.Context, env *bench.Env, lanes int, syncClaims bool) (*app.Worker, *prometheus.Registry, func(), error) {
	cfg := env.Config
	cfg.Lanes.Count, cfg.Prefetch, cfg.BatchMax, cfg.BatchWait = lanes, b.o.prefetch, b.o.batchMax, b.o.batchWait
	cfg.AdminToken = adminToken // the admin API of measureAPI
	reg := prometheus.NewRegistry()
	w, err := app.Start(ctx, cfg, app.Options{Logger: b.log, Registry: reg, SyncClaims: syncClaims})
	if err != nil {
		return nil, nil, nil, err
	}
	stop := sync.OnceFunc(func() {
		sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
		defer cancel()
		_ = w.Stop(sctx)
	})
	return w, reg, stop, nil
}

// waitReady waits up to 30 s for w to be ready.
func waitReady(ctx context.Context, w *app.Worker, what string) error {
	for deadline := time.Now().Add(30 * time.Second); w.Ready(ctx) != nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after 30s", what)
		}
	}
	return nil
}

// runName names a run in messages and profile files.
func runName(name string, syncClaims bool) string {
	if syncClaims {
		return name + "-sync"
	}
	return name
}

// baseline measures the plain consumer with K goroutines.
func (b *bencher) baseline(ctx context.Context, syncClaims bool) (result, error) {
	return b.baselineRun(ctx, syncClaims, workerSpec{relays: b.o.relays})
}

// baselineRun measures the plain consumer with K goroutines on s's relays,
// rate and warm-up.
func (b *bencher) baselineRun(ctx context.Context, syncClaims bool, s workerSpec) (result, error) {
	env, err := b.env(ctx, "baseline", bench.ProcessXML)
	if err != nil {
		return result{}, err
	}
	defer env.Close()
	c, err := baseline.Start(ctx, baseline.Config{
		DatabaseURL: env.Config.Database.URL, AMQPURL: env.Config.Broker.URL, Queue: env.Config.RelayQueue,
		Workers: b.o.instances, Conns: int32(b.o.baselineConns), SyncClaims: syncClaims,
	})
	if err != nil {
		return result{}, err
	}
	defer c.Stop()
	name := runName("baseline", syncClaims)
	if s.rate > 0 {
		name += fmt.Sprintf("-at-%.0f", s.rate)
	}
	r, err := b.drive(ctx, env, name, func() bool { return true }, c.Committed, s)
	r.kind, r.conc, r.syncClaims, r.requeued = "baseline", b.o.instances, syncClaims, c.Requeued()
	return r, err
}

// env prepares a run's schema, instances of process and queues.
func (b *bencher) env(ctx context.Context, label string, process []byte) (*bench.Env, error) {
	return b.envOf(ctx, label, process, b.o.instances)
}

// envOf is env with k instances started.
func (b *bencher) envOf(ctx context.Context, label string, process []byte, k int) (*bench.Env, error) {
	env, err := bench.NewEnv(ctx, b.o.db, b.o.amqp, label, k, process)
	if err != nil {
		return nil, fmt.Errorf("preparing %s: %w", label, err)
	}
	if err := env.DeclareQueues(); err != nil {
		env.Close()
		return nil, err
	}
	return env, nil
}

// drive publishes the run's relays once the consumer is ready (at s.rate,
// after s.warm untimed relays), waits until all are committed, and reads the
// latencies from the inbox and the WAL written. Only this part is timed (and
// profiled).
func (b *bencher) drive(ctx context.Context, env *bench.Env, name string, ready func() bool, committed func() int64, s workerSpec) (result, error) {
	deadline := time.Now().Add(30 * time.Second)
	for !ready() {
		if time.Now().After(deadline) {
			return result{}, fmt.Errorf("%s not ready after 30s", name)
		}
		time.Sleep(20 * time.Millisecond)
	}
	pub, err := loadgen.Dial(env.Config.Broker.URL, env.Config.RelayExchange)
	if err != nil {
		return result{}, err
	}
	defer pub.Close()
	db, err := pgxpool.New(ctx, env.Config.Database.URL)
	if err != nil {
		return result{}, err
	}
	defer db.Close()
	if s.warm > 0 {
		// Warm up (the pool's connections, the broker's channels, the plans)
		// at the run's rate, so that latency measures the steady state.
		warm := env.Pings(s.warm)
		for i := range warm {
			warm[i].ID = "warm-" + strconv.Itoa(i)
		}
		if err := pub.PublishAt(ctx, warm, s.rate); err != nil {
			return result{}, err
		}
		for deadline := time.Now().Add(time.Minute); committed() < int64(len(warm)); time.Sleep(10 * time.Millisecond) {
			if err := ctx.Err(); err != nil {
				return result{}, err
			}
			if time.Now().After(deadline) {
				return result{}, fmt.Errorf("%s: %d of %d warm-up relays committed after a minute", name, committed(), len(warm))
			}
		}
	}
	relays := env.Pings(s.relays)
	b.waitQuiet(ctx, name)
	stopProfile, err := b.profile(name)
	if err != nil {
		return result{}, err
	}
	wal0, err := walLSN(ctx, db)
	if err != nil {
		return result{}, err
	}
	cpu := startCPU(b.dbName)
	published := make(chan error, 1)
	go func() { published <- pub.PublishAt(ctx, relays, s.rate) }()
	err = waitCommitted(ctx, int64(s.warm+len(relays)), committed, published)
	use := cpu.finish()
	stopProfile()
	if err != nil {
		return result{}, err
	}
	wal1, err := walLSN(ctx, db)
	if err != nil {
		return result{}, err
	}
	stats, err := loadgen.Measure(ctx, db, bench.PingPrefix)
	if err != nil {
		return result{}, err
	}
	if stats.Committed != len(relays) {
		return result{}, fmt.Errorf("%d relays in the inbox, %d published", stats.Committed, len(relays))
	}
	return result{steps: stats.Committed, perSecond: stats.StepsPerS, p50: stats.P50, p99: stats.P99, p999: stats.P999, cpu: use,
		churn: churn{walBytes: wal1 - wal0}}, nil
}

// waitCommitted waits until want relays are committed, the publisher fails,
// or progress stops for a minute. It returns after the publisher is done.
func waitCommitted(ctx context.Context, want int64, committed func() int64, published chan error) error {
	var pubErr error
	pubDone := false
	last, lastChange := int64(-1), time.Now()
	for {
		n := committed()
		switch {
		case n >= want && pubDone:
			return pubErr
		case n != last:
			last, lastChange = n, time.Now()
		case time.Since(lastChange) > time.Minute:
			return fmt.Errorf("stuck at %d of %d relays committed", n, want)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case pubErr = <-published:
			pubDone = true
			if pubErr != nil {
				return fmt.Errorf("publishing: %w", pubErr)
			}
			published = nil
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitQuiet lets other programs' bursts pass before a run, within reason.
func (b *bencher) waitQuiet(ctx context.Context, name string) {
	if !waitQuiet(ctx, b.dbName, b.o.quietWait) {
		fmt.Fprintf(os.Stderr, "  %s: other programs keep the CPU busy; measuring anyway\n", name)
	}
}

// profile starts a CPU profile of this process named name when asked to
// (a run's name may hold a slash: "100/s" is written "100 per s").
func (b *bencher) profile(name string) (stop func(), err error) {
	if b.o.profileDir == "" {
		return func() {}, nil
	}
	if err := os.MkdirAll(b.o.profileDir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(b.o.profileDir, strings.ReplaceAll(name, "/", " per ")+".pprof"))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

var tpsLine = regexp.MustCompile(`(?m)^tps = ([0-9.]+) \(without initial connection time\)`)
var processedLine = regexp.MustCompile(`(?m)^number of transactions actually processed: ([0-9]+)`)

// pgbench measures the ceiling with c clients on a fresh schema holding the
// same K instances. Claims skip the WAL flush as in the worker unless
// syncClaims.
func (b *bencher) pgbench(ctx context.Context, c int, syncClaims bool) (result, error) {
	return b.pgbenchRun(ctx, c, syncClaims, b.script, 0)
}

// pgbenchRun runs script with c clients; batch > 0 is the batch ceiling's N
// (bench/batch.sql): each transaction is N steps.
func (b *bencher) pgbenchRun(ctx context.Context, c int, syncClaims bool, script string, batch int) (result, error) {
	if b.o.instances < c*max(batch, 1) {
		return result{}, fmt.Errorf("%d instances cannot be partitioned over %d clients", b.o.instances, c)
	}
	env, err := bench.NewEnv(ctx, b.o.db, b.o.amqp, fmt.Sprintf("pgbench%d", c), b.o.instances, bench.ProcessXML)
	if err != nil {
		return result{}, err
	}
	defer env.Close()
	cmd := exec.CommandContext(ctx, "pgbench", "-n", "-M", "prepared", "-f", script, "-D", "batch="+strconv.Itoa(max(batch, 1)),
		"-c", strconv.Itoa(c), "-j", strconv.Itoa(min(c, runtime.NumCPU())), "-T", strconv.Itoa(int(b.o.pgbenchTime.Seconds())),
		"-D", "instances="+strconv.Itoa(b.o.instances), "-D", "clients="+strconv.Itoa(c),
		"-D", "timeout="+strconv.Itoa(int(bench.ClaimTimeout.Seconds()))+"s", b.o.db)
	pgopts := "-c search_path=" + env.Schema
	if !syncClaims {
		pgopts += " -c synchronous_commit=off"
	}
	cmd.Env = append(os.Environ(), "PGOPTIONS="+pgopts)
	b.waitQuiet(ctx, fmt.Sprintf("pgbench-%d", c))
	cpu := startCPU(b.dbName)
	out, err := cmd.CombinedOutput()
	use := cpu.finish()
	if err != nil {
		return result{}, fmt.Errorf("%v: %s", err, out)
	}
	tps, processed := tpsLine.FindSubmatch(out), processedLine.FindSubmatch(out)
	if tps == nil || processed == nil {
		return result{}, fmt.Errorf("no tps in pgbench output:\n%s", out)
	}
	r := result{kind: "pgbench", conc: c, syncClaims: syncClaims}
	r.perSecond, _ = strconv.ParseFloat(string(tps[1]), 64)
	r.steps, _ = strconv.Atoi(string(processed[1]))
	if batch > 0 {
		r.kind, r.batch = "batch", batch
		r.perSecond *= float64(batch)
		r.steps *= batch
	}
	// pgbench is the client here. This process only waited and sampled: that
	// is the harness's cost, not the ceiling's, so it leaves the total too.
	use.machine -= use.client
	use.client = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	r.cpu = use
	return r, nil
}

// counter sums the samples of a counter family with a label of value.
func counter(g prometheus.Gatherer, name, value string) float64 {
	families, err := g.Gather()
	if err != nil {
		return 0
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == value {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

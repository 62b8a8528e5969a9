// Command soak is `make soak` (issue 28): the worker binary at its defaults
// drains a backlog first, which gives the machine's drain rate; then relays
// are offered at a fixed rate (SOAK_RATE, in relays a second or as a share of
// that drain rate) for a long time with autovacuum on, and
// every minute the latency from publish to commit, the commit rate, the
// tables' sizes and dead tuples, the WAL rate and the worker's memory and
// goroutines; and every second (seconds.go) the latency, the commits, the
// server's wait events (sampled), checkpoints and autovacuums, the worker's
// GC pauses and lane waits, so that a stall can be traced to its cause. It
// writes a report (report.md), the samples (samples.tsv), the seconds
// (seconds.jsonl) and a plot of p99 and table sizes over time (soak.png)
// into SOAK_OUT, and exits 1 when a target is missed. See BENCHMARKS.md,
// "Soak".
//
// The instances run the benchmark's looping Modeler process (each relay is
// one step: close the subscription, open the next), K of them round-robin;
// the run's schema and broker names are fresh and dropped at the end.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/kelseyhightower/envconfig"

	"github.com/sutra-run/worker/internal/loadgen"
	"github.com/sutra-run/worker/store"
	"github.com/sutra-run/worker/tools/bench"
)

// config is read from SOAK_* variables.
type config struct {
	Rate      rate          `default:"3000" desc:"offered relays per second, or a share of the drain rate measured first (40%)"`
	Duration  time.Duration `default:"20m" desc:"how long relays are offered"`
	Interval  time.Duration `default:"1m" desc:"how often a sample is taken (one row of the report)"`
	Instances int           `default:"1024" desc:"instances the relays go to, round-robin"`
	// CapacityRelays is the backlog the worker drains before the offer: its
	// drain rate, what `make bench` measures, puts the offered rate in
	// proportion to the machine (the report gives the share).
	CapacityRelays int `split_words:"true" default:"30000" desc:"relays of the backlog drained first to measure the drain rate; 0 skips it (SOAK_RATE in relays a second only)"`
	// Data seeds the tables first with a bench.DataSets size ("large": a
	// million instances, a tenth of them waiting), to soak on grown tables.
	Data   string `default:"small" desc:"data set seeded before the run (tools/bench: small, large, large-2k)"`
	Worker string `default:"bin/worker" desc:"the worker binary (make build)"`
	Out    string `default:"bin/soak" desc:"directory of the report, samples and plot"`
	// InboxRetention and HistoryRetention are the worker's settings changed
	// from their defaults: a week of relay ids at 3,000/s is 1.8 billion
	// rows, 72 hours of step history 780 million, so at the defaults no soak
	// shorter than that could show the trims keeping the tables bounded.
	InboxRetention   time.Duration `split_words:"true" default:"2m" desc:"SUTRA_INBOX_RETENTION of the worker"`
	HistoryRetention time.Duration `split_words:"true" default:"2m" desc:"SUTRA_STEP_HISTORY_RETENTION of the worker"`
	DatabaseURL      string        `split_words:"true" default:"postgres://postgres@127.0.0.1:5432/sutra_bench" desc:"server of the run's fresh schema"`
	AMQPURL          string        `envconfig:"AMQP_URL" default:"amqp://guest:guest@127.0.0.1:5672/" desc:"RabbitMQ URL"`
	// Targets (issue 28).
	MaxP99   time.Duration `envconfig:"MAX_P99" default:"50ms" desc:"p99 publish → commit every sample must keep"`
	MaxDrift float64       `envconfig:"MAX_DRIFT" default:"1.5" desc:"the last sample's p99 within this factor of the second's"`
	MaxGrow  float64       `envconfig:"MAX_GROW" default:"1.25" desc:"each table's size and the worker's RSS at the end within this factor of the half-way sample's"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

func run() error {
	var c config
	if err := envconfig.Process("soak", &c); err != nil {
		return err
	}
	if c.Duration < c.Interval || c.Interval <= settle || c.Instances <= 0 || c.CapacityRelays < 0 {
		return fmt.Errorf("SOAK_INSTANCES must be positive, SOAK_CAPACITY_RELAYS not negative, SOAK_INTERVAL over %v and SOAK_DURATION at least SOAK_INTERVAL", settle)
	}
	if c.Rate.share && c.CapacityRelays == 0 {
		return fmt.Errorf("SOAK_RATE %v is a share of the drain rate, which SOAK_CAPACITY_RELAYS=0 does not measure", c.Rate)
	}
	data, ok := bench.DataSets[c.Data]
	if !ok {
		return fmt.Errorf("SOAK_DATA %q is not a data set", c.Data)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := store.EnsureDatabase(ctx, c.DatabaseURL); err != nil {
		return err
	}

	env, err := bench.NewEnv(ctx, c.DatabaseURL, c.AMQPURL, "soak", c.Instances, bench.ProcessXML)
	if err != nil {
		return err
	}
	defer env.Close()
	if err := env.DeclareQueues(); err != nil {
		return err
	}
	if c.Data != "small" {
		began := time.Now()
		if err := env.Seed(ctx, data); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "seeded %s in %v\n", data, time.Since(began).Round(time.Second))
	}
	db, err := pgxpool.New(ctx, env.Config.Database.URL)
	if err != nil {
		return err
	}
	defer db.Close()
	restore, err := autovacuumOn(ctx, db)
	if err != nil {
		return err
	}
	defer restore()

	w, err := startWorker(ctx, c, env)
	if err != nil {
		return err
	}
	defer w.Stop()

	pub, err := loadgen.Dial(c.AMQPURL, env.Config.RelayExchange)
	if err != nil {
		return err
	}
	defer pub.Close()
	var capacity float64
	if c.CapacityRelays > 0 {
		if capacity, err = measureCapacity(ctx, db, pub, env, c.CapacityRelays); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "drained a backlog of %d relays at %.0f relays/s\n", c.CapacityRelays, capacity)
	}
	perSecond := c.Rate.perSecond(capacity)
	s := &sampler{db: db, schema: env.Schema, metrics: "http://" + w.HTTPAddr + "/metrics", prefix: bench.PingPrefix}
	if err := os.MkdirAll(c.Out, 0o755); err != nil {
		return err
	}
	secondsFile, err := os.Create(filepath.Join(c.Out, "seconds.jsonl"))
	if err != nil {
		return err
	}
	defer secondsFile.Close()
	if s.rec, err = newRecorder(ctx, db, env.Schema, s.metrics, secondsFile); err != nil {
		return err
	}
	if err := s.start(ctx); err != nil {
		return err
	}
	s.rec.start(ctx)
	recording := true
	defer func() {
		if recording {
			_ = s.rec.end()
		}
	}()
	total := int(perSecond * c.Duration.Seconds())
	var published atomic.Int64
	pubDone := make(chan error, 1)
	began := time.Now()
	go func() {
		pubDone <- pub.PublishEach(ctx, total, perSecond, func(i int) loadgen.Relay {
			published.Store(int64(i + 1))
			return env.Ping(i)
		})
	}()
	fmt.Fprintf(os.Stderr, "offering %.0f relays/s to %d instances for %v (worker pid %d, schema %s)\n", perSecond, c.Instances, c.Duration, w.Pid(), env.Schema)

	tick := time.NewTicker(c.Interval)
	defer tick.Stop()
	follow := time.NewTicker(time.Second)
	defer follow.Stop()
	var pubErr error
	for offering := true; offering; {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case pubErr = <-pubDone:
			offering = false
			if pubErr != nil {
				return fmt.Errorf("publishing: %w", pubErr)
			}
		case <-w.Exited():
			return fmt.Errorf("the worker exited during the soak: %v", w.Err())
		case <-follow.C:
			if err := s.follow(ctx); err != nil {
				return err
			}
			if err := s.rec.flush(s.read, false); err != nil {
				return err
			}
		case <-tick.C:
			if err := s.sample(ctx, published.Load(), false); err != nil {
				return err
			}
			fmt.Fprintln(os.Stderr, s.samples[len(s.samples)-1].line())
		}
	}
	// Drain: every offered relay committed, or a minute without progress.
	offerEnded := time.Now()
	if err := s.drain(ctx, int64(total), time.Minute); err != nil {
		return err
	}
	drained := time.Since(offerEnded)
	if err := s.sample(ctx, int64(total), true); err != nil {
		return err
	}
	elapsed := time.Since(began)
	recording = false
	if err := s.rec.end(); err != nil {
		return err
	}
	if err := s.rec.flush(time.Now(), true); err != nil {
		return err
	}
	w.Stop()

	rep := report{config: c, rate: perSecond, capacity: capacity, samples: s.samples, seconds: s.rec.all, elapsed: elapsed, data: data.String(), offered: total, drained: drained}
	if err := writeFile(filepath.Join(c.Out, "samples.tsv"), rep.writeTSV); err != nil {
		return err
	}
	if err := writePlot(filepath.Join(c.Out, "soak.png"), s.samples, c); err != nil {
		return err
	}
	missed := 0
	if err := writeFile(filepath.Join(c.Out, "report.md"), func(f io.Writer) error {
		var err error
		missed, err = rep.writeMarkdown(f)
		return err
	}); err != nil {
		return err
	}
	body, err := os.ReadFile(filepath.Join(c.Out, "report.md"))
	if err != nil {
		return err
	}
	os.Stdout.Write(body)
	if missed > 0 {
		return fmt.Errorf("%d target(s) missed; see %s", missed, filepath.Join(c.Out, "report.md"))
	}
	return nil
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// startWorker starts the binary at its defaults but for what points it at
// the run's schema and broker names, a free metrics port, no API or gateway
// listener (the soak calls neither; their default ports may be taken), and
// the inbox and step history retentions; and waits until it is ready.
func startWorker(ctx context.Context, c config, env *bench.Env) (*bench.Process, error) {
	httpAddr, err := bench.FreeAddr()
	if err != nil {
		return nil, err
	}
	cfg := env.Config
	return bench.StartProcess(ctx, c.Worker, append(os.Environ(),
		"SUTRA_DATABASE_URL="+cfg.Database.URL, "SUTRA_AMQP_URL="+cfg.Broker.URL, "SUTRA_REPLICA_ID=soak",
		"SUTRA_HTTP_ADDR="+httpAddr, "SUTRA_API_ADDR=", "SUTRA_GATEWAY_ADDR=",
		"SUTRA_RELAY_EXCHANGE="+cfg.RelayExchange, "SUTRA_RELAY_QUEUE="+cfg.RelayQueue,
		"SUTRA_DEAD_EXCHANGE="+cfg.DeadExchange, "SUTRA_DEAD_QUEUE="+cfg.DeadQueue,
		"SUTRA_OUTBOX_EXCHANGE="+cfg.OutboxExchange, "SUTRA_INBOX_RETENTION="+c.InboxRetention.String(),
		"SUTRA_STEP_HISTORY_RETENTION="+c.HistoryRetention.String()), httpAddr)
}

// autovacuumOn turns autovacuum on for the run when the server has it off
// (this machine's CI configuration does), since production runs with it; the
// returned function puts the server's own setting back.
func autovacuumOn(ctx context.Context, db *pgxpool.Pool) (restore func(), err error) {
	var on string
	if err := db.QueryRow(ctx, "SHOW autovacuum").Scan(&on); err != nil {
		return nil, err
	}
	if on == "on" {
		return func() {}, nil
	}
	if _, err := db.Exec(ctx, "ALTER SYSTEM SET autovacuum = on"); err != nil {
		return nil, fmt.Errorf("turning autovacuum on: %w", err)
	}
	if _, err := db.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		return nil, err
	}
	fmt.Fprintln(os.Stderr, "autovacuum was off on the server: on for this run (ALTER SYSTEM), reset after")
	return func() {
		rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := db.Exec(rctx, "ALTER SYSTEM RESET autovacuum"); err == nil {
			_, _ = db.Exec(rctx, "SELECT pg_reload_conf()")
		}
	}, nil
}

package operations

import (
	"context"
	"log/slog"
	"time"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/backoff"
	"github.com/sutra-run/worker/internal/defaults"
	"github.com/sutra-run/worker/internal/startstop"
	"github.com/sutra-run/worker/lanes"
	"github.com/sutra-run/worker/metrics"
	"github.com/sutra-run/worker/store"
)

// Store is what the migration runner needs from the database (*store.Store).
type Store interface {
	LeaseMigration(ctx context.Context, holder string, lease time.Duration) (store.Migration, bool, error)
	DueMigrationItems(ctx context.Context, id string, limit int) ([]string, []int, error)
	SettleMigrationItems(ctx context.Context, id, holder string, outs []store.ItemOutcome) error
	ReleaseMigrations(ctx context.Context, holder string) error
}

// Dispatcher is what the runner needs from the lanes.
type Dispatcher interface {
	Dispatch(lanes.Resume)
}

// RunnerConfig configures the bulk migration runner.
type RunnerConfig struct {
	Replica string
	// Lease keeps a job with this replica (default 30s); another replica
	// resumes it when the lease lapses unrenewed.
	Lease time.Duration
	// PollInterval is how often an idle runner looks for jobs (default 1s).
	PollInterval time.Duration
	// Batch is how many instances one round migrates at once (default 32).
	Batch int
	// Backoff and BackoffMax space the retries of an instance whose claim
	// was held (defaults 200ms, 30s).
	Backoff, BackoffMax time.Duration
}

func (c *RunnerConfig) setDefaults() {
	defaults.Set(&c.Lease, 30*time.Second)
	defaults.Set(&c.PollInterval, time.Second)
	defaults.Set(&c.Batch, 32)
	defaults.Set(&c.Backoff, 200*time.Millisecond)
	defaults.Set(&c.BackoffMax, 30*time.Second)
}

// RunnerDeps are the runner's collaborators.
type RunnerDeps struct {
	Store   Store
	Lanes   Dispatcher
	Metrics *metrics.Metrics
	Logger  *slog.Logger
}

// Runner runs bulk migrations: it leases one job at a time and moves its
// instances through the single-instance migration, a batch per round. An
// instance whose claim is held is retried later with backoff, never waited
// on; one that cannot land on the target is reported.
type Runner struct {
	startstop.Base
	cfg  RunnerConfig
	deps RunnerDeps
	leasedLoop
}

// NewRunner builds a runner; Start runs it.
func NewRunner(deps RunnerDeps, cfg RunnerConfig) *Runner {
	cfg.setDefaults()
	return &Runner{cfg: cfg, deps: deps, leasedLoop: newLeasedLoop()}
}

// Start runs the runner until Stop, which lets the batch in hand finish
// until its deadline and hands the job's lease back.
func (r *Runner) Start(ctx context.Context) error { return r.Run(ctx, "migrations", r.run) }

func (r *Runner) run(soft, hard context.Context) {
	r.leasedLoop.run(soft, hard, r.deps.Logger, "migration", r.cfg.PollInterval, r.round,
		func(ctx context.Context) error { return r.deps.Store.ReleaseMigrations(ctx, r.cfg.Replica) })
}

// round migrates one batch of one leased job; busy reports more may be due.
func (r *Runner) round(soft, hard context.Context) (busy bool, err error) {
	m, ok, err := r.deps.Store.LeaseMigration(soft, r.cfg.Replica, r.cfg.Lease)
	if err != nil || !ok {
		return false, err
	}
	ids, attempts, err := r.deps.Store.DueMigrationItems(soft, m.ID, r.cfg.Batch)
	if err != nil {
		return false, err
	}
	outs := make([]store.ItemOutcome, len(ids))
	done := make(chan int, len(ids))
	answers := make([]lanes.Result, len(ids))
	for i, id := range ids {
		res := migrateItem(id, m.ToVersion, m.Mapping, attempts[i])
		res.Done = func(o lanes.Result) { answers[i] = o; done <- i }
		r.deps.Lanes.Dispatch(res)
	}
	for range ids {
		select {
		case i := <-done:
			outs[i] = r.classify(ids[i], attempts[i], answers[i])
		case <-hard.Done():
			return false, hard.Err()
		}
	}
	ctx, cancel := startstop.FinalContext(hard)
	defer cancel()
	if err := r.deps.Store.SettleMigrationItems(ctx, m.ID, r.cfg.Replica, outs); err != nil {
		return false, err
	}
	return len(ids) == r.cfg.Batch, nil
}

// classify turns a migration's outcome into the instance's progress.
func (r *Runner) classify(id string, attempts int, o lanes.Result) store.ItemOutcome {
	out := store.ItemOutcome{InstanceID: id}
	switch o.Kind {
	case lanes.Applied:
		out.State = "migrated"
	case lanes.Refused, lanes.Retry:
		out.State, out.RetryIn = "pending", backoff.Delay(r.cfg.Backoff, r.cfg.BackoffMax, attempts+1)
		out.Code = o.Code
	default:
		out.State, out.Code = "refused", o.Code
		if o.Err != nil {
			out.Detail = fault.Reason(o.Err)
		}
	}
	r.deps.Metrics.MigrationInstances.WithLabelValues(map[string]string{"migrated": "migrated", "pending": "retried", "refused": "refused"}[out.State]).Inc()
	return out
}

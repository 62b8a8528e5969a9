package operations

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/backoff"
	"github.com/sutra-run/worker/internal/defaults"
	"github.com/sutra-run/worker/internal/startstop"
	"github.com/sutra-run/worker/store"
)

// BatchStore is what the batch runner needs from the database
// (*store.Store).
type BatchStore interface {
	LeaseBatch(ctx context.Context, holder string, lease time.Duration) (store.Batch, bool, error)
	DueBatchRetries(ctx context.Context, id string, limit int) ([]string, []int, error)
	WalkBatch(ctx context.Context, b store.Batch, limit, scan int) (ids []string, next string, done bool, err error)
	SettleBatch(ctx context.Context, id, holder, walkedTo string, walkDone bool, outs []store.BatchOutcome) error
	ReleaseBatches(ctx context.Context, holder string) error
	ListIncidents(ctx context.Context, f store.IncidentFilter) ([]store.Incident, error)
}

// BatchConfig configures the batch runner.
type BatchConfig struct {
	Replica string
	// Lease keeps a batch with this replica (default 30s); another replica
	// resumes it from its cursor when the lease lapses unrenewed.
	Lease time.Duration
	// PollInterval is how often an idle runner looks for batches (default
	// 1s).
	PollInterval time.Duration
	// Page is how many instances one round works at once (default 32): the
	// most a batch holds in memory, whatever its size.
	Page int
	// Scan bounds the instances one round walks to check a filter's
	// conditions no index serves (SUTRA_API_MAX_SCAN; default 5,000).
	Scan int
	// Backoff and BackoffMax space the retries of an instance whose claim
	// was held (defaults 200ms, 30s).
	Backoff, BackoffMax time.Duration
}

func (c *BatchConfig) setDefaults() {
	defaults.Set(&c.Lease, 30*time.Second)
	defaults.Set(&c.PollInterval, time.Second)
	defaults.Set(&c.Page, 32)
	defaults.Set(&c.Scan, 5000)
	defaults.Set(&c.Backoff, 200*time.Millisecond)
	defaults.Set(&c.BackoffMax, 30*time.Second)
}

// BatchDeps are the batch runner's collaborators.
type BatchDeps struct {
	Store BatchStore
	Lanes Dispatcher
	// RetryIncident retries one incident as POST /v1/incidents/{id}/retry
	// with no body does (usecase.ResolveIncident, wired by app).
	RetryIncident func(ctx context.Context, incidentID int64) error
	Logger        *slog.Logger
}

// BatchRunner works batch operations (POST /v1/batches): it leases one
// batch at a time and, each round, takes the instances due again after a
// held claim and the next page of the batch's walk, and puts each through
// the same admin operation as a single call (Cancel, Retry, Migrate). An
// instance whose claim is held is tried again later with backoff, never
// waited on. A round's outcomes and the walk's new cursor are settled in
// one transaction under the lease: a replica that takes the batch over
// resumes from there.
type BatchRunner struct {
	startstop.Base
	cfg  BatchConfig
	deps BatchDeps
	leasedLoop
}

// NewBatchRunner builds a runner; Start runs it.
func NewBatchRunner(deps BatchDeps, cfg BatchConfig) *BatchRunner {
	cfg.setDefaults()
	return &BatchRunner{cfg: cfg, deps: deps, leasedLoop: newLeasedLoop()}
}

// Start runs the runner until Stop, which lets the round in hand finish
// until its deadline and hands the batch's lease back.
func (r *BatchRunner) Start(ctx context.Context) error { return r.Run(ctx, "batches", r.run) }

func (r *BatchRunner) run(soft, hard context.Context) {
	r.leasedLoop.run(soft, hard, r.deps.Logger, "batch", r.cfg.PollInterval, r.round,
		func(ctx context.Context) error { return r.deps.Store.ReleaseBatches(ctx, r.cfg.Replica) })
}

// round works one page of one leased batch; busy reports more may be due.
func (r *BatchRunner) round(soft, hard context.Context) (busy bool, err error) {
	b, ok, err := r.deps.Store.LeaseBatch(soft, r.cfg.Replica, r.cfg.Lease)
	if err != nil || !ok {
		return false, err
	}
	ids, tries, err := r.deps.Store.DueBatchRetries(soft, b.ID, r.cfg.Page)
	if err != nil {
		return false, err
	}
	walkedTo, walkDone := b.WalkedTo, b.WalkDone
	if !walkDone && len(ids) < r.cfg.Page {
		walked, next, done, err := r.deps.Store.WalkBatch(soft, b, r.cfg.Page-len(ids), r.cfg.Scan)
		if err != nil {
			return false, err
		}
		for _, id := range walked {
			// The walk passed every instance waiting for a retry, unless a
			// replica died before it settled its round: never try one twice
			// in a round.
			if !slices.Contains(ids, id) {
				ids, tries = append(ids, id), append(tries, 0)
			}
		}
		walkedTo, walkDone = next, done
	}
	outs := make([]store.BatchOutcome, len(ids))
	finished := make(chan int, len(ids))
	for i, id := range ids {
		go func() {
			outs[i] = r.classify(b, id, tries[i], r.apply(hard, b, id, tries[i]))
			finished <- i
		}()
	}
	for range ids {
		select {
		case <-finished:
		case <-hard.Done():
			return false, hard.Err()
		}
	}
	ctx, cancel := startstop.FinalContext(hard)
	defer cancel()
	if err := r.deps.Store.SettleBatch(ctx, b.ID, r.cfg.Replica, walkedTo, walkDone, outs); err != nil {
		return false, err
	}
	return len(ids) > 0 || !walkDone, nil
}

// apply runs b's operation on instance id as the single admin call does.
func (r *BatchRunner) apply(ctx context.Context, b store.Batch, id string, tries int) error {
	switch b.Operation {
	case OpCancel:
		return Run(ctx, r.deps.Lanes, OpCancel, Cancel(id))
	case OpMigrate:
		return Run(ctx, r.deps.Lanes, OpMigrate, migrateItem(id, b.TargetVersion, b.Mapping, tries))
	}
	// retry: each open incident of the instance, as POST
	// /v1/incidents/{id}/retry does; those already retried are resolved
	// and not listed again when a held claim puts the rest off.
	open := true
	incidents, err := r.deps.Store.ListIncidents(ctx, store.IncidentFilter{Open: &open, InstanceID: id, Limit: 100})
	if err != nil {
		return err
	}
	if len(incidents) == 0 {
		return fault.New(fault.NotWaiting, "instance %s has no open incident", id)
	}
	for _, inc := range incidents {
		if err := r.deps.RetryIncident(ctx, inc.ID); err != nil {
			return err
		}
	}
	// A retry whose step stopped at once in a new incident failed.
	if again, err := r.deps.Store.ListIncidents(ctx, store.IncidentFilter{Open: &open, InstanceID: id, Limit: 1}); err != nil {
		return err
	} else if len(again) > 0 {
		return fmt.Errorf("instance %s: retried, but it stopped again in incident %d (%s): %s", id, again[0].ID, again[0].Code, again[0].Message)
	}
	return nil
}

// classify turns an operation's answer into the instance's outcome: a
// held claim, or lanes asking to retry, put it off; a coded refusal is
// counted by its code; an error of no code (a retry that failed again)
// failed it.
func (r *BatchRunner) classify(b store.Batch, id string, tries int, err error) store.BatchOutcome {
	out := store.BatchOutcome{InstanceID: id}
	code := fault.Code(err)
	switch {
	case err == nil:
	case code == ClaimHeld(b.Operation) || code == fault.Unavailable:
		out.Retry, out.Tries = true, tries+1
		out.RetryIn = backoff.Delay(r.cfg.Backoff, r.cfg.BackoffMax, tries+1)
	case code != "" && !errors.Is(err, context.Canceled):
		out.Code = code
	default:
		out.Failed = true
		r.deps.Logger.Warn("batch item failed", "batch", b.ID, "operation", b.Operation, "instance_id", id, "err", err)
	}
	return out
}

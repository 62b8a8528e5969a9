package usecase

import (
	"context"
	"time"

	"github.com/sutra-run/worker/store"
)

// recordTimeout bounds the statement that records an outcome.
const recordTimeout = 30 * time.Second

// RecordTaskOutcome records what a worker reports of a task it holds (a
// completion, a failure, a BPMN error; for a user task, its completion or
// an assignment or update its listeners must see first) durably, with the
// relay that applies it, fenced on the lock holder (o.Worker, or
// o.HolderPrefix), in one statement; then hands the relay to this
// replica's lanes (Deps.Handoff, the fast path; the outbox relay is its
// fallback). A protocol answers only after it returns: never a claim in
// the request. Refusals are the store's: store.ErrNotFound, a
// *store.LockError, a *store.NotAssigneeError.
func (u *UseCases) RecordTaskOutcome(ctx context.Context, conn Conn, o store.TaskReport) (store.Recorded, error) {
	release, err := conn.use(ctx)
	if err != nil {
		return store.Recorded{}, err
	}
	defer release()
	ctx, cancel := context.WithTimeout(ctx, recordTimeout)
	defer cancel()
	rec, err := u.deps.Store.RecordOutcome(ctx, o)
	if err != nil {
		return rec, err
	}
	// An assignment or update waiting for listeners ends no task: only
	// what ends one is counted.
	if o.Kind != store.TaskAssign && o.Kind != store.TaskUpdate {
		u.deps.Metrics.TasksCompleted.WithLabelValues(rec.Topic, o.Kind).Inc()
	}
	if u.deps.Handoff != nil {
		u.deps.Handoff(rec.Relay)
	}
	return rec, nil
}

// JobChange changes an open job (a task row): its retries, its lock's
// timeout from now, or both. Nil changes nothing.
type JobChange struct {
	Retries *int
	Timeout *time.Duration
}

// UpdateJob changes job id: the timeout of an activated job's lock
// (store.SetLockTimeout), then the retries of an open job or of one that
// failed into an incident, which its task has when the incident is
// resolved (store.SetRetries). Refusals are the store's:
// store.ErrNotFound, a *store.LockError.
func (u *UseCases) UpdateJob(ctx context.Context, conn Conn, id int64, ch JobChange) error {
	release, err := conn.use(ctx)
	if err != nil {
		return err
	}
	defer release()
	ctx, cancel := context.WithTimeout(ctx, recordTimeout)
	defer cancel()
	if ch.Timeout != nil {
		if err := u.deps.Store.SetLockTimeout(ctx, id, *ch.Timeout); err != nil {
			return err
		}
	}
	if ch.Retries != nil {
		return u.deps.Store.SetRetries(ctx, id, *ch.Retries)
	}
	return nil
}

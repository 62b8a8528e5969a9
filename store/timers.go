package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// DueTimer is a timer row leased to one poller for one fire.
type DueTimer struct {
	ID         int64
	InstanceID string
	TokenID    string
	Element    string
	DueAt      time.Time
	Attempts   int
	// LockedUntil is the poller lease taken with the row; with the poller's id
	// it fences the poller's later writes to the row (defer, drop).
	LockedUntil time.Time
	// Start is set on a timer start event's schedule row: the fire starts
	// InstanceID as an instance of this definition.
	Start *TimerStart
}

// TimerStart is what a schedule row's fire starts.
type TimerStart struct {
	DefinitionKey     string
	DefinitionVersion int
	// Fired counts the earlier fires of the schedule.
	Fired int
}

// takeDueSQL leases due timers to one poller. SKIP LOCKED keeps two pollers'
// statements apart; the lease (locked_by, locked_until) keeps a fire in
// flight from being taken again until it is answered or the lease lapses.
const takeDueSQL = `
WITH due AS (
	SELECT id FROM timers
	 WHERE due_at <= now() AND (locked_until IS NULL OR locked_until < now())
	 ORDER BY due_at LIMIT $2
	 FOR UPDATE SKIP LOCKED
)
UPDATE timers t SET locked_by = $1, locked_until = now() + $3::interval
 WHERE t.id = ANY (ARRAY(SELECT id FROM due))
RETURNING t.id, t.instance_id, t.token_id, t.element_id, t.due_at, t.attempts, t.locked_until,
          t.definition_key, t.definition_version, t.fired`

// nextDueSQL is how long until the earliest timer that nobody leases is due
// (negative: already due; NULL: none).
const nextDueSQL = `
SELECT EXTRACT(EPOCH FROM due_at - now())::float8 FROM timers
 WHERE locked_until IS NULL OR locked_until < now()
 ORDER BY due_at LIMIT 1`

// TakeDueTimers leases up to limit due timers to owner for lease, and says
// how long until the next timer that is not leased is due (ok false: none).
// One round trip.
func (s *Store) TakeDueTimers(ctx context.Context, owner string, limit int, lease time.Duration) (due []DueTimer, next time.Duration, ok bool, err error) {
	b := &pgx.Batch{}
	b.Queue(takeDueSQL, owner, limit, lease)
	b.Queue(nextDueSQL)
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	rows, err := br.Query()
	if err != nil {
		return nil, 0, false, translate(err, "taking due timers")
	}
	due, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (DueTimer, error) {
		var t DueTimer
		var key *string
		var version *int
		var fired int
		err := r.Scan(&t.ID, &t.InstanceID, &t.TokenID, &t.Element, &t.DueAt, &t.Attempts, &t.LockedUntil, &key, &version, &fired)
		if key != nil && version != nil {
			t.Start = &TimerStart{DefinitionKey: *key, DefinitionVersion: *version, Fired: fired}
		}
		return t, err
	})
	if err != nil {
		return nil, 0, false, translate(err, "taking due timers")
	}
	var secs *float64
	if err := br.QueryRow().Scan(&secs); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return due, 0, false, translate(err, "reading the next due timer")
	}
	if secs == nil {
		return due, 0, false, translate(br.Close(), "taking due timers")
	}
	return due, time.Duration(*secs * float64(time.Second)), true, translate(br.Close(), "taking due timers")
}

// Deferral moves one leased timer later.
type Deferral struct {
	Timer DueTimer
	Delay time.Duration
}

// DeferTimers moves leased timers later (due_at = now + delay), counts the
// attempt and ends the lease, so that a refused fire keeps its row. A row
// whose lease is no longer owner's (it lapsed and another poller took it, or
// a step re-armed it) is left alone.
func (s *Store) DeferTimers(ctx context.Context, owner string, ds []Deferral) error {
	if len(ds) == 0 {
		return nil
	}
	ids, until, secs := make([]int64, len(ds)), make([]time.Time, len(ds)), make([]float64, len(ds))
	for i, d := range ds {
		ids[i], until[i], secs[i] = d.Timer.ID, d.Timer.LockedUntil, d.Delay.Seconds()
	}
	_, err := s.pool.Exec(ctx, `
		UPDATE timers t SET due_at = now() + make_interval(secs => d.secs), attempts = t.attempts + 1,
		       locked_by = NULL, locked_until = NULL
		  FROM unnest($2::bigint[], $3::timestamptz[], $4::float8[]) AS d(id, until, secs)
		 WHERE t.id = d.id AND t.locked_by = $1 AND t.locked_until = d.until`, owner, ids, until, secs)
	return translate(err, "deferring timers")
}

// DropTimers deletes leased timer rows whose fire the engine found stale,
// and returns the ids it actually deleted: a row that still existed although
// its wait did not (a zombie) is worth a log line.
func (s *Store) DropTimers(ctx context.Context, owner string, ts []DueTimer) ([]int64, error) {
	if len(ts) == 0 {
		return nil, nil
	}
	ids, until := make([]int64, len(ts)), make([]time.Time, len(ts))
	for i, t := range ts {
		ids[i], until[i] = t.ID, t.LockedUntil
	}
	rows, err := s.pool.Query(ctx, `
		DELETE FROM timers t USING unnest($2::bigint[], $3::timestamptz[]) AS d(id, until)
		 WHERE t.id = d.id AND t.locked_by = $1 AND t.locked_until = d.until
		RETURNING t.id`, owner, ids, until)
	if err != nil {
		return nil, translate(err, "dropping stale timers")
	}
	dropped, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	return dropped, translate(err, "dropping stale timers")
}

// ReleaseTimerLeases ends every timer lease owner holds, so that another
// replica fires those timers now rather than when the leases lapse.
func (s *Store) ReleaseTimerLeases(ctx context.Context, owner string) error {
	_, err := s.pool.Exec(ctx, "UPDATE timers SET locked_by = NULL, locked_until = NULL WHERE locked_by = $1", owner)
	return translate(err, "releasing timer leases")
}

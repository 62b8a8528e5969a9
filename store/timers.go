package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sutra-run/worker/fault"
)

// DueTimer is a timer row leased to one poller for one fire.
type DueTimer struct {
	ID         int64
	InstanceID string
	TokenID    string
	Element    string
	DueAt      time.Time
	Attempts   int
	// Failures counts the fires that failed (never a refusal); at the
	// poller's cap the timer stops in an incident (ParkTimers).
	Failures int
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
	 WHERE due_at <= now() AND incident_id IS NULL AND (locked_until IS NULL OR locked_until < now())
	 ORDER BY due_at LIMIT $2
	 FOR UPDATE SKIP LOCKED
)
UPDATE timers t SET locked_by = $1, locked_until = now() + $3::interval
 WHERE t.id = ANY (ARRAY(SELECT id FROM due))
RETURNING t.id, t.instance_id, t.token_id, t.element_id, t.due_at, t.attempts, t.failures, t.locked_until,
          t.definition_key, t.definition_version, t.fired`

// nextDueSQL is how long until the earliest timer that nobody leases is due
// (negative: already due; NULL: none). A timer parked in its incident is never due.
const nextDueSQL = `
SELECT EXTRACT(EPOCH FROM due_at - now())::float8 FROM timers
 WHERE incident_id IS NULL AND (locked_until IS NULL OR locked_until < now())
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
		err := r.Scan(&t.ID, &t.InstanceID, &t.TokenID, &t.Element, &t.DueAt, &t.Attempts, &t.Failures, &t.LockedUntil, &key, &version, &fired)
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
	// Failed: the fire failed (not a refusal, an outage or a stop), which
	// counts towards the timer's failures.
	Failed bool
}

// DeferTimers moves leased timers later (due_at = now + delay), counts the
// attempt (and the failure) and ends the lease, so that a refused fire keeps
// its row. A row whose lease is no longer owner's (it lapsed and another
// poller took it, or a step re-armed it) is left alone.
func (s *Store) DeferTimers(ctx context.Context, owner string, ds []Deferral) error {
	if len(ds) == 0 {
		return nil
	}
	ids, until, secs, failed := make([]int64, len(ds)), make([]time.Time, len(ds)), make([]float64, len(ds)), make([]bool, len(ds))
	for i, d := range ds {
		ids[i], until[i], secs[i], failed[i] = d.Timer.ID, d.Timer.LockedUntil, d.Delay.Seconds(), d.Failed
	}
	_, err := s.pool.Exec(ctx, `
		UPDATE timers t SET due_at = now() + make_interval(secs => d.secs), attempts = t.attempts + 1,
		       failures = t.failures + d.failed::int, locked_by = NULL, locked_until = NULL
		  FROM unnest($2::bigint[], $3::timestamptz[], $4::float8[], $5::boolean[]) AS d(id, until, secs, failed)
		 WHERE t.id = d.id AND t.locked_by = $1 AND t.locked_until = d.until`, owner, ids, until, secs, failed)
	return translate(err, "deferring timers")
}

// Parking is one leased timer whose last fire failed for good: Reason is
// that failure, for the incident's message.
type Parking struct {
	Timer  DueTimer
	Reason string
}

// parkTimersSQL opens an incident on each timer's element and parks the row
// in it (incident_id set, lease ended) in one statement, fenced on the lease
// like a deferral. The timer is unique per (instance, token, element), which
// joins each incident back to its row.
const parkTimersSQL = `
WITH t AS (
	SELECT t.instance_id, t.token_id, t.element_id, d.reason
	  FROM timers t JOIN unnest($2::bigint[], $3::timestamptz[], $4::text[]) AS d(id, until, reason) ON t.id = d.id
	 WHERE t.locked_by = $1 AND t.locked_until = d.until
	   FOR UPDATE OF t
), inc AS (
	INSERT INTO incidents (instance_id, token_id, element_id, code, message)
	SELECT instance_id, token_id, element_id, $5, reason FROM t
	RETURNING id, instance_id, token_id, element_id
)
UPDATE timers x SET incident_id = inc.id, failures = x.failures + 1, attempts = x.attempts + 1,
       locked_by = NULL, locked_until = NULL
  FROM inc WHERE x.instance_id = inc.instance_id AND x.token_id = inc.token_id AND x.element_id = inc.element_id
RETURNING x.id, inc.id`

// ParkedTimer is a timer parked in its incident.
type ParkedTimer struct {
	TimerID, IncidentID int64
}

// ParkTimers stops leased timers whose fires failed for good in an incident
// each (fault.IncidentTimerFailed): the pollers skip them until RetryTimer.
// It returns what it parked; a row whose lease is no longer owner's is left
// alone.
func (s *Store) ParkTimers(ctx context.Context, owner string, ps []Parking) ([]ParkedTimer, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	ids, until, reasons := make([]int64, len(ps)), make([]time.Time, len(ps)), make([]string, len(ps))
	for i, p := range ps {
		ids[i], until[i], reasons[i] = p.Timer.ID, p.Timer.LockedUntil, p.Reason
	}
	rows, err := s.pool.Query(ctx, parkTimersSQL, owner, ids, until, reasons, fault.IncidentTimerFailed)
	if err != nil {
		return nil, translate(err, "parking failed timers")
	}
	parked, err := pgx.CollectRows(rows, pgx.RowToStructByPos[ParkedTimer])
	return parked, translate(err, "parking failed timers")
}

// RetryTimer resolves a timer's incident (fault.IncidentTimerFailed) and arms
// its timer to fire now, its failures forgotten, in one statement (the
// resolution is the trigger sutra_resolve_timer_incident's). ErrNotFound when
// the incident is not open or no timer is parked in it (its wait was closed,
// which resolved it).
func (s *Store) RetryTimer(ctx context.Context, incidentID int64) error {
	tag, err := s.pool.Exec(ctx, `UPDATE timers SET incident_id = NULL, failures = 0, attempts = 0, due_at = now()
		WHERE incident_id = $1`, incidentID)
	if err != nil {
		return translate(err, fmt.Sprintf("retrying the timer of incident %d", incidentID))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("no timer is parked in incident %d: %w", incidentID, ErrNotFound)
	}
	return nil
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

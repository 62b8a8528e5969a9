package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Retention by dropping partitions (migration 0034): the inbox and the step
// history are partitioned by day (UTC), one partition <table>_YYYYMMDD a
// day. The sweeper, under its lease, creates the partitions of the days
// ahead (EnsurePartitions), moves the rows of the tables of before the
// partitioning over (MoveBeforeDays), and detaches and drops the partitions
// whose every row is past the retention (DropPartitions): no row is deleted
// one by one. A row is kept between the retention and the retention and a
// day.

// DayTable is a table partitioned by day.
type DayTable struct {
	// Name is the partitioned table (its partitions are Name_YYYYMMDD).
	Name string
	// before is the table of before the partitioning, behind a view of its
	// old name until the contract step (0036) drops it.
	before string
	// moveSQL moves up to $2 rows of before into Name, discarding those
	// older than $1 (a timestamptz): the retention's limit.
	moveSQL string
}

// The tables partitioned by day.
var (
	InboxDays = DayTable{Name: "inbox_days", before: "inbox_before_days", moveSQL: `
WITH moved AS (
	DELETE FROM inbox_before_days WHERE message_id = ANY (ARRAY(SELECT message_id FROM inbox_before_days LIMIT $2))
	RETURNING message_id, instance_id, received_at
), kept AS (
	INSERT INTO inbox_days (message_id, instance_id, received_at, day)
	SELECT message_id, instance_id, received_at, (received_at AT TIME ZONE 'UTC')::date FROM moved
	 WHERE received_at >= $1
	ON CONFLICT DO NOTHING
)
SELECT count(*), count(*) FILTER (WHERE received_at < $1) FROM moved`}
	StepHistoryDays = DayTable{Name: "step_history_days", before: "step_history_before_days", moveSQL: `
WITH moved AS (
	DELETE FROM step_history_before_days WHERE ctid = ANY (ARRAY(SELECT ctid FROM step_history_before_days LIMIT $2))
	RETURNING *
), kept AS (
	INSERT INTO step_history_days (instance_id, version, committed_at, cause, detail, owner, message_id, bounces, passed, passed_cut)
	SELECT instance_id, version, committed_at, cause, detail, owner, message_id, bounces, passed, passed_cut FROM moved
	 WHERE committed_at >= $1
)
SELECT count(*), count(*) FILTER (WHERE committed_at < $1) FROM moved`}
)

// EnsurePartitions creates the missing partitions of t for the days from
// that of now - retention to that of now plus ahead days, and returns how
// many it created. now is the sweeper's clock; the database's today is
// covered too, whatever the skew.
func (s *Store) EnsurePartitions(ctx context.Context, t DayTable, now time.Time, retention time.Duration, ahead int) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `SELECT sutra_day_partitions($1,
		((least($2::timestamptz, now()) - $3::interval) AT TIME ZONE 'UTC')::date,
		(greatest($2::timestamptz, now()) AT TIME ZONE 'UTC')::date + $4::int)`,
		t.Name, now, retention, ahead).Scan(&n)
	return n, translate(err, "creating the partitions of "+t.Name)
}

// dropPartitionsSQL lists the partitions of $1 (attached, or left detached
// or half detached by a drop that was interrupted) whose day ended before
// $2 - $3, the retention on the sweeper's clock, and before the database's
// yesterday: today's and yesterday's partitions are live (a step inserts
// into today's and looks into yesterday's, sutra_inbox_day) whatever the
// sweeper's clock says.
const dropPartitionsSQL = `
SELECT c.relname, i.inhrelid IS NOT NULL, coalesce(i.inhdetachpending, false)
  FROM pg_class c
  JOIN pg_namespace s ON s.oid = c.relnamespace AND s.nspname = current_schema()
  LEFT JOIN pg_inherits i ON i.inhrelid = c.oid
 WHERE c.relkind = 'r' AND c.relname ~ ('^' || $1 || '_[0-9]{8}$')
   AND to_date(right(c.relname, 8), 'YYYYMMDD') + 1 <= (($2::timestamptz - $3::interval) AT TIME ZONE 'UTC')::date
   AND to_date(right(c.relname, 8), 'YYYYMMDD') + 1 < (now() AT TIME ZONE 'UTC')::date
 ORDER BY c.relname`

// DropPartitions detaches and drops every partition of t whose day ended
// more than retention before now (see dropPartitionsSQL), and returns their
// names. DETACH ... CONCURRENTLY locks the parent only in SHARE UPDATE
// EXCLUSIVE mode, so steps keep writing; a detach that was interrupted is
// finished (FINALIZE) by the next call.
func (s *Store) DropPartitions(ctx context.Context, t DayTable, now time.Time, retention time.Duration) ([]string, error) {
	type part struct {
		name             string
		attached, halved bool
	}
	rows, err := s.pool.Query(ctx, dropPartitionsSQL, t.Name, now, retention)
	if err != nil {
		return nil, translate(err, "listing the partitions of "+t.Name)
	}
	parts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (part, error) {
		var p part
		err := r.Scan(&p.name, &p.attached, &p.halved)
		return p, err
	})
	if err != nil {
		return nil, translate(err, "listing the partitions of "+t.Name)
	}
	var dropped []string
	parent := pgx.Identifier{t.Name}.Sanitize()
	for _, p := range parts {
		name := pgx.Identifier{p.name}.Sanitize()
		switch {
		case p.halved:
			_, err = s.pool.Exec(ctx, "ALTER TABLE "+parent+" DETACH PARTITION "+name+" FINALIZE")
		case p.attached:
			_, err = s.pool.Exec(ctx, "ALTER TABLE "+parent+" DETACH PARTITION "+name+" CONCURRENTLY")
		}
		if err == nil {
			_, err = s.pool.Exec(ctx, "DROP TABLE "+name)
		}
		if err != nil {
			return dropped, translate(err, fmt.Sprintf("dropping partition %s of %s", p.name, t.Name))
		}
		dropped = append(dropped, p.name)
	}
	return dropped, nil
}

// MoveBeforeDays moves up to limit rows of the table of before the
// partitioning into t, each batch in one statement (a row is in one table
// or the other at every snapshot), and discards those already past the
// retention. It returns the rows taken and, of them, those discarded;
// nothing once the contract step (0036) dropped the table. The partitions
// of the days kept must exist (EnsurePartitions with the same now and
// retention).
func (s *Store) MoveBeforeDays(ctx context.Context, t DayTable, now time.Time, retention time.Duration, limit int) (taken, discarded int64, err error) {
	var exists bool
	if err := s.pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", t.before).Scan(&exists); err != nil || !exists {
		return 0, 0, translate(err, "looking for "+t.before)
	}
	err = s.pool.QueryRow(ctx, t.moveSQL, now.Add(-retention), limit).Scan(&taken, &discarded)
	return taken, discarded, translate(err, "moving the rows of "+t.before)
}

package store

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// Outbox targets (outbox.target).
const (
	// TargetOutbox is a BPMN message, published to the outbox exchange.
	TargetOutbox = "outbox"
	// TargetRelay is a relay the worker sends itself, published to the relay
	// exchange with its routing key and body as stored.
	TargetRelay = "relay"
)

// OutboxRow is an outbox row leased to one publisher.
type OutboxRow struct {
	ID         string
	Seq        int64
	InstanceID string
	ElementID  string
	Target     string
	// Message, CorrelationKey and Variables make a TargetOutbox row's body.
	Message        string
	CorrelationKey string
	Variables      json.RawMessage
	// RoutingKey and Body are a TargetRelay row's message.
	RoutingKey string
	Body       []byte
	Attempts   int
	// Written is when the row was written, by this process's clock (the
	// lease reads its age by the database's).
	Written time.Time
	// After is the seq of the instance's latest earlier row that the same
	// owner holds, to be published first (0: none). Of an instance's rows
	// leased or written together only the first one's After counts: the
	// others follow it.
	After int64
}

// outboxColumns are the columns of a leased row (scanOutboxRow), from outbox o.
const outboxColumns = `o.id, o.seq, o.instance_id, o.element_id, o.target, o.message_name, o.correlation_key,
	o.variables, o.routing_key, o.body, o.attempts`

// outboxAfter is OutboxRow.After of row o for the owner in parameter $n: the
// seq of the instance's latest earlier unpublished row, if that owner holds
// it (where it matters, the first row of an instance in a lease or a
// commit, every earlier unpublished row is the owner's).
//
// The probes of an instance's unpublished rows (here and in leasedInsert)
// read outbox_instance_unpublished (migration 0014 keeps them off
// outbox_unpublished); they name the instance as a range and order by
// (instance_id, seq), so that no other index gives their order either (with
// instance_id = x it would be seq alone, which outbox_seq gives).
func outboxAfter(n int) string {
	return fmt.Sprintf(`COALESCE((SELECT CASE WHEN e.locked_by = $%d AND e.locked_until >= now() THEN e.seq END FROM outbox e
	          WHERE e.instance_id BETWEEN o.instance_id AND o.instance_id AND e.seq < o.seq AND e.published_at IS NULL
	          ORDER BY e.instance_id DESC, e.seq DESC LIMIT 1), 0)`, n)
}

// scanOutboxRow scans outboxColumns and then the columns more points to.
func scanOutboxRow(r pgx.Row, more func(*OutboxRow) []any) (OutboxRow, error) {
	var o OutboxRow
	err := r.Scan(append([]any{&o.ID, &o.Seq, &o.InstanceID, &o.ElementID, &o.Target, &o.Message, &o.CorrelationKey,
		&o.Variables, &o.RoutingKey, &o.Body, &o.Attempts}, more(&o)...)...)
	return o, err
}

// leaseOutboxSQL leases up to $2 unpublished rows to $1 for $3, in commit
// order (seq), never a row of an instance with an earlier unpublished row
// that neither this statement nor an earlier lease of $1 holds, so that one
// instance's messages are first published in commit order whoever publishes
// them:
//
//   - a candidate is free (never leased, or its lease or backoff is over)
//     and no earlier row of its instance is leased by another owner or
//     backing off now (which also keeps such rows from crowding the batch
//     out);
//   - SKIP LOCKED keeps two publishers' statements apart, so a candidate
//     may lose an earlier row of its instance to a concurrent statement: it
//     is then dropped (the second NOT EXISTS);
//   - a row behind rows $1 still holds is returned with the seq of the
//     latest of them: $1 must publish it only after those (the publisher
//     chains its batches).
//
// Deferred rows (a failed publish) have no holder and locked_until in the
// future: their backoff. OFFSET 0 keeps each NOT EXISTS a probe per row on
// outbox_instance_unpublished: as an anti-join the planner may read every
// unpublished row, or every candidate's earlier rows, on each lease. The
// walk says seq > 0 to use outbox_unpublished, which the probes cannot
// (migration 0014).
var leaseOutboxSQL = `
WITH cand AS (
	SELECT o.id, o.instance_id, o.seq FROM outbox o
	 WHERE o.published_at IS NULL AND o.seq > 0
	   AND (o.locked_until IS NULL OR o.locked_until < now())
	   AND NOT EXISTS (SELECT 1 FROM outbox e
	                    WHERE e.instance_id = o.instance_id AND e.seq < o.seq AND e.published_at IS NULL
	                      AND e.locked_until >= now() AND e.locked_by IS DISTINCT FROM $1 OFFSET 0)
	 ORDER BY o.seq LIMIT $2
	 FOR UPDATE SKIP LOCKED
)
UPDATE outbox o SET locked_by = $1, locked_until = now() + $3::interval
  FROM cand c
 WHERE o.id = c.id
   AND NOT EXISTS (SELECT 1 FROM outbox e
                    WHERE e.instance_id = c.instance_id AND e.seq < c.seq AND e.published_at IS NULL
                      AND e.id NOT IN (SELECT id FROM cand)
                      AND (e.locked_by IS DISTINCT FROM $1 OR e.locked_until < now()) OFFSET 0)
RETURNING ` + outboxColumns + `, EXTRACT(EPOCH FROM now() - o.created_at)::float8, ` + outboxAfter(1)

// leaseOrderSQL makes the lease walk outbox_unpublished in seq order and stop
// at its limit, whatever the table's statistics say: a table that grew
// since its last ANALYZE (or never had one) looks nearly empty, and the
// planner then reads and sorts every unpublished row on each lease.
const leaseOrderSQL = "SELECT set_config('enable_sort', 'off', true), set_config('enable_bitmapscan', 'off', true)"

// LeaseOutbox leases up to limit unpublished outbox rows to owner for lease
// (see leaseOutboxSQL), in seq order. Leases are soft state (a lost one
// costs at most a second publish), so they skip the WAL flush.
func (s *Store) LeaseOutbox(ctx context.Context, owner string, limit int, lease time.Duration) ([]OutboxRow, error) {
	sent := time.Now()
	b := &pgx.Batch{}
	b.Queue(asyncCommit)
	b.Queue(leaseOrderSQL)
	b.Queue(leaseOutboxSQL, owner, limit, lease)
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	for range 2 {
		if _, err := br.Exec(); err != nil {
			return nil, translate(err, "leasing outbox rows")
		}
	}
	rows, err := br.Query()
	if err != nil {
		return nil, translate(err, "leasing outbox rows")
	}
	leased, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (OutboxRow, error) {
		var age float64
		o, err := scanOutboxRow(r, func(o *OutboxRow) []any { return []any{&age, &o.After} })
		o.Written = sent.Add(-time.Duration(age * float64(time.Second)))
		return o, err
	})
	if err != nil {
		return nil, translate(err, "leasing outbox rows")
	}
	// RETURNING does not follow the CTE's order.
	slices.SortFunc(leased, func(a, b OutboxRow) int { return cmp.Compare(a.Seq, b.Seq) })
	return leased, translate(br.Close(), "leasing outbox rows")
}

// OutboxSettlement is what became of a publisher's leased rows.
type OutboxSettlement struct {
	// Published rows were confirmed by the broker.
	Published []string
	// Deferred rows failed (returned, nacked): retried after their delay.
	Deferred []OutboxDeferral
	// Released rows were not tried or not confirmed (an outage, a stop):
	// their leases are handed back so that any publisher takes them now.
	Released []string
}

// OutboxDeferral is one failed row and its backoff.
type OutboxDeferral struct {
	ID    string
	Delay time.Duration
}

// SettleOutbox writes a settlement in one round trip, each write fenced on
// owner's lease: a row whose lease lapsed and was taken by another publisher
// is left to it. Marking a row published needs no WAL flush: a mark lost in
// a crash only publishes the row again, which consumers dedupe by id.
func (s *Store) SettleOutbox(ctx context.Context, owner string, st OutboxSettlement) error {
	b := &pgx.Batch{}
	b.Queue(asyncCommit)
	if len(st.Published) > 0 {
		b.Queue(outboxPublishedSQL, owner, st.Published)
	}
	if n := len(st.Deferred); n > 0 {
		ids, secs := make([]string, n), make([]float64, n)
		for i, d := range st.Deferred {
			ids[i], secs[i] = d.ID, d.Delay.Seconds()
		}
		b.Queue(`UPDATE outbox o SET attempts = o.attempts + 1, locked_by = NULL,
			       locked_until = now() + make_interval(secs => d.secs)
			  FROM unnest($2::text[], $3::float8[]) AS d(id, secs)
			 WHERE o.id = d.id AND o.locked_by = $1`, owner, ids, secs)
	}
	if len(st.Released) > 0 {
		b.Queue(`UPDATE outbox SET locked_by = NULL, locked_until = NULL
			WHERE id = ANY($2) AND locked_by = $1`, owner, st.Released)
	}
	return translate(s.pool.SendBatch(ctx, b).Close(), "settling outbox rows")
}

// TrimOutbox deletes up to limit rows published longer ago than retention.
func (s *Store) TrimOutbox(ctx context.Context, retention time.Duration, limit int) (int64, error) {
	tag, err := s.pool.Exec(ctx, trimOutboxSQL, retention, limit)
	return tag.RowsAffected(), translate(err, "trimming outbox")
}

// OutboxHandoff is the publisher of this process, to which commits lease the
// outbox rows they write, so that it publishes them without leasing them
// first (Store.HandOutboxTo).
type OutboxHandoff interface {
	// Lessee is who leases the rows a transaction writes, and for how long;
	// "" leaves them to any publisher's lease (a publisher that stops).
	Lessee() (owner string, lease time.Duration)
	// Written hears, once the transaction committed, what it wrote to the
	// outbox. It runs on the committing goroutine: it must not wait for
	// anything but a bounded final write.
	Written(OutboxWritten)
}

// OutboxWritten is what one committed transaction wrote to the outbox.
type OutboxWritten struct {
	// At is when the transaction was sent: the leases of Leased last at
	// least until At plus the lessee's lease.
	At time.Time
	// Leased are the rows leased to the lessee as they were written, in seq
	// order. A row is leased so only when every earlier unpublished row of
	// its instance is held by the lessee too (After names the latest).
	Leased []OutboxRow
	// Unleased counts the rows left to any publisher's lease: behind a row
	// another publisher holds or that backs off, or written with no lessee.
	Unleased int
}

// HandOutboxTo makes every commit lease the outbox rows it writes to h's
// lessee and hand them to h. Call it before the store is used.
func (s *Store) HandOutboxTo(h OutboxHandoff) { s.handoff = h }

// outboxWrites collects the outbox rows one transaction writes.
type outboxWrites struct {
	owner *string // nil: written unleased
	lease time.Duration
	OutboxWritten
	last OutboxRow // the latest row written
}

// outboxWrites starts the collection of a transaction about to be sent.
func (s *Store) outboxWrites() *outboxWrites {
	w := &outboxWrites{OutboxWritten: OutboxWritten{At: time.Now()}}
	if s.handoff != nil {
		if owner, lease := s.handoff.Lessee(); owner != "" {
			w.owner, w.lease = &owner, lease
		}
	}
	return w
}

// queue queues an outbox insert made with leasedInsert, whose last two
// parameters it adds, and collects the rows it returns.
func (w *outboxWrites) queue(b *pgx.Batch, sql string, args ...any) {
	b.Queue(sql, append(args, w.owner, w.lease)...).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var leased bool
			o, err := scanOutboxRow(rows, func(o *OutboxRow) []any { return []any{&leased, &o.After} })
			if err != nil {
				return err
			}
			w.last = o
			if !leased {
				w.Unleased++
				continue
			}
			o.Written = w.At
			w.Leased = append(w.Leased, o)
		}
		return rows.Err()
	})
}

// handOutbox tells the handoff what a committed transaction wrote.
func (s *Store) handOutbox(w *outboxWrites) {
	if s.handoff == nil || len(w.Leased) == 0 && w.Unleased == 0 {
		return
	}
	slices.SortFunc(w.Leased, func(a, b OutboxRow) int { return cmp.Compare(a.Seq, b.Seq) })
	s.handoff.Written(w.OutboxWritten)
}

// leasedInsert makes an INSERT INTO outbox of the rows of sel (whose columns
// are cols, instance_id among them, typed by casts; with, if set, are more
// WITH queries, each ending in a comma; dedupe: a row whose id exists is
// not written) that leases each row to the owner in
// parameter $n for the interval in $n+1 when every earlier unpublished row
// of its instance is held by that owner, unexpired (an owner of NULL leases
// nothing), and returns outboxColumns, whether it leased the row, and After.
// Rows written in one transaction see the ones before them, so a step's
// second message is leased behind its first.
func leasedInsert(with, cols, sel string, dedupe bool, n int) string {
	conflict := ""
	if dedupe {
		conflict = "ON CONFLICT (id) DO NOTHING"
	}
	return fmt.Sprintf(`WITH %[7]s v (%[1]s) AS (%[2]s)
INSERT INTO outbox AS o (%[1]s, locked_by, locked_until)
SELECT v.*, l.owner, CASE WHEN l.owner IS NOT NULL THEN now() + $%[4]d::interval END
  FROM v LEFT JOIN LATERAL (
	SELECT true FROM outbox e
	 WHERE e.instance_id BETWEEN v.instance_id AND v.instance_id AND e.published_at IS NULL
	   AND (e.locked_by IS DISTINCT FROM $%[3]d OR e.locked_until < now())
	 ORDER BY e.instance_id, e.seq LIMIT 1) b (blocked) ON true
  CROSS JOIN LATERAL (SELECT CASE WHEN b.blocked IS NULL THEN $%[3]d::text END) l (owner)
%[8]s
RETURNING %[5]s, o.locked_by IS NOT NULL, %[6]s`, cols, sel, n, n+1, outboxColumns, outboxAfter(n), with, conflict)
}

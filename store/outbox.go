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
}

// Class is what the row is ordered within: an instance's rows are published
// in commit order among the rows of their target, so that the worker's own
// relays never wait behind a BPMN message the broker keeps returning.
func (o OutboxRow) Class() string { return o.InstanceID + "\x00" + o.Target }

// outboxColumns are the columns of a leased row (scanOutboxRow), from outbox o.
const outboxColumns = `o.id, o.seq, o.instance_id, o.element_id, o.target, o.message_name, o.correlation_key,
	o.variables, o.routing_key, o.body, o.attempts`

// scanOutboxRow scans outboxColumns and then the columns more points to.
func scanOutboxRow(r pgx.Row, more func(*OutboxRow) []any) (OutboxRow, error) {
	var o OutboxRow
	err := r.Scan(append([]any{&o.ID, &o.Seq, &o.InstanceID, &o.ElementID, &o.Target, &o.Message, &o.CorrelationKey,
		&o.Variables, &o.RoutingKey, &o.Body, &o.Attempts}, more(&o)...)...)
	return o, err
}

// leaseOutboxSQL leases up to $2 unpublished rows to $1 for $3, in commit
// order (seq), so that an instance's rows of one class (its target,
// OutboxRow.Class) are in at most one live lease, and every lease of a
// class holds its earliest unpublished rows; one instance's messages of a
// class are then first published in commit order whoever publishes them:
//
//   - a candidate is free (never leased, or its lease or backoff is over)
//     and no earlier row of its class is leased (whoever holds it, $1 too)
//     or backs off now (which also keeps such rows from crowding the batch
//     out); since leases take a class's earliest rows, a class's live
//     rows are before its free ones (only transactions of one instance
//     that commit at once, a task outcome beside a child's end, may
//     commit a row before one already leased: they have no order between
//     them);
//   - SKIP LOCKED keeps two publishers' statements apart, so a candidate
//     may lose an earlier row of its class to a concurrent statement, or
//     to the limit: it is then dropped (the second NOT EXISTS).
//
// Deferred rows (a failed publish) have no holder and locked_until in the
// future: their backoff. Leases are on the database's clock, one for every
// replica. OFFSET 0 keeps each NOT EXISTS a probe per row on
// outbox_instance_unpublished: as an anti-join the planner may read every
// unpublished row, or every candidate's earlier rows, on each lease. The
// walk says seq > 0 to use outbox_unpublished, which the probes cannot
// (migration 0014).
var leaseOutboxSQL = `
WITH cand AS (
	SELECT o.id, o.instance_id, o.target, o.seq FROM outbox o
	 WHERE o.published_at IS NULL AND o.seq > 0
	   AND (o.locked_until IS NULL OR o.locked_until < now())
	   AND NOT EXISTS (SELECT 1 FROM outbox e
	                    WHERE e.instance_id = o.instance_id AND e.target = o.target AND e.seq < o.seq AND e.published_at IS NULL
	                      AND e.locked_until >= now() OFFSET 0)
	 ORDER BY o.seq LIMIT $2
	 FOR UPDATE SKIP LOCKED
)
UPDATE outbox o SET locked_by = $1, locked_until = now() + $3::interval
  FROM cand c
 WHERE o.id = c.id
   AND NOT EXISTS (SELECT 1 FROM outbox e
                    WHERE e.instance_id = c.instance_id AND e.target = c.target AND e.seq < c.seq AND e.published_at IS NULL
                      AND e.id NOT IN (SELECT id FROM cand) OFFSET 0)
RETURNING ` + outboxColumns + `, EXTRACT(EPOCH FROM now() - o.created_at)::float8`

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
		o, err := scanOutboxRow(r, func(*OutboxRow) []any { return []any{&age} })
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
	// Parked rows failed for good: they move to outbox_parked, out of their
	// class's order, until an operator retries or discards them.
	Parked []OutboxParking
}

// OutboxParking is one row parked: its code (fault.OutboxUnroutable) and
// the broker's reason.
type OutboxParking struct {
	ID, Code, Reason string
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
	if n := len(st.Parked); n > 0 {
		ids, codes, reasons := make([]string, n), make([]string, n), make([]string, n)
		for i, p := range st.Parked {
			ids[i], codes[i], reasons[i] = p.ID, p.Code, p.Reason
		}
		b.Queue(parkOutboxSQL, owner, ids, codes, reasons)
	}
	return translate(s.pool.SendBatch(ctx, b).Close(), "settling outbox rows")
}

// parkedColumns are outbox_parked's columns that come from the outbox row.
const parkedColumns = `id, seq, instance_id, element_id, target, message_name, correlation_key, variables, routing_key, body,
	attempts, created_at`

// parkOutboxSQL moves the rows $2 that $1 holds to outbox_parked, each with
// its code and reason, and its attempt counted.
const parkOutboxSQL = `WITH p AS (
	DELETE FROM outbox o USING unnest($2::text[], $3::text[], $4::text[]) AS d(id, code, reason)
	 WHERE o.id = d.id AND o.locked_by = $1
	RETURNING o.*, d.code, d.reason)
INSERT INTO outbox_parked (` + parkedColumns + `, code, reason)
SELECT id, seq, instance_id, element_id, target, message_name, correlation_key, variables, routing_key, body,
       attempts + 1, created_at, code, reason FROM p`

// ParkedFilter selects parked rows: of one instance when InstanceID is set,
// up to Limit rows with ids after After, in id order.
type ParkedFilter struct {
	InstanceID string
	After      string
	Limit      int
}

// ParkedMessage is a BPMN message parked after the broker returned it on
// every attempt, and why.
type ParkedMessage struct {
	ID             string
	InstanceID     string
	ElementID      string
	Target         string
	Message        string
	CorrelationKey string
	Attempts       int
	CreatedAt      time.Time
	ParkedAt       time.Time
	Code           string
	Reason         string
}

// ListParkedOutbox lists parked outbox rows.
func (s *Store) ListParkedOutbox(ctx context.Context, f ParkedFilter) ([]ParkedMessage, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, instance_id, element_id, target, message_name, correlation_key, attempts,
		       created_at, parked_at, code, reason FROM outbox_parked
		 WHERE ($1 = '' OR instance_id = $1) AND id > $2 ORDER BY id LIMIT $3`, f.InstanceID, f.After, f.Limit)
	if err != nil {
		return nil, translate(err, "listing parked outbox rows")
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ParkedMessage, error) {
		var p ParkedMessage
		err := r.Scan(&p.ID, &p.InstanceID, &p.ElementID, &p.Target, &p.Message, &p.CorrelationKey, &p.Attempts,
			&p.CreatedAt, &p.ParkedAt, &p.Code, &p.Reason)
		return p, err
	})
	return list, translate(err, "listing parked outbox rows")
}

// RetryParkedOutbox moves a parked row back to the outbox, unleased and with
// no attempts, under a new seq: it is published behind every row of its
// class written since, by any publisher's lease. A row not parked is
// ErrNotFound.
func (s *Store) RetryParkedOutbox(ctx context.Context, id string) error {
	// A row of the same id written to the outbox meanwhile is that message
	// queued already: the parked copy goes all the same.
	var n int
	err := s.pool.QueryRow(ctx, `WITH p AS (DELETE FROM outbox_parked WHERE id = $1 RETURNING *),
		back AS (INSERT INTO outbox (id, instance_id, element_id, target, message_name, correlation_key, variables, routing_key,
		                             body, created_at)
		         SELECT id, instance_id, element_id, target, message_name, correlation_key, variables, routing_key, body, created_at
		           FROM p
		         ON CONFLICT (id) DO NOTHING)
		SELECT count(*) FROM p`, id).Scan(&n)
	if err != nil {
		return translate(err, "retrying parked outbox row "+id)
	}
	if n == 0 {
		return fmt.Errorf("parked outbox row %s: %w", id, ErrNotFound)
	}
	return nil
}

// DiscardParkedOutbox deletes a parked row for good. A row not parked is
// ErrNotFound.
func (s *Store) DiscardParkedOutbox(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx, "DELETE FROM outbox_parked WHERE id = $1", id)
	if err != nil {
		return translate(err, "discarding parked outbox row "+id)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("parked outbox row %s: %w", id, ErrNotFound)
	}
	return nil
}

// TrimOutbox deletes up to limit rows published longer ago than retention.
func (s *Store) TrimOutbox(ctx context.Context, retention time.Duration, limit int) (int64, error) {
	tag, err := s.pool.Exec(ctx, trimOutboxSQL, retention, limit)
	return tag.RowsAffected(), translate(err, "trimming outbox")
}

// NotifyOutbox makes every commit that wrote outbox rows call written once
// it committed (the publisher's Wake), so that an idle publisher leases them
// at once rather than at its next poll. written must not block. Call it
// before the store is used.
func (s *Store) NotifyOutbox(written func()) { s.outboxWritten = written }

// outboxWrites counts the outbox rows one transaction writes.
type outboxWrites struct {
	rows int
	last string // the message name of the latest row written
}

// outboxWrites starts the count of a transaction about to be sent.
func (s *Store) outboxWrites() *outboxWrites { return &outboxWrites{} }

// queue queues an outbox insert made with outboxInsert and counts the rows
// it wrote.
func (w *outboxWrites) queue(b *pgx.Batch, sql string, args ...any) {
	w.queueScan(b, nil, sql, args...)
}

// queueScan is queue for an insert that returns more columns after the
// message name (outboxRelayReturning): each row's are scanned into more.
func (w *outboxWrites) queueScan(b *pgx.Batch, more []any, sql string, args ...any) {
	b.Queue(sql, args...).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			if err := rows.Scan(append([]any{&w.last}, more...)...); err != nil {
				return err
			}
			w.rows++
		}
		return rows.Err()
	})
}

// notifyOutbox tells the publisher that a committed transaction wrote rows.
func (s *Store) notifyOutbox(w *outboxWrites) {
	if s.outboxWritten != nil && w.rows > 0 {
		s.outboxWritten()
	}
}

// outboxInsert makes an INSERT INTO outbox of the rows of sel (whose columns
// are cols, typed by casts; with, if set, are more WITH queries, each ending
// in a comma; dedupe: a row whose id exists is not written) that returns
// each row's message name (outboxRelayReturning adds more). The rows are
// written unleased: any publisher's lease takes them.
func outboxInsert(with, cols, sel string, dedupe bool) string {
	conflict := ""
	if dedupe {
		conflict = "ON CONFLICT (id) DO NOTHING"
	}
	return fmt.Sprintf(`WITH %[3]s v (%[1]s) AS (%[2]s)
INSERT INTO outbox AS o (%[1]s)
SELECT v.* FROM v
%[4]s
RETURNING o.message_name`, cols, sel, with, conflict)
}

// outboxRelayReturning, appended to an outboxInsert, also returns each
// row's relay: its id, instance, routing key and body (RelayOut).
const outboxRelayReturning = ", o.id, o.instance_id, o.routing_key, o.body"

package store

import (
	"cmp"
	"context"
	"encoding/json"
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
	// Age is how long ago the row was written, by the database's clock, when
	// it was leased.
	Age time.Duration
	// Behind: an earlier row of the instance is held by an earlier lease of
	// the same owner, to be published first.
	Behind bool
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
//   - a row behind rows $1 still holds is returned with behind set: $1 must
//     publish it only after those (the publisher chains its batches).
//
// Deferred rows (a failed publish) have no holder and locked_until in the
// future: their backoff. OFFSET 0 keeps each NOT EXISTS a probe per row on
// outbox_instance_unpublished: as an anti-join the planner may read every
// unpublished row, or every candidate's earlier rows, on each lease.
const leaseOutboxSQL = `
WITH cand AS (
	SELECT o.id, o.instance_id, o.seq FROM outbox o
	 WHERE o.published_at IS NULL
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
RETURNING o.id, o.seq, o.instance_id, o.element_id, o.target, o.message_name, o.correlation_key,
          o.variables, o.routing_key, o.body, o.attempts, EXTRACT(EPOCH FROM now() - o.created_at)::float8,
          EXISTS (SELECT 1 FROM outbox e
                   WHERE e.instance_id = c.instance_id AND e.seq < c.seq AND e.published_at IS NULL
                     AND e.locked_by = $1 AND e.locked_until >= now() OFFSET 0)`

// leaseOrderSQL makes the lease walk outbox_unpublished in seq order and stop
// at its limit, whatever the table's statistics say: a table that grew
// since its last ANALYZE (or never had one) looks nearly empty, and the
// planner then reads and sorts every unpublished row on each lease.
const leaseOrderSQL = "SELECT set_config('enable_sort', 'off', true), set_config('enable_bitmapscan', 'off', true)"

// LeaseOutbox leases up to limit unpublished outbox rows to owner for lease
// (see leaseOutboxSQL), in seq order. Leases are soft state (a lost one
// costs at most a second publish), so they skip the WAL flush.
func (s *Store) LeaseOutbox(ctx context.Context, owner string, limit int, lease time.Duration) ([]OutboxRow, error) {
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
		var o OutboxRow
		var age float64
		err := r.Scan(&o.ID, &o.Seq, &o.InstanceID, &o.ElementID, &o.Target, &o.Message, &o.CorrelationKey,
			&o.Variables, &o.RoutingKey, &o.Body, &o.Attempts, &age, &o.Behind)
		o.Age = time.Duration(age * float64(time.Second))
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

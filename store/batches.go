package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Batch is a batch operation (0033) as its runner leases it: the
// instances Filter matches (walked by keyset from WalkedTo), or IDs.
type Batch struct {
	ID            string
	Operation     string
	Filter        *InstanceFilter
	IDs           []string
	TargetVersion int
	Mapping       map[string]string
	// WalkedTo is the last instance id handled; WalkDone says the walk
	// has passed the last one.
	WalkedTo string
	WalkDone bool
}

// CreateBatch records a batch operation; its runner walks it.
func (s *Store) CreateBatch(ctx context.Context, b Batch) error {
	var filter []byte
	if b.Filter != nil {
		f := *b.Filter
		f.Limit, f.After, f.Scan = 0, "", 0 // the runner pages it
		var err error
		if filter, err = json.Marshal(f); err != nil {
			return fmt.Errorf("encoding the filter of batch %s: %w", b.ID, err)
		}
	}
	if b.Mapping == nil {
		b.Mapping = map[string]string{}
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO batches (id, operation, filter, ids, target_version, mapping)
		VALUES ($1, $2, $3, $4, NULLIF($5, 0), $6)`, b.ID, b.Operation, filter, b.IDs, b.TargetVersion, b.Mapping)
	return translate(err, "creating batch "+b.ID)
}

// BatchProgress is a batch operation and how far it went.
type BatchProgress struct {
	ID        string
	Operation string
	// State is running until every instance is done, refused or failed.
	State string
	// Total is the number of ids named; nil for a filter.
	Total *int
	Done  int64
	// Refused counts the instances the operation refused, by fault code.
	Refused map[string]int64
	// Failed counts the instances whose operation failed with no code.
	Failed int64
	// Retrying counts the instances put off by a held claim.
	Retrying int64
	// WalkedTo is the last instance id the walk handled.
	WalkedTo  string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// BatchStatus reads a batch operation and its progress. ErrNotFound when
// there is none.
func (s *Store) BatchStatus(ctx context.Context, id string) (BatchProgress, error) {
	b := BatchProgress{ID: id}
	var ids *int
	err := s.pool.QueryRow(ctx, `SELECT operation, state, done, failed, refused, walked_to, cardinality(ids),
			(SELECT count(*) FROM batch_retries r WHERE r.batch_id = b.id), created_at, updated_at
		  FROM batches b WHERE id = $1`, id).
		Scan(&b.Operation, &b.State, &b.Done, &b.Failed, &b.Refused, &b.WalkedTo, &ids, &b.Retrying, &b.CreatedAt, &b.UpdatedAt)
	b.Total = ids
	return b, translate(err, "reading batch "+id)
}

// LeaseBatch takes or renews the lease on one running batch for holder:
// the one it holds, else the oldest free or lapsed one. ok false: none to
// run.
func (s *Store) LeaseBatch(ctx context.Context, holder string, lease time.Duration) (b Batch, ok bool, err error) {
	var filter []byte
	var target *int
	err = s.pool.QueryRow(ctx, `
		WITH pick AS (
			SELECT id FROM batches
			 WHERE state = 'running' AND (locked_by IS NULL OR locked_by = $1 OR locked_until < now())
			 ORDER BY locked_by = $1 DESC NULLS LAST, created_at LIMIT 1
			 FOR UPDATE SKIP LOCKED
		)
		UPDATE batches b SET locked_by = $1, locked_until = now() + $2::interval
		  FROM pick WHERE b.id = pick.id
		RETURNING b.id, b.operation, b.filter, b.ids, b.target_version, b.mapping, b.walked_to, b.walk_done`,
		holder, lease).Scan(&b.ID, &b.Operation, &filter, &b.IDs, &target, &b.Mapping, &b.WalkedTo, &b.WalkDone)
	if isNoRows(err) {
		return b, false, nil
	}
	if err != nil {
		return b, false, translate(err, "leasing a batch")
	}
	if target != nil {
		b.TargetVersion = *target
	}
	if filter != nil {
		b.Filter = &InstanceFilter{}
		if err := json.Unmarshal(filter, b.Filter); err != nil {
			return b, false, fmt.Errorf("decoding the filter of batch %s: %w", b.ID, err)
		}
	}
	return b, true, nil
}

// DueBatchRetries lists up to limit instances of batch id whose earlier
// try was put off (a held claim) and are due again, with their tries.
func (s *Store) DueBatchRetries(ctx context.Context, id string, limit int) (ids []string, attempts []int, err error) {
	rows, err := s.pool.Query(ctx, `SELECT instance_id, attempts FROM batch_retries
		WHERE batch_id = $1 AND next_at <= now() ORDER BY next_at LIMIT $2`, id, limit)
	if err != nil {
		return nil, nil, translate(err, "listing batch retries")
	}
	for rows.Next() {
		var i string
		var a int
		if err := rows.Scan(&i, &a); err != nil {
			rows.Close()
			return nil, nil, translate(err, "listing batch retries")
		}
		ids, attempts = append(ids, i), append(attempts, a)
	}
	return ids, attempts, translate(rows.Err(), "listing batch retries")
}

// WalkBatch reads the next instances of b after b.WalkedTo: at most limit,
// in id order, by the instance list's own walk for a filter (at most scan
// instances walked). next is the cursor to store; done says the walk
// passed the last instance.
func (s *Store) WalkBatch(ctx context.Context, b Batch, limit, scan int) (ids []string, next string, done bool, err error) {
	if b.Filter == nil {
		rows, err := s.pool.Query(ctx, `SELECT id FROM unnest($1::text[]) id WHERE id > $2 ORDER BY id LIMIT $3`, b.IDs, b.WalkedTo, limit)
		if err != nil {
			return nil, "", false, translate(err, "walking batch "+b.ID)
		}
		ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, "", false, translate(err, "walking batch "+b.ID)
		}
		if len(ids) < limit {
			return ids, b.WalkedTo, true, nil
		}
		return ids, ids[len(ids)-1], false, nil
	}
	f := *b.Filter
	f.After, f.Limit, f.Scan = b.WalkedTo, limit, scan
	p, err := s.ListInstances(ctx, f)
	if err != nil {
		return nil, "", false, err
	}
	for _, i := range p.Instances {
		ids = append(ids, i.ID)
	}
	if p.Next == "" {
		return ids, b.WalkedTo, true, nil
	}
	return ids, p.Next, false, nil
}

// BatchOutcome is what became of one instance of a batch: Retry set, it
// is tried again after RetryIn; else Code "" is done, a code of the
// operation's own refusal is refused, and Failed an error of no code.
type BatchOutcome struct {
	InstanceID string
	Retry      bool
	Tries      int
	RetryIn    time.Duration
	Code       string
	Failed     bool
}

// ErrBatchLeaseLost is SettleBatch's answer when holder no longer holds
// the batch's lease: another replica took it over and works the batch.
var ErrBatchLeaseLost = errors.New("the batch's lease was lost")

// SettleBatch records outcomes of batch id and its walk's new cursor, in one
// transaction fenced on holder's lease, and marks the batch done when its
// walk is done and nothing waits for a retry.
func (s *Store) SettleBatch(ctx context.Context, id, holder, walkedTo string, walkDone bool, outs []BatchOutcome) error {
	var done, failed int64
	refused := map[string]int64{}
	var retry, settled []string
	var tries []int
	var secs []float64
	for _, o := range outs {
		switch {
		case o.Retry:
			retry, tries, secs = append(retry, o.InstanceID), append(tries, o.Tries), append(secs, o.RetryIn.Seconds())
			continue
		case o.Failed:
			failed++
		case o.Code != "":
			refused[o.Code]++
		default:
			done++
		}
		settled = append(settled, o.InstanceID)
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE batches b SET done = done + $3, failed = failed + $4, walked_to = $5, walk_done = $6,
				refused = (SELECT coalesce(jsonb_object_agg(k, coalesce((b.refused->>k)::bigint, 0) + coalesce(($7::jsonb->>k)::bigint, 0)), '{}')
				             FROM (SELECT jsonb_object_keys(b.refused) UNION SELECT jsonb_object_keys($7::jsonb)) c(k)),
				updated_at = now()
			 WHERE id = $1 AND locked_by = $2`, id, holder, done, failed, walkedTo, walkDone, refused)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return ErrBatchLeaseLost
		}
		if _, err := tx.Exec(ctx, `DELETE FROM batch_retries WHERE batch_id = $1 AND instance_id = ANY($2)`, id, settled); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO batch_retries (batch_id, instance_id, attempts, next_at)
			SELECT $1, r.id, r.tries, now() + make_interval(secs => r.secs) FROM unnest($2::text[], $3::int[], $4::float8[]) AS r(id, tries, secs)
			ON CONFLICT (batch_id, instance_id) DO UPDATE SET attempts = EXCLUDED.attempts, next_at = EXCLUDED.next_at`,
			id, retry, tries, secs); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE batches SET state = 'done'
			 WHERE id = $1 AND walk_done AND NOT EXISTS (SELECT 1 FROM batch_retries WHERE batch_id = $1)`, id)
		return err
	})
	if errors.Is(err, ErrBatchLeaseLost) {
		return err
	}
	return translate(err, "settling batch "+id)
}

// ReleaseBatches hands back holder's batch leases (a clean stop).
func (s *Store) ReleaseBatches(ctx context.Context, holder string) error {
	_, err := s.pool.Exec(ctx, `UPDATE batches SET locked_by = NULL, locked_until = NULL WHERE locked_by = $1`, holder)
	return translate(err, "releasing batch leases")
}

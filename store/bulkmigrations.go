package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Migration is a bulk migration job as its runner leases it.
type Migration struct {
	ID          string
	Definition  string
	FromVersion int
	ToVersion   int
	Mapping     map[string]string
}

// CreateMigration records a bulk migration of every active instance of
// definition@from to version to, in one transaction.
func (s *Store) CreateMigration(ctx context.Context, id, definition string, from, to int, mapping map[string]string) error {
	if mapping == nil {
		mapping = map[string]string{}
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO migrations (id, definition_key, from_version, to_version, mapping) VALUES ($1, $2, $3, $4, $5)`,
			id, definition, from, to, mapping); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO migration_items (migration_id, instance_id)
			SELECT $1, id FROM instances WHERE definition_key = $2 AND definition_version = $3 AND status = 'active' AND version > 0`,
			id, definition, from)
		return err
	})
	return translate(err, "creating migration "+id)
}

// MigrationProgress is a bulk migration and how far it went.
type MigrationProgress struct {
	ID          string
	Definition  string
	FromVersion int
	ToVersion   int
	State       string
	Total       int
	Migrated    int
	Retrying    int
	Refused     []MigrationRefusal
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// MigrationRefusal is an instance a bulk migration could not move, and why.
type MigrationRefusal struct {
	InstanceID, Code, Detail string
}

// MigrationStatus reads a bulk migration and its progress. ErrNotFound when
// there is none.
func (s *Store) MigrationStatus(ctx context.Context, id string) (MigrationProgress, error) {
	m := MigrationProgress{ID: id}
	b := &pgx.Batch{}
	b.Queue(`SELECT definition_key, from_version, to_version, state, created_at, updated_at FROM migrations WHERE id = $1`, id).
		QueryRow(func(r pgx.Row) error {
			return r.Scan(&m.Definition, &m.FromVersion, &m.ToVersion, &m.State, &m.CreatedAt, &m.UpdatedAt)
		})
	b.Queue(`SELECT count(*), count(*) FILTER (WHERE state = 'migrated'), count(*) FILTER (WHERE state = 'pending' AND attempts > 0)
		FROM migration_items WHERE migration_id = $1`, id).QueryRow(func(r pgx.Row) error {
		return r.Scan(&m.Total, &m.Migrated, &m.Retrying)
	})
	b.Queue(`SELECT instance_id, code, detail FROM migration_items WHERE migration_id = $1 AND state = 'refused' ORDER BY instance_id`, id).
		Query(func(rows pgx.Rows) error {
			var err error
			m.Refused, err = pgx.AppendRows(m.Refused, rows, func(r pgx.CollectableRow) (MigrationRefusal, error) {
				var x MigrationRefusal
				return x, r.Scan(&x.InstanceID, &x.Code, &x.Detail)
			})
			return err
		})
	return m, translate(s.pool.SendBatch(ctx, b).Close(), "reading migration "+id)
}

// LeaseMigration takes or renews the lease on one running migration for
// holder: the one it holds, else the oldest free or lapsed one. ok false:
// none to run.
func (s *Store) LeaseMigration(ctx context.Context, holder string, lease time.Duration) (m Migration, ok bool, err error) {
	err = s.pool.QueryRow(ctx, `
		WITH pick AS (
			SELECT id FROM migrations
			 WHERE state = 'running' AND (locked_by IS NULL OR locked_by = $1 OR locked_until < now())
			 ORDER BY locked_by = $1 DESC NULLS LAST, created_at LIMIT 1
			 FOR UPDATE SKIP LOCKED
		)
		UPDATE migrations m SET locked_by = $1, locked_until = now() + $2::interval
		  FROM pick WHERE m.id = pick.id
		RETURNING m.id, m.definition_key, m.from_version, m.to_version, m.mapping`, holder, lease).
		Scan(&m.ID, &m.Definition, &m.FromVersion, &m.ToVersion, &m.Mapping)
	if isNoRows(err) {
		return m, false, nil
	}
	return m, err == nil, translate(err, "leasing a migration")
}

// DueMigrationItems lists up to limit pending instances of migration id due
// for an attempt.
func (s *Store) DueMigrationItems(ctx context.Context, id string, limit int) (ids []string, attempts []int, err error) {
	rows, err := s.pool.Query(ctx, `SELECT instance_id, attempts FROM migration_items
		WHERE migration_id = $1 AND state = 'pending' AND next_at <= now() ORDER BY next_at LIMIT $2`, id, limit)
	if err != nil {
		return nil, nil, translate(err, "listing migration items")
	}
	for rows.Next() {
		var i string
		var a int
		if err := rows.Scan(&i, &a); err != nil {
			rows.Close()
			return nil, nil, translate(err, "listing migration items")
		}
		ids, attempts = append(ids, i), append(attempts, a)
	}
	return ids, attempts, translate(rows.Err(), "listing migration items")
}

// ItemOutcome is what became of one instance of a bulk migration.
type ItemOutcome struct {
	InstanceID string
	// State is migrated, refused, or pending (retry after RetryIn).
	State        string
	RetryIn      time.Duration
	Code, Detail string
}

// SettleMigrationItems records outcomes of instances of migration id, fenced
// on holder's lease, and marks the job done when nothing is pending.
func (s *Store) SettleMigrationItems(ctx context.Context, id, holder string, outs []ItemOutcome) error {
	ids, states, secs, codes, details := make([]string, len(outs)), make([]string, len(outs)), make([]float64, len(outs)), make([]string, len(outs)), make([]string, len(outs))
	for i, o := range outs {
		ids[i], states[i], secs[i], codes[i], details[i] = o.InstanceID, o.State, o.RetryIn.Seconds(), o.Code, o.Detail
	}
	b := &pgx.Batch{}
	b.Queue(`UPDATE migration_items i SET state = o.state, attempts = i.attempts + 1, next_at = now() + make_interval(secs => o.secs),
			code = NULLIF(o.code, ''), detail = NULLIF(o.detail, '')
		  FROM unnest($3::text[], $4::text[], $5::float8[], $6::text[], $7::text[]) AS o(instance_id, state, secs, code, detail)
		 WHERE i.migration_id = $1 AND i.instance_id = o.instance_id
		   AND EXISTS (SELECT 1 FROM migrations m WHERE m.id = $1 AND m.locked_by = $2)`, id, holder, ids, states, secs, codes, details)
	b.Queue(`UPDATE migrations SET updated_at = now(),
			state = CASE WHEN EXISTS (SELECT 1 FROM migration_items WHERE migration_id = $1 AND state = 'pending') THEN 'running' ELSE 'done' END
		 WHERE id = $1 AND locked_by = $2`, id, holder)
	return translate(s.pool.SendBatch(ctx, b).Close(), fmt.Sprintf("settling migration %s", id))
}

// ReleaseMigrations hands back holder's migration leases (a clean stop).
func (s *Store) ReleaseMigrations(ctx context.Context, holder string) error {
	_, err := s.pool.Exec(ctx, `UPDATE migrations SET locked_by = NULL, locked_until = NULL WHERE locked_by = $1`, holder)
	return translate(err, "releasing migration leases")
}

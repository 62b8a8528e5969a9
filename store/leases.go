package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// AcquireLease takes or renews the named lease for holder until ttl from now
// (database clock), by compare-and-set: it succeeds when the lease is free,
// lapsed, or already holder's. It reports whether holder holds it now.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	var got string
	err := s.pool.QueryRow(ctx, `
		INSERT INTO leases AS l (name, holder, expires_at) VALUES ($1, $2, now() + $3::interval)
		ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
		 WHERE l.holder = EXCLUDED.holder OR l.expires_at < now()
		RETURNING holder`, name, holder, ttl).Scan(&got)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, translate(err, "acquiring lease "+name)
	}
	return true, nil
}

// ReleaseLease gives the named lease up if holder holds it, so that another
// replica takes it at once instead of after its TTL.
func (s *Store) ReleaseLease(ctx context.Context, name, holder string) error {
	_, err := s.pool.Exec(ctx, "DELETE FROM leases WHERE name = $1 AND holder = $2", name, holder)
	return translate(err, "releasing lease "+name)
}

// Lease reads the named lease: its holder and when it expires (database
// clock). found is false when nobody holds it.
func (s *Store) Lease(ctx context.Context, name string) (holder string, expiresAt time.Time, found bool, err error) {
	err = s.pool.QueryRow(ctx, "SELECT holder, expires_at FROM leases WHERE name = $1", name).Scan(&holder, &expiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", time.Time{}, false, nil
	}
	if err != nil {
		return "", time.Time{}, false, translate(err, "reading lease "+name)
	}
	return holder, expiresAt, true, nil
}

// ReplicaVersion is what one replica process runs.
type ReplicaVersion struct {
	ID, Release, Revision string
	// Schema is the newest migration the build carries (SchemaVersion).
	Schema int
}

// RecordReplicaVersion records what the process holding a replica
// registration (holder) runs, and forgets the rows of holders whose
// registration is gone (a process that crashed).
func (s *Store) RecordReplicaVersion(ctx context.Context, holder string, v ReplicaVersion) error {
	_, err := s.pool.Exec(ctx, `
		WITH gone AS (DELETE FROM replica_versions r WHERE NOT EXISTS (SELECT 1 FROM leases l WHERE l.holder = r.holder) AND r.holder <> $1)
		INSERT INTO replica_versions (holder, replica_id, release, revision, schema_version) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (holder) DO UPDATE SET release = EXCLUDED.release, revision = EXCLUDED.revision, schema_version = EXCLUDED.schema_version`,
		holder, v.ID, v.Release, v.Revision, v.Schema)
	return translate(err, "recording the replica's version")
}

// ForgetReplicaVersion removes holder's row (its registration is given up).
func (s *Store) ForgetReplicaVersion(ctx context.Context, holder string) error {
	_, err := s.pool.Exec(ctx, "DELETE FROM replica_versions WHERE holder = $1", holder)
	return translate(err, "forgetting the replica's version")
}

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

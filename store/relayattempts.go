package store

import (
	"context"
	"fmt"
	"time"
)

// CountRelayFailure counts one more transient failure of the relay
// messageID and returns how many it has had so far, on every replica: the
// relay retry cap reads it, so it holds across replicas and restarts. One
// statement; the row's updated_at lets the sweeper trim counts of relays
// that came to an end (TrimRelayAttempts).
func (s *Store) CountRelayFailure(ctx context.Context, messageID string) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `INSERT INTO relay_attempts (message_id, attempts) VALUES ($1, 1)
		ON CONFLICT (message_id) DO UPDATE SET attempts = relay_attempts.attempts + 1, updated_at = now()
		RETURNING attempts`, messageID).Scan(&n)
	return n, translate(err, fmt.Sprintf("counting a failure of relay %s", messageID))
}

// ForgetRelayFailures deletes the failure count of a relay dead-lettered
// for them, so that the same message published again starts afresh.
func (s *Store) ForgetRelayFailures(ctx context.Context, messageID string) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM relay_attempts WHERE message_id = $1`, messageID)
	return translate(err, fmt.Sprintf("forgetting the failures of relay %s", messageID))
}

// trimRelayAttemptsSQL deletes up to $2 failure counts not updated for $1.
const trimRelayAttemptsSQL = `DELETE FROM relay_attempts WHERE message_id = ANY (ARRAY(
	SELECT message_id FROM relay_attempts WHERE updated_at < now() - $1::interval LIMIT $2))`

// TrimRelayAttempts deletes up to limit failure counts not updated for
// retention: their relays were applied, dead-lettered or given up long ago.
func (s *Store) TrimRelayAttempts(ctx context.Context, retention time.Duration, limit int) (int64, error) {
	tag, err := s.pool.Exec(ctx, trimRelayAttemptsSQL, retention, limit)
	return tag.RowsAffected(), translate(err, "trimming relay attempts")
}

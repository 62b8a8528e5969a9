package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// SweptClaim is a stale claim the sweep cleared.
type SweptClaim struct {
	InstanceID string
	Owner      string
	Age        time.Duration
}

// SweepClaims clears up to limit claims older than timeout, by age and
// owner-blind. A stale claim on a start that never committed (version 0) is
// removed with its row, as Release would have done. SKIP LOCKED leaves rows
// that a claim or a commit is writing right now to the next sweep.
func (s *Store) SweepClaims(ctx context.Context, timeout time.Duration, limit int) ([]SweptClaim, error) {
	rows, err := s.pool.Query(ctx, sweepClaimsSQL, timeout, limit)
	if err != nil {
		return nil, translate(err, "sweeping claims")
	}
	swept, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (SweptClaim, error) {
		var c SweptClaim
		err := r.Scan(&c.InstanceID, &c.Owner, &c.Age)
		return c, err
	})
	return swept, translate(err, "sweeping claims")
}

// BufferedMessage is a relay kept until a subscription opens or its TTL passes.
type BufferedMessage struct {
	ID             int64
	MessageID      string
	Message        string
	CorrelationKey string
	Body           []byte
	RoutingKey     string
	ExpiresAt      time.Time
	// Applied: a copy of the relay was applied directly; nothing to dead-letter.
	Applied bool
}

// ExpiredBuffered lists up to limit buffered messages past their TTL, oldest
// first. They stay until DeleteBuffered: a dead letter is published first.
func (s *Store) ExpiredBuffered(ctx context.Context, limit int) ([]BufferedMessage, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT b.id, b.message_id, b.message_name, b.correlation_key, b.body, b.routing_key, b.expires_at,
		       EXISTS (SELECT 1 FROM inbox i WHERE i.message_id = b.message_id)
		  FROM buffered_messages b WHERE b.expires_at <= now() ORDER BY b.expires_at LIMIT $1`, limit)
	if err != nil {
		return nil, translate(err, "listing expired buffered messages")
	}
	msgs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (BufferedMessage, error) {
		var m BufferedMessage
		err := r.Scan(&m.ID, &m.MessageID, &m.Message, &m.CorrelationKey, &m.Body, &m.RoutingKey, &m.ExpiresAt, &m.Applied)
		return m, err
	})
	return msgs, translate(err, "listing expired buffered messages")
}

// DeleteBuffered deletes buffered messages by id.
func (s *Store) DeleteBuffered(ctx context.Context, ids []int64) error {
	_, err := s.pool.Exec(ctx, "DELETE FROM buffered_messages WHERE id = ANY($1)", ids)
	return translate(err, "deleting buffered messages")
}

package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrBuffered reports a relay kept in buffered_messages until a subscription
// opens or its TTL passes.
var ErrBuffered = errors.New("store: message buffered")

// ErrBufferedGone reports that a buffered message a step meant to consume is
// gone; the step's commit rolled back and may be recomputed without it.
var ErrBufferedGone = errors.New("store: buffered message gone")

// BufferedMatch is a buffered message that a subscription opened by a step
// matches. The commit that found it rolled back, the claim is still held,
// and the step applies the message and commits again (StepWrites.Consumed).
type BufferedMatch struct {
	ID             int64          `json:"id"`
	MessageID      string         `json:"message_id"`
	Message        string         `json:"message"`
	CorrelationKey string         `json:"correlation_key"`
	Variables      map[string]any `json:"variables"`
}

func (m *BufferedMatch) Error() string {
	return fmt.Sprintf("buffered message %s (%q, key %q) matches a subscription the step opened", m.MessageID, m.Message, m.CorrelationKey)
}

// The look for buffered messages that match the subscriptions the steps of a
// commit opened: last in the commit's pipeline, so that it sees every
// subscription the transaction left open ($1, $2 and $3 the instances, tokens
// and elements of waitRows.addLooked, joined with subscriptions: a consumed
// message's effects may have closed one again). It pairs with the buffering
// side (sutra_resolve_or_buffer): each takes the advisory lock of a
// (message, correlation key) before it reads the other's table, so a relay buffered now and a subscription opened
// now cannot miss each other. The look is a statement of its own so that its
// snapshot, taken once the locks are held, sees a message buffered by a
// transaction that committed while this one waited for its lock. A match
// raises SU003 (sutra_buffered_found, migration 0013), which rolls the
// commit back.
const (
	// The locks, in one order for every locker (no deadlock between two
	// commits); the sorted subquery is scanned in its order.
	bufferedLocksSQL = `SELECT pg_advisory_xact_lock(7401, k.h)
  FROM (SELECT DISTINCT hashtext(s.message_name || chr(31) || s.correlation_key) AS h
          FROM subscriptions s JOIN unnest($1::text[], $2::text[], $3::text[]) AS w(id, tok, el)
            ON s.instance_id = w.id AND s.token_id = w.tok AND s.element_id = w.el
         ORDER BY 1 OFFSET 0) k`
	// The oldest match that no copy applied directly; the raise runs on it
	// only (the LIMIT keeps the subquery from being flattened).
	bufferedLookSQL = `SELECT sutra_buffered_found(m.id, m.message_id, m.message_name, m.correlation_key, m.variables)
  FROM (SELECT b.id, b.message_id, b.message_name, b.correlation_key, b.variables
          FROM subscriptions s JOIN unnest($1::text[], $2::text[], $3::text[]) AS w(id, tok, el)
                 ON s.instance_id = w.id AND s.token_id = w.tok AND s.element_id = w.el
          JOIN buffered_messages b
                 ON b.message_name = s.message_name AND b.correlation_key = s.correlation_key
                AND b.expires_at > now() AND b.start_definition IS NULL
         WHERE NOT EXISTS (SELECT 1 FROM inbox WHERE message_id = b.message_id)
         ORDER BY b.id LIMIT 1) m`
)

// bufferedMatch decodes the match the look raised.
func bufferedMatch(err error) (*BufferedMatch, bool) {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != sqlstateBufferedMatch {
		return nil, false
	}
	m := &BufferedMatch{}
	if json.Unmarshal([]byte(pgErr.Detail), m) != nil {
		return nil, false
	}
	return m, true
}

// Buffer is a correlate-by-key relay that may wait for its subscription.
type Buffer struct {
	Message        string
	CorrelationKey string
	MessageID      string
	TTL            time.Duration
	Variables      map[string]any
	// Body and RoutingKey are kept to dead-letter the relay unchanged when
	// its TTL passes.
	Body       []byte
	RoutingKey string
}

// ResolveOrBuffer is ResolveSubscription for a relay with a TTL: it returns
// the instance whose oldest open subscription matches or, when none does,
// buffers the relay and returns ErrBuffered. One round trip. A relay already
// applied is ErrDuplicate.
func (s *Store) ResolveOrBuffer(ctx context.Context, b Buffer) (string, error) {
	vars := b.Variables
	if vars == nil {
		vars = map[string]any{}
	}
	var id *string
	var applied bool
	err := s.pool.QueryRow(ctx, "SELECT instance_id, applied FROM sutra_resolve_or_buffer($1, $2, $3, $4, $5, $6, $7)",
		b.Message, b.CorrelationKey, b.MessageID, b.TTL, vars, b.Body, b.RoutingKey).Scan(&id, &applied)
	switch {
	case err != nil:
		return "", translate(err, "resolving or buffering message "+b.Message)
	case applied:
		return "", ErrDuplicate
	case id == nil:
		return "", ErrBuffered
	}
	return *id, nil
}

// translateBuffer maps the buffering SQLSTATEs of a commit; ok false leaves
// err to translate.
func translateBuffer(err error) (error, bool) {
	if m, ok := bufferedMatch(err); ok {
		return m, true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == sqlstateBufferedGone {
		return ErrBufferedGone, true
	}
	return nil, false
}

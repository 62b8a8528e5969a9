package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sutra-run/worker/engine"
)

// ErrBuffered reports a relay kept in buffered_messages until a subscription
// opens or its TTL passes.
var ErrBuffered = errors.New("store: message buffered")

// ErrBufferedGone reports that a buffered message a step meant to consume is
// gone; the step's commit rolled back and may be recomputed without it.
var ErrBufferedGone = errors.New("store: buffered message gone")

// BufferedMatch is a buffered message that a subscription opened by a step
// matches. The transaction that found it rolled back, the claim is still
// held, and the step applies the message and is written again
// (StepWrites.Consumed).
type BufferedMatch struct {
	ID             int64
	MessageID      string
	Message        string
	CorrelationKey string
	Variables      map[string]any
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
// raises SU003 with the buffered row's id (sutra_buffered_found, migration
// 0018), which rolls the transaction back; the store then reads the row
// (bufferedRow).
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
	bufferedLookSQL = `SELECT sutra_buffered_found(m.id)
  FROM (SELECT b.id
          FROM subscriptions s JOIN unnest($1::text[], $2::text[], $3::text[]) AS w(id, tok, el)
                 ON s.instance_id = w.id AND s.token_id = w.tok AND s.element_id = w.el
          JOIN buffered_messages b
                 ON b.message_name = s.message_name AND b.correlation_key = s.correlation_key
                AND b.expires_at > now() AND b.start_definition IS NULL
         WHERE NOT EXISTS (SELECT 1 FROM inbox WHERE message_id = b.message_id)
         ORDER BY b.id LIMIT 1) m`
)

// matchedRow is the id of the buffered row whose match the look raised (ok
// false: err is no such raise).
func matchedRow(err error) (id int64, ok bool) {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != sqlstateBufferedMatch {
		return 0, false
	}
	id, perr := strconv.ParseInt(pgErr.Detail, 10, 64)
	return id, perr == nil
}

// bufferedRow reads the buffered message of row id after a look raised its
// match: ErrBufferedGone when it was consumed or expired meanwhile (the step
// is written again without it, and its look finds what is left).
func (s *Store) bufferedRow(ctx context.Context, id int64) (*BufferedMatch, error) {
	m := &BufferedMatch{ID: id}
	err := s.pool.QueryRow(ctx, `SELECT message_id, message_name, correlation_key, variables FROM buffered_messages
  WHERE id = $1 AND expires_at > now()`, id).Scan(&m.MessageID, &m.Message, &m.CorrelationKey, &m.Variables)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, ErrBufferedGone
	case err != nil:
		return nil, translate(err, fmt.Sprintf("reading buffered message %d", id))
	}
	return m, nil
}

// opens says whether c opens a subscription that buffered message m matches
// (its step's or a message's it applied).
func (m *BufferedMatch) opens(c StepWrites) bool {
	match := func(subs []engine.Subscription) bool {
		for _, s := range subs {
			if !s.Signal && s.Message == m.Message && s.CorrelationKey == m.CorrelationKey {
				return true
			}
		}
		return false
	}
	if match(c.Effects.Subscriptions) {
		return true
	}
	for _, p := range c.Earlier {
		if match(p.Effects.Subscriptions) {
			return true
		}
	}
	for _, x := range c.Consumed {
		if match(x.Effects.Subscriptions) {
			return true
		}
	}
	return false
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

// bufferedGone maps SU004 (a buffered message the step meant to consume is
// gone); ok false leaves err to translate.
func bufferedGone(err error) (error, bool) {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == sqlstateBufferedGone {
		return ErrBufferedGone, true
	}
	return nil, false
}

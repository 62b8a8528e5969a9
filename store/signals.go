package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sutra-run/worker/engine"
)

// A broadcast of a signal reaches the instances waiting for it through the
// outbox: one relay per signal subscription open when the broadcast began,
// and one start relay per definition whose latest version has a signal start
// event for the name. Each relay resumes (or starts) its instance as a fresh
// delivery under its own claim; the broadcast itself claims nothing.

// SignalRelay is the signal form of a relay (the consumer decodes it): a
// broadcast to make (Broadcast, thrown by a step), the resume of one signal
// wait (Token and Element) or the start of a definition (Start, at Element).
type SignalRelay struct {
	Name      string `json:"name"`
	Broadcast bool   `json:"broadcast,omitempty"`
	Token     string `json:"token,omitempty"`
	Element   string `json:"el,omitempty"`
	Start     string `json:"start,omitempty"`
}

// SignalRouting is the routing key of signal relays.
const SignalRouting = "signal"

// signalBody is the body of a signal relay to instance (the broadcast's
// form names none).
type signalBody struct {
	InstanceID string         `json:"instance_id,omitempty"`
	Signal     SignalRelay    `json:"signal"`
	Variables  map[string]any `json:"variables"`
}

// queueSignalThrows writes the signals a step throws to the outbox as
// broadcast relays of instance id: they are broadcast after the commit
// (BroadcastSignal, from the relay), never inside the step.
func queueSignalThrows(b *pgx.Batch, w *outboxWrites, id string, throws []engine.SignalThrow) error {
	for _, t := range throws {
		vars := t.Variables
		if vars == nil {
			vars = map[string]any{}
		}
		body, err := json.Marshal(signalBody{Signal: SignalRelay{Name: t.Signal, Broadcast: true}, Variables: vars})
		if err != nil {
			return fmt.Errorf("encoding signal %s: %w", t.ID, err)
		}
		w.queue(b, insertRelaySQL, t.ID, id, SignalRouting, body)
	}
	return nil
}

// SignalReach is what a broadcast reached: the signal subscriptions it
// resumes and the definitions it starts an instance of.
type SignalReach struct {
	Subscriptions int
	Starts        int
}

// broadcastPageSQL writes the relays of one page of the subscriptions to
// signal $1 with ids in ($2, $3], at most $4 of them, for broadcast $5 with
// variables $6: each relay's id derives from the broadcast and the
// subscription, so a broadcast sent again writes nothing twice. It returns
// the page's last id, its size and how many relays it wrote.
var broadcastPageSQL = `WITH page AS (
	SELECT id, instance_id, token_id, element_id FROM signal_subscriptions
	 WHERE signal_name = $1 AND id > $2 AND id <= $3 ORDER BY id LIMIT $4
), written AS (
	INSERT INTO outbox (id, instance_id, message_name, target, routing_key, body)
	SELECT 'signal:' || $5::text || ':' || p.id, p.instance_id, 'relay', 'relay', '` + SignalRouting + `',
	       convert_to(jsonb_build_object('instance_id', p.instance_id,
	           'signal', jsonb_build_object('name', $1::text, 'token', p.token_id, 'el', p.element_id),
	           'variables', $6::jsonb)::text, 'UTF8')
	  FROM page p
	ON CONFLICT (id) DO NOTHING
	RETURNING 1
)
SELECT COALESCE(max(id), 0), count(*), (SELECT count(*) FROM written) FROM page`

// BroadcastSignal broadcasts signal name with vars, as broadcast id (unique
// per broadcast: a relay's message id, or a fresh one per API call): it
// reaches every signal subscription open when it begins, reading them in
// pages of s's BroadcastPage rows, one transaction each, and starts an
// instance of the latest version of every definition with a signal start
// event for name. It claims nothing: it writes relays, which resume each
// instance under its own claim once published. Called again with the same
// id (a redelivered broadcast) it writes no relay twice.
func (s *Store) BroadcastSignal(ctx context.Context, id, name string, vars map[string]any) (SignalReach, error) {
	if vars == nil {
		vars = map[string]any{}
	}
	var reach SignalReach
	var cutoff int64
	if err := s.pool.QueryRow(ctx, `SELECT COALESCE(max(id), 0) FROM signal_subscriptions WHERE signal_name = $1`, name).Scan(&cutoff); err != nil {
		return reach, translate(err, "broadcasting signal "+name)
	}
	written := 0
	for after := int64(0); after < cutoff; {
		var last, n, wrote int64
		if err := s.pool.QueryRow(ctx, broadcastPageSQL, name, after, cutoff, s.broadcastPage, id, vars).Scan(&last, &n, &wrote); err != nil {
			return reach, translate(err, "broadcasting signal "+name)
		}
		if n == 0 {
			break
		}
		reach.Subscriptions += int(n)
		written += int(wrote)
		after = last
	}
	rows, err := s.pool.Query(ctx, `SELECT ss.definition_key, ss.element_id FROM signal_starts ss
		WHERE ss.signal_name = $1 AND ss.definition_version = (SELECT max(version) FROM definitions d WHERE d.key = ss.definition_key)
		ORDER BY 1, 2`, name)
	if err != nil {
		return reach, translate(err, "looking up signal starts of "+name)
	}
	starts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (RelayOut, error) {
		var key, el string
		if err := r.Scan(&key, &el); err != nil {
			return RelayOut{}, err
		}
		body, err := json.Marshal(signalBody{Signal: SignalRelay{Name: name, Start: key, Element: el}, Variables: vars})
		return RelayOut{ID: SignalStartID(key, id), RoutingKey: SignalRouting, Body: body}, err
	})
	if err != nil {
		return reach, translate(err, "looking up signal starts of "+name)
	}
	reach.Starts = len(starts)
	b := &pgx.Batch{}
	w := s.outboxWrites()
	queueRelays(b, w, starts)
	err = s.pool.SendBatch(ctx, b).Close()
	if w.rows+written > 0 {
		s.notifyOutbox(&outboxWrites{rows: w.rows + written})
	}
	return reach, translate(err, "starting on signal "+name)
}

// BroadcastHold is how long a broadcast a call asked for is left to the
// call before the outbox publisher may send its recorded relay
// (RecordAndBroadcastSignal): past it, the call is taken as cut short (a
// crash) and its broadcast is finished from the relay.
const BroadcastHold = 30 * time.Second

// recordBroadcastSQL records broadcast $1 of $2 (a broadcast relay body)
// as an outbox relay held for $3: no publisher leases it before (a row
// with no holder and locked_until ahead is backing off), and the call that
// recorded it deletes it once its broadcast is done. Recorded again (a
// retry of the same id), it keeps the first row.
const recordBroadcastSQL = `INSERT INTO outbox (id, instance_id, message_name, target, routing_key, body, locked_until)
VALUES ($1, '', 'relay', 'relay', '` + SignalRouting + `', $2, now() + $3::interval)
ON CONFLICT (id) DO NOTHING`

// RecordAndBroadcastSignal is BroadcastSignal for a call that answers
// when it ends (POST /v1/signals, the Zeebe gateway): it first records the
// broadcast durably, as the broadcast relay a step's signal throw writes,
// held for BroadcastHold, then broadcasts, then forgets the relay. If the
// broadcast is cut short (the process dies, the database fails between two
// pages), the relay is published once the hold lapses and the relay path
// finishes the broadcast under the same id (SignalBroadcast): the pages
// already written are not written twice, the subscriptions still open are
// reached. A retry of the call with the same id is as safe.
func (s *Store) RecordAndBroadcastSignal(ctx context.Context, id, name string, vars map[string]any) (SignalReach, error) {
	if vars == nil {
		vars = map[string]any{}
	}
	body, err := json.Marshal(signalBody{Signal: SignalRelay{Name: name, Broadcast: true}, Variables: vars})
	if err != nil {
		return SignalReach{}, fmt.Errorf("encoding signal %s: %w", name, err)
	}
	if _, err := s.pool.Exec(ctx, recordBroadcastSQL, id, body, BroadcastHold); err != nil {
		return SignalReach{}, translate(err, "recording the broadcast of signal "+name)
	}
	reach, err := s.BroadcastSignal(ctx, id, name, vars)
	if err != nil {
		return reach, err // the recorded relay finishes it
	}
	// Not yet leased by a publisher: no one needs it. Leased (the hold
	// lapsed), it is sent, and the relay path finds nothing left to write.
	_, err = s.pool.Exec(ctx, `DELETE FROM outbox WHERE id = $1 AND published_at IS NULL AND locked_by IS NULL`, id)
	return reach, translate(err, "forgetting the recorded broadcast of signal "+name)
}

// SignalStartID is the message id of the relay that starts definition key
// for broadcast id; the instance id derives from it, so one broadcast starts
// at most one instance of each definition.
func SignalStartID(key, id string) string { return "signal-start:" + key + ":" + id }

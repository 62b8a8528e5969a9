package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/engine"
)

// The worker sends itself relays through the outbox (target 'relay'): a
// call activity's child start, its end (or the escalations it threw) to the
// parent, the cancellation of a
// child, a message fanned out to several targets, a task outcome. Their
// bodies are relay envelopes in forms the consumer decodes (consumer
// package, envelope.go); their ids are deterministic message ids, so a step
// re-run or a relay redelivered is recognised by the inbox.

// RelayOut is one relay to send through the outbox.
type RelayOut struct {
	ID         string
	InstanceID string
	RoutingKey string
	Body       []byte
}

// ParentRef names the call activity of a child instance in a relay.
type ParentRef = engine.ParentRef

// childStart is the relay that starts a call activity's child.
type childStart struct {
	Start string `json:"start"`
	// Binding and VersionTag are the call activity's (bpmn.CallDefinition),
	// omitted for the latest version.
	Binding    string         `json:"binding,omitempty"`
	VersionTag string         `json:"version_tag,omitempty"`
	InstanceID string         `json:"instance_id"`
	Variables  map[string]any `json:"variables"`
	Parent     *ParentRef     `json:"parent"`
}

// ChildEnd is the part of a relay that tells a parent its child ended (or
// could not start), or with Running that it threw escalations and runs on.
type ChildEnd struct {
	InstanceID string `json:"instance"`
	TokenID    string `json:"token"`
	Element    string `json:"el"`
	ErrorCode  string `json:"error_code,omitempty"`
	// Failed says why the child could not start (TriggerChildFailed).
	Failed string `json:"failed,omitempty"`
	// Escalations are the codes of the escalations the child threw that
	// none of its scopes caught (engine.ParentEscalation).
	Escalations []string `json:"escalations,omitempty"`
	// Running: the child has not ended; the relay carries only its
	// Escalations (TriggerChildEscalated).
	Running bool `json:"running,omitempty"`
	// Escalated is how many escalation relays the child sent before its end
	// (engine.ChildResult.Escalated).
	Escalated int `json:"escalated,omitempty"`
}

type childEnd struct {
	InstanceID string         `json:"instance_id"`
	Child      ChildEnd       `json:"child"`
	Variables  map[string]any `json:"variables,omitempty"`
}

type childCancel struct {
	InstanceID string `json:"instance_id"`
	Cancel     struct {
		Parent string `json:"parent"`
	} `json:"cancel"`
}

// CancelMessageID is the message id of the relay that cancels child
// instance id: fixed, so a child's start can tell it was cancelled first.
func CancelMessageID(id string) string { return "cancel:" + id }

// childRelays are the relays a step's effects send to its children and
// parent.
func childRelays(id string, e engine.Effects) ([]RelayOut, error) {
	var out []RelayOut
	add := func(msgID, to string, v any) error {
		body, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("encoding relay %s: %w", msgID, err)
		}
		out = append(out, RelayOut{ID: msgID, InstanceID: to, RoutingKey: "child", Body: body})
		return nil
	}
	for _, c := range e.StartChildren {
		vars := c.Variables
		if vars == nil {
			vars = map[string]any{}
		}
		if err := add("start:"+c.InstanceID, c.InstanceID, childStart{Start: c.DefinitionKey, InstanceID: c.InstanceID, Variables: vars,
			Binding: binding(c.Binding), VersionTag: c.VersionTag,
			Parent: &ParentRef{InstanceID: id, TokenID: c.TokenID, Element: c.Element}}); err != nil {
			return nil, err
		}
	}
	for _, c := range e.CancelChildren {
		m := childCancel{InstanceID: c}
		m.Cancel.Parent = id
		if err := add(CancelMessageID(c), c, m); err != nil {
			return nil, err
		}
	}
	var escalations []string
	if x := e.EscalateParent; x != nil {
		escalations = x.Codes
	}
	// Escalations thrown in the step that ended the child ride in its end's
	// relay: the parent catches them before it applies the end, whatever
	// order relays arrive in.
	if p := e.NotifyParent; p != nil {
		if err := add("end:"+id, p.Parent.InstanceID, childEnd{InstanceID: p.Parent.InstanceID, Variables: p.Variables,
			Child: ChildEnd{InstanceID: id, TokenID: p.Parent.TokenID, Element: p.Parent.Element, ErrorCode: p.ErrorCode,
				Escalations: escalations, Escalated: p.Escalated}}); err != nil {
			return nil, err
		}
	} else if x := e.EscalateParent; x != nil {
		if err := add("escalation:"+x.ID, x.Parent.InstanceID, childEnd{InstanceID: x.Parent.InstanceID,
			Child: ChildEnd{InstanceID: id, TokenID: x.Parent.TokenID, Element: x.Parent.Element, Escalations: x.Codes,
				Running: true}}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ChildFailedRelay is the relay that tells parent its child could not start.
func ChildFailedRelay(child string, parent ParentRef, why string) (RelayOut, error) {
	body, err := json.Marshal(childEnd{InstanceID: parent.InstanceID,
		Child: ChildEnd{InstanceID: child, TokenID: parent.TokenID, Element: parent.Element, Failed: why}})
	return RelayOut{ID: "end:" + child, InstanceID: parent.InstanceID, RoutingKey: "child", Body: body}, err
}

func queueRelays(b *pgx.Batch, w *outboxWrites, rs []RelayOut) {
	for _, r := range rs {
		w.queue(b, insertRelaySQL, r.ID, r.InstanceID, r.RoutingKey, r.Body)
	}
}

// insertRelaySQL writes a relay to the outbox (outboxInsert).
var insertRelaySQL = outboxInsert("", "id, instance_id, message_name, target, routing_key, body",
	"VALUES ($1::text, $2::text, 'relay', 'relay', $3::text, $4::bytea)", true)

// forwardInboxSQL records a relay Forward answers. No claim went before it
// to read the inbox, so the row goes into the partition of a copy recorded
// on any live day, where it fails on the key (isInboxDuplicate); else into
// the day sutra_inbox_day says.
const forwardInboxSQL = `INSERT INTO inbox_days (message_id, instance_id, day)
	VALUES ($1, $2, coalesce((SELECT max(day) FROM inbox_days WHERE message_id = $1), sutra_inbox_day($1)))`

// Forward answers a relay that no step applies by sending relays in its
// place: it records inboxID as applied and queues rs in the outbox, in one
// transaction (durable before the ack). A relay already applied is
// ErrDuplicate.
func (s *Store) Forward(ctx context.Context, inboxID, instanceID string, rs []RelayOut) error {
	b := &pgx.Batch{}
	b.Queue(forwardInboxSQL, inboxID, instanceID)
	w := s.outboxWrites()
	queueRelays(b, w, rs)
	err := s.pool.SendBatch(ctx, b).Close()
	if err == nil {
		s.notifyOutbox(w)
	}
	if isInboxDuplicate(err) {
		return ErrDuplicate
	}
	return translate(err, "forwarding relay "+inboxID)
}

// StartTarget is a message start event of the latest version of a definition.
type StartTarget struct {
	Key     string
	Version int
	Element string
}

// MessageStarts returns the message start events named message of the
// latest version of every definition.
func (s *Store) MessageStarts(ctx context.Context, message string) ([]StartTarget, error) {
	rows, err := s.pool.Query(ctx, `SELECT ms.definition_key, ms.definition_version, ms.element_id FROM message_starts ms
		WHERE ms.message_name = $1 AND ms.definition_version = (SELECT max(version) FROM definitions d WHERE d.key = ms.definition_key)
		ORDER BY 1, 3`, message)
	if err != nil {
		return nil, translate(err, "looking up message starts of "+message)
	}
	targets, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (StartTarget, error) {
		var t StartTarget
		return t, r.Scan(&t.Key, &t.Version, &t.Element)
	})
	return targets, translate(err, "looking up message starts of "+message)
}

// ErrStartKeyActive refuses a message start whose correlation key an active
// instance of the definition holds.
var ErrStartKeyActive = errors.New("store: an active instance holds the correlation key")

// BufferStart keeps a message-start relay refused for its key until the
// active instance with that key ends (then its commit releases it) or its TTL
// passes: ErrBuffered. ErrDuplicate: a copy is buffered already. When the key
// is free by now it returns nil: start again.
func (s *Store) BufferStart(ctx context.Context, definition string, b Buffer) error {
	vars := b.Variables
	if vars == nil {
		vars = map[string]any{}
	}
	var got string
	err := s.pool.QueryRow(ctx, "SELECT sutra_buffer_start($1, $2, $3, $4, $5, $6, $7, $8)", definition, b.CorrelationKey,
		b.MessageID, b.TTL, vars, b.Message, b.Body, b.RoutingKey).Scan(&got)
	switch {
	case err != nil:
		return translate(err, "buffering message start "+b.MessageID)
	case got == "buffered":
		return ErrBuffered
	case got == "duplicate":
		return ErrDuplicate
	}
	return nil
}

// fanned is a message relay sent to one target of a message that has
// several: one definition to start, or the waiting subscriptions.
type fanned struct {
	Message        string         `json:"message"`
	CorrelationKey string         `json:"correlation_key,omitempty"`
	Variables      map[string]any `json:"variables,omitempty"`
	TTL            string         `json:"ttl,omitempty"`
	StartOnly      string         `json:"start_only,omitempty"`
	CorrelateOnly  bool           `json:"correlate_only,omitempty"`
}

// StartMessageID is the message id of the relay that starts definition key
// for the message with id messageID, and from which the instance id derives:
// one message starts at most one instance of each definition.
func StartMessageID(key, messageID string) string {
	prefix := "start:" + key + ":"
	if strings.HasPrefix(messageID, prefix) {
		return messageID // already a relay fanned out to key
	}
	return prefix + messageID
}

// FanOut is the relays that carry a message with several targets to each:
// one per definition it starts, and one for the subscription it correlates
// to when correlate is set. ttl, when positive, goes with each.
func FanOut(messageID, message, key string, vars map[string]any, ttl time.Duration, starts []string, correlate bool) ([]RelayOut, error) {
	var ttlText string
	if ttl > 0 {
		ttlText = fmt.Sprintf("PT%gS", ttl.Seconds())
	}
	var out []RelayOut
	add := func(id string, f fanned) error {
		body, err := json.Marshal(f)
		out = append(out, RelayOut{ID: id, RoutingKey: message, Body: body})
		return err
	}
	for _, d := range starts {
		if err := add(StartMessageID(d, messageID), fanned{Message: message, CorrelationKey: key, Variables: vars, TTL: ttlText, StartOnly: d}); err != nil {
			return nil, err
		}
	}
	if correlate {
		if err := add("correlate:"+messageID, fanned{Message: message, CorrelationKey: key, Variables: vars, TTL: ttlText, CorrelateOnly: true}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// binding is a call's binding as its start relay carries it: none for the
// latest version, as before bindings existed.
func binding(b string) string {
	if b == bpmn.BindingLatest {
		return ""
	}
	return b
}

// Subscribed reports whether an instance waits for message name with
// correlation key key (a subscription is open).
func (s *Store) Subscribed(ctx context.Context, name, key string) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM subscriptions WHERE message_name = $1 AND correlation_key = $2)`,
		name, key).Scan(&ok)
	return ok, translate(err, "looking up subscriptions of message "+name)
}

// Correlated answers the instance that a committed step applied relay
// messageID to, directly or through the relay it was fanned out to
// (FanOut): with waiting, the relay that correlates to a subscription,
// else those that start definitions starts (the first, by the order of
// starts, that committed); "" while no step did.
func (s *Store) Correlated(ctx context.Context, messageID string, waiting bool, starts []string) (string, error) {
	ids := []string{messageID}
	if waiting {
		ids = append(ids, "correlate:"+messageID)
	} else {
		for _, d := range starts {
			ids = append(ids, StartMessageID(d, messageID))
		}
	}
	var id string
	err := s.pool.QueryRow(ctx, `SELECT instance_id FROM inbox WHERE message_id = ANY($1) AND instance_id <> ''
		ORDER BY array_position($1, message_id) LIMIT 1`, ids).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return id, translate(err, "looking up the correlation of message "+messageID)
}

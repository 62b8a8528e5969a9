package usecase

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/sutra-run/worker/api"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/iso8601"
	"github.com/sutra-run/worker/lanes"
)

// Message is a message to publish and correlate: the body of the relay
// that carries it (its fields as the consumer reads them), and its id.
type Message struct {
	Message        string         `json:"message"`
	CorrelationKey string         `json:"correlation_key,omitempty"`
	InstanceID     string         `json:"instance_id,omitempty"`
	Variables      map[string]any `json:"variables,omitempty"`
	TTL            string         `json:"ttl,omitempty"`
	// MessageID is the relay's message id, not part of its body; a new one
	// when empty.
	MessageID string `json:"-"`
}

// publishTimeout bounds a publish and its broker's confirm.
const publishTimeout = 30 * time.Second

// PublishMessage checks m and publishes it as a relay (Deps.PublishRelay)
// under its message id, which it returns: every protocol publishes a
// message this way, so a message has the relay path's semantics (correlated
// by its name and correlation key or instance, buffered with its ttl,
// deduplicated by its message id) whichever protocol sent it. Refusals are
// api.Invalid; no publisher is fault.Unavailable.
func (u *UseCases) PublishMessage(ctx context.Context, m Message) (string, error) {
	switch {
	case m.Message == "":
		return "", api.Invalidf("message is required")
	case m.CorrelationKey != "" && m.InstanceID != "":
		return "", api.Invalidf("name correlation_key or instance_id, not both")
	}
	// The name is the relay's routing key and the id its message_id, both
	// AMQP short strings: checked here, before anything reaches the broker.
	for _, f := range [...]struct{ name, v string }{{"message", m.Message}, {"instance_id", m.InstanceID},
		{"message_id", m.MessageID}, {"correlation_key", m.CorrelationKey}} {
		if err := api.CheckText(f.name, f.v); err != nil {
			return "", err
		}
	}
	if m.TTL != "" {
		// Checked as the consumer will read it, so that a message is never
		// accepted here and dead-lettered there.
		d, err := iso8601.ParseDuration(m.TTL)
		if err != nil {
			return "", api.Invalidf("ttl is not an ISO 8601 duration (PT30S, P1D)")
		}
		now := time.Now()
		if err := api.CheckTTL("ttl", d.AddTo(now).Sub(now)); err != nil {
			return "", err
		}
	}
	if u.deps.PublishRelay == nil {
		return "", fault.New(fault.Unavailable, "no broker publisher")
	}
	if m.MessageID == "" {
		m.MessageID = api.NewID()
	}
	body, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	return m.MessageID, u.deps.PublishRelay(ctx, m.Message, m.MessageID, body)
}

// ErrMessageSeen is in the chain of a keyed publish refused because a
// message with its id was applied or is still buffered (code
// fault.APIInvalid).
var ErrMessageSeen = errors.New("a message with this id was already published")

type seenError struct{ refusal *fault.Error }

func (e seenError) Error() string        { return e.refusal.Error() }
func (e seenError) Unwrap() error        { return e.refusal }
func (e seenError) Is(target error) bool { return target == ErrMessageSeen }

// PublishKeyedMessage publishes m as Camunda 8's clients publish one
// (PublishMessage) and answers its key, drawn from the key sequence. A
// message without a message id is published under its key (in decimal);
// one whose id was applied or is still buffered is refused with
// ErrMessageSeen, as Zeebe refuses a message id it holds (two racing
// publishes of one id both pass that look; the relay's inbox then applies
// it once). ttl, with a correlation key, buffers it that long (the relay
// contract buffers by key only); over lanes.MaxMessageTTL it is refused.
func (u *UseCases) PublishKeyedMessage(ctx context.Context, m Message, ttl time.Duration) (int64, error) {
	if ttl < 0 {
		return 0, api.Invalidf("timeToLive is negative")
	}
	if ttl > lanes.MaxMessageTTL {
		return 0, api.CheckTTL("timeToLive", lanes.MaxMessageTTL+1)
	}
	if m.MessageID != "" {
		if err := api.CheckText("messageId", m.MessageID); err != nil {
			return 0, err
		}
		seen, err := u.deps.Store.MessageSeen(ctx, m.MessageID)
		if err != nil {
			return 0, err
		}
		if seen {
			return 0, seenError{fault.New(fault.APIInvalid, "a message with id %q was already published", m.MessageID)}
		}
	}
	key, err := u.deps.Store.NextKey(ctx)
	if err != nil {
		return 0, err
	}
	if m.MessageID == "" {
		m.MessageID = strconv.FormatInt(key, 10)
	}
	if ttl > 0 && m.CorrelationKey != "" {
		// Fixed notation: %g would write 1e+06 for long TTLs.
		m.TTL = "PT" + strconv.FormatFloat(ttl.Seconds(), 'f', -1, 64) + "S"
	}
	_, err = u.PublishMessage(ctx, m)
	return key, err
}

// ErrNotCorrelated is in the chain of a correlation refused because
// nothing waits for its message: no subscription with its name and
// correlation key, no message start event of its name (code
// fault.RelayUncorrelated). Nothing is published or buffered.
var ErrNotCorrelated = errors.New("nothing waits for the message")

type uncorrelatedError struct{ refusal *fault.Error }

func (e uncorrelatedError) Error() string        { return e.refusal.Error() }
func (e uncorrelatedError) Unwrap() error        { return e.refusal }
func (e uncorrelatedError) Is(target error) bool { return target == ErrNotCorrelated }

// Correlation is a message correlated: its key and the key of the
// instance a committed step applied it to.
type Correlation struct {
	MessageKey, InstanceKey int64
	InstanceID              string
}

// correlateWait bounds a correlation's wait for its commit.
const correlateWait = 15 * time.Second

// correlatePoll bounds the interval between two looks for a correlation's
// commit.
var correlatePoll = [2]time.Duration{5 * time.Millisecond, 100 * time.Millisecond}

// CorrelateMessage correlates m as Camunda's correlation does: to the
// instance waiting for it (a subscription with its name and correlation
// key) or to a definition it starts (a message start event of its name),
// and answers once a step that applied it committed, with the instance
// it went to. Nothing waiting refuses it with ErrNotCorrelated before
// anything is published. Else it is published as a keyed message with no
// time to live (PublishKeyedMessage) and the call waits, until ctx ends,
// for the inbox row of the step that applied it, or of the relay it was
// fanned out to: the waiting instance's when one waited (a message that
// also starts definitions is fanned out to them too), else a started
// one's. The inbox row commits with the step, so a correlation is never
// answered that did not commit. When the
// instance stopped waiting meanwhile, the relay is rejected as any relay
// nothing waits for and the call ends with ctx, or after correlateWait,
// with context.DeadlineExceeded. Between two looks the call gives its
// database connection back (conn), as a long poll does: a wait of
// correlateWait holds none of the API's connections.
func (u *UseCases) CorrelateMessage(ctx context.Context, conn Conn, m Message) (Correlation, error) {
	ctx, cancel := context.WithTimeout(ctx, correlateWait)
	defer cancel()
	if m.Message == "" {
		return Correlation{}, api.Invalidf("message is required")
	}
	// Checked before the lookups, as PublishMessage checks them.
	for _, f := range [...]struct{ name, v string }{{"message", m.Message}, {"correlation_key", m.CorrelationKey}} {
		if err := api.CheckText(f.name, f.v); err != nil {
			return Correlation{}, err
		}
	}
	starts, err := u.deps.Store.MessageStarts(ctx, m.Message)
	if err != nil {
		return Correlation{}, err
	}
	waits, err := u.deps.Store.Subscribed(ctx, m.Message, m.CorrelationKey)
	if err != nil {
		return Correlation{}, err
	}
	if !waits && len(starts) == 0 {
		return Correlation{}, uncorrelatedError{fault.New(fault.RelayUncorrelated,
			"no instance waits for message %q with correlation key %q and no process starts with it", m.Message, m.CorrelationKey)}
	}
	key, err := u.PublishKeyedMessage(ctx, m, 0)
	if err != nil {
		return Correlation{}, err
	}
	id := m.MessageID
	if id == "" {
		id = strconv.FormatInt(key, 10)
	}
	defs := make([]string, len(starts))
	for i, s := range starts {
		defs[i] = s.Key
	}
	for pause := correlatePoll[0]; ; pause = min(2*pause, correlatePoll[1]) {
		got, done, err := u.correlated(ctx, conn, key, id, waits, defs)
		if done || err != nil {
			return got, err
		}
		select {
		case <-ctx.Done():
			return Correlation{}, ctx.Err()
		case <-time.After(pause):
		}
	}
}

// correlated is one look for the commit a correlation waits for, holding
// the call's connection for it alone: done when it found the instance.
func (u *UseCases) correlated(ctx context.Context, conn Conn, key int64, id string, waits bool, defs []string) (Correlation, bool, error) {
	release, err := conn.use(ctx)
	if err != nil {
		return Correlation{}, false, err
	}
	defer func() {
		release()
		conn.idle()
	}()
	instance, err := u.deps.Store.Correlated(ctx, id, waits, defs)
	if err != nil || instance == "" {
		return Correlation{}, false, err
	}
	in, err := u.deps.Store.InstanceKeys(ctx, instance, false)
	if err != nil {
		return Correlation{}, false, err
	}
	return Correlation{MessageKey: key, InstanceKey: in.Key, InstanceID: instance}, true, nil
}

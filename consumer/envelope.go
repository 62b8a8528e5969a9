package consumer

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/iso8601"
	"github.com/sutra-run/worker/lanes"
	"github.com/sutra-run/worker/store"
)

// envelope is the JSON body of a relay (see README, "The relay contract").
type envelope struct {
	Start          string         `json:"start"`
	InstanceID     string         `json:"instance_id"`
	Message        string         `json:"message"`
	CorrelationKey string         `json:"correlation_key"`
	Variables      map[string]any `json:"variables"`
	// TTL (ISO 8601 duration) buffers a correlate-by-key relay that no
	// subscription matches yet, for that long.
	TTL string `json:"ttl"`
	// The forms below are relays the worker sends itself through its outbox
	// (see store/relays.go); they are not part of the public contract.

	// Task is a pull task's outcome, once a task worker reported it.
	Task *taskOutcome `json:"task"`
	// Parent names the call activity whose child a start relay starts;
	// Binding and VersionTag say which version it starts (none: the latest).
	Parent     *engine.ParentRef `json:"parent"`
	Binding    string            `json:"binding"`
	VersionTag string            `json:"version_tag"`
	// Child tells a parent instance its child ended or could not start.
	Child *store.ChildEnd `json:"child"`
	// Cancel cancels a call activity's child with its parent.
	Cancel *struct {
		Parent string `json:"parent"`
	} `json:"cancel"`
	// StartOnly is one target of a message fanned out to several: it starts
	// an instance of that definition and correlates to nothing else.
	StartOnly string `json:"start_only"`
	// CorrelateOnly is the other: it correlates to a waiting subscription
	// and starts nothing.
	CorrelateOnly bool `json:"correlate_only"`
	// Signal is a signal broadcast to make, or a broadcast's relay to one
	// waiting instance or one definition it starts (store/signals.go).
	Signal *store.SignalRelay `json:"signal"`
}

// taskOutcome is the task form of a relay: what a task worker reported.
type taskOutcome struct {
	ID             string `json:"id"`
	Token          string `json:"token"`
	Element        string `json:"element"`
	Outcome        string `json:"outcome"`
	ErrorCode      string `json:"error_code"`
	ErrorMessage   string `json:"error_message"`
	ErrorDetails   string `json:"error_details"`
	Retries        int    `json:"retries"`
	RetryTimeoutMS int64  `json:"retry_timeout_ms"`
}

// trigger is the engine trigger of a task outcome.
func (t *taskOutcome) trigger(vars map[string]any) (engine.Trigger, error) {
	tr := engine.Trigger{TokenID: t.Token, Element: t.Element, Variables: vars}
	switch t.Outcome {
	case store.TaskCompleted:
		tr.Kind = engine.TriggerTaskCompleted
	case store.TaskFailed:
		tr.Kind, tr.ErrorMessage, tr.ErrorDetails, tr.Retries = engine.TriggerTaskFailed, t.ErrorMessage, t.ErrorDetails, t.Retries
		tr.RetryTimeout = time.Duration(t.RetryTimeoutMS) * time.Millisecond
	case store.TaskBPMNError:
		tr.Kind, tr.ErrorCode, tr.ErrorMessage = engine.TriggerTaskError, t.ErrorCode, t.ErrorMessage
	case store.TaskAssign:
		tr.Kind = engine.TriggerTaskAssign
	case store.TaskUpdate:
		tr.Kind = engine.TriggerTaskUpdate
	default:
		return tr, fault.New(fault.RelayInvalid, "task outcome %q is none of completed, failed, bpmn_error, assign, update", t.Outcome)
	}
	if t.Token == "" || t.Element == "" {
		return tr, fault.New(fault.RelayInvalid, "a task relay names the task's token and element")
	}
	return tr, nil
}

// internal reports whether the relay is one the worker writes itself.
func (e *envelope) internal() bool {
	return e.Task != nil || e.Child != nil || e.Cancel != nil || e.Signal != nil
}

// decode turns a delivery into a Resume, or a fault.RelayInvalid error saying
// what is wrong with it.
func decode(d *amqp.Delivery, now time.Time) (lanes.Resume, error) {
	if d.MessageId == "" {
		return lanes.Resume{}, fault.New(fault.RelayInvalid, "the AMQP message_id property is required (it is the dedupe key)")
	}
	if ct := d.ContentType; ct != "" && !strings.HasPrefix(ct, "application/json") {
		return lanes.Resume{}, fault.New(fault.RelayInvalid, "content_type %q is not application/json", ct)
	}
	var env envelope
	dec := json.NewDecoder(bytes.NewReader(d.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&env); err != nil {
		// A relay of the worker's own (a task outcome, a child's end, a
		// cancel, a signal) that a newer release wrote may carry fields
		// this one does not know: they are ignored, so that releases run
		// side by side (docs/operations.md, "Upgrading"). A relay
		// published from outside with a field unknown is refused: a typo.
		// Only a refused body pays for the second decode.
		env, dec = envelope{}, json.NewDecoder(bytes.NewReader(d.Body))
		if lerr := dec.Decode(&env); lerr != nil || !env.internal() {
			return lanes.Resume{}, fault.Wrap(fault.RelayInvalid, err, "the body is not a relay JSON object")
		}
	}
	if _, err := dec.Token(); err != io.EOF {
		return lanes.Resume{}, fault.New(fault.RelayInvalid, "the body has data after its JSON object")
	}
	for name, id := range map[string]string{"instance_id": env.InstanceID, "correlation_key": env.CorrelationKey} {
		if len(id) > lanes.MaxIDBytes {
			// Named by its length only: the id is neither stored nor logged.
			return lanes.Resume{}, fault.New(fault.RelayInvalid, "%s is %d bytes long; ids are at most %d", name, len(id), lanes.MaxIDBytes)
		}
	}
	var r lanes.Resume
	switch {
	case env.Signal != nil:
		c, err := decodeSignal(env, d.MessageId)
		return lanes.Resume{Cause: c}, err
	case env.Task != nil, env.Child != nil, env.Cancel != nil:
		c, err := decodeInternal(env, d.MessageId)
		return lanes.Resume{Cause: c}, err
	case env.Start != "":
		if env.Message != "" || env.CorrelationKey != "" {
			return r, fault.New(fault.RelayInvalid, "a start relay carries neither message nor correlation_key")
		}
		if env.StartOnly != "" || env.CorrelateOnly {
			return r, errNotByName
		}
		if env.TTL != "" {
			return r, errTTLNotByKey
		}
		id := env.InstanceID
		if id == "" {
			// Derived from the dedupe key, so a redelivered start finds its instance.
			id = lanes.InstanceIDFor(d.MessageId)
		}
		if (env.Binding != "" || env.VersionTag != "") && env.Parent == nil {
			return r, fault.New(fault.RelayInvalid, "only a call activity's start relay names a binding")
		}
		return lanes.Resume{Cause: lanes.Start{InstanceID: id, MessageID: d.MessageId, Definition: env.Start,
			Variables: env.Variables, Parent: env.Parent, Binding: env.Binding, VersionTag: env.VersionTag}}, nil
	case env.Message == "":
		return r, fault.New(fault.RelayInvalid, "a relay names either start (a definition key) or message")
	case env.InstanceID != "" && env.CorrelationKey != "":
		return r, fault.New(fault.RelayInvalid, "a message relay names instance_id or correlation_key, not both")
	case env.InstanceID != "":
		if env.StartOnly != "" || env.CorrelateOnly {
			return r, errNotByName
		}
		if env.TTL != "" {
			return r, errTTLNotByKey
		}
		return lanes.Resume{Cause: lanes.Message{InstanceID: env.InstanceID, MessageID: d.MessageId, Name: env.Message,
			Variables: env.Variables}}, nil
	}
	// By correlation key, or by name alone: a message start event, or a
	// subscription opened without a key.
	c := lanes.Correlate{MessageID: d.MessageId, Message: env.Message, CorrelationKey: env.CorrelationKey,
		Variables: env.Variables, StartOnly: env.StartOnly, CorrelateOnly: env.CorrelateOnly}
	if env.TTL != "" {
		ttl, err := iso8601.ParseDuration(env.TTL)
		if err != nil {
			return r, fault.Wrap(fault.RelayInvalid, err, "ttl")
		}
		// Calendar units (P1M) are measured from now, when the relay arrives.
		if c.TTL = ttl.AddTo(now).Sub(now); c.TTL <= 0 {
			return r, fault.New(fault.RelayInvalid, "ttl %q is not positive", env.TTL)
		}
		c.Body, c.RoutingKey = d.Body, d.RoutingKey
	}
	return lanes.Resume{Cause: c}, nil
}

var (
	errNotByName   = fault.New(fault.RelayInvalid, "start_only and correlate_only apply to a relay correlated by message name")
	errTTLNotByKey = fault.New(fault.RelayInvalid, "ttl applies only to a relay correlated by message name and correlation_key")
)

// decodeSignal decodes the signal relays the worker sends itself: a
// broadcast (no instance), a broadcast's relay to a wait (instance, token and
// element) or a start (definition and start event; the instance id derives
// from the message id, so a redelivered start finds its instance).
func decodeSignal(env envelope, messageID string) (lanes.Cause, error) {
	sg := env.Signal
	others := env.Start != "" || env.Message != "" || env.CorrelationKey != "" || env.TTL != "" || env.Task != nil ||
		env.Child != nil || env.Cancel != nil || env.Parent != nil || env.StartOnly != "" || env.CorrelateOnly
	switch {
	case others || sg.Name == "":
		return nil, fault.New(fault.RelayInvalid, "a signal relay names the signal and nothing else of a relay")
	case sg.Broadcast:
		if env.InstanceID != "" || sg.Token != "" || sg.Element != "" || sg.Start != "" {
			return nil, fault.New(fault.RelayInvalid, "a signal broadcast names no instance, wait or start")
		}
		return lanes.SignalBroadcast{MessageID: messageID, Name: sg.Name, Variables: env.Variables}, nil
	case sg.Start != "":
		if env.InstanceID != "" || sg.Token != "" || sg.Element == "" {
			return nil, fault.New(fault.RelayInvalid, "a signal start names its definition and start event only")
		}
		return lanes.Signal{InstanceID: lanes.InstanceIDFor(messageID), MessageID: messageID, Name: sg.Name,
			Definition: sg.Start, Element: sg.Element, Variables: env.Variables}, nil
	case env.InstanceID == "" || sg.Element == "":
		return nil, fault.New(fault.RelayInvalid, "a signal relay to a wait names its instance and the wait's element")
	}
	return lanes.Signal{InstanceID: env.InstanceID, MessageID: messageID, Name: sg.Name, TokenID: sg.Token,
		Element: sg.Element, Variables: env.Variables}, nil
}

// decodeInternal decodes the relays the worker sends itself: a task outcome,
// a child's end, a child's cancellation. Each names its instance and one form.
func decodeInternal(env envelope, messageID string) (lanes.Cause, error) {
	forms := 0
	for _, set := range []bool{env.Task != nil, env.Child != nil, env.Cancel != nil} {
		if set {
			forms++
		}
	}
	if forms != 1 || env.InstanceID == "" || env.Start != "" || env.Message != "" || env.CorrelationKey != "" || env.TTL != "" {
		return nil, fault.New(fault.RelayInvalid, "an internal relay names instance_id and one of task, child, cancel")
	}
	switch {
	case env.Task != nil:
		tr, err := env.Task.trigger(env.Variables)
		if err != nil {
			return nil, err
		}
		return lanes.TaskOutcome{InstanceID: env.InstanceID, MessageID: messageID, Trigger: tr}, nil
	case env.Child != nil:
		c := env.Child
		tr := engine.Trigger{Kind: engine.TriggerChildCompleted, TokenID: c.TokenID, Element: c.Element,
			ErrorCode: c.ErrorCode, Escalations: c.Escalations, Escalated: c.Escalated, Variables: env.Variables}
		switch {
		case c.Escalated < 0:
			return nil, fault.New(fault.RelayInvalid, "a child's relay counts %d escalation relays", c.Escalated)
		case c.Running:
			if len(c.Escalations) == 0 || c.ErrorCode != "" || c.Failed != "" || c.Escalated != 0 || env.Variables != nil {
				return nil, fault.New(fault.RelayInvalid, "a running child's relay carries its escalations and nothing else")
			}
			tr = engine.Trigger{Kind: engine.TriggerChildEscalated, TokenID: c.TokenID, Element: c.Element, Escalations: c.Escalations}
		case c.Failed != "":
			tr = engine.Trigger{Kind: engine.TriggerChildFailed, TokenID: c.TokenID, Element: c.Element, ErrorMessage: c.Failed}
		}
		return lanes.ChildEnded{InstanceID: env.InstanceID, MessageID: messageID, Trigger: tr}, nil
	}
	return lanes.CancelChild{InstanceID: env.InstanceID, MessageID: messageID}, nil
}

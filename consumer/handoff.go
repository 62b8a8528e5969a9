package consumer

import (
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/sutra-run/worker/internal/testsignal"
	"github.com/sutra-run/worker/lanes"
	"github.com/sutra-run/worker/metrics"
	"github.com/sutra-run/worker/store"
)

// Handoff is the local fast path of task outcomes: a relay this replica
// just queued in its outbox (a recorded task outcome) is handed to its own
// lanes at once, as the delivery the consumer would make of it once
// published, rather than only after the round trip through the publisher
// and the broker.
//
// It adds no path of its own: the relay is decoded by the consumer's
// decoder and claims like any relay, and whatever its step does not apply
// (a held claim, a fenced commit, a full lane, a stop) is dropped, because
// the outbox row is still there and its relay arrives later: the durable
// fallback. Whichever of the two gets to the instance first applies the
// outcome; the inbox row it writes makes the other a duplicate.
type Handoff struct {
	lanes   Dispatcher
	metrics *metrics.Metrics

	TestSignals HandoffSignals
}

// HandoffSignals tell tests what the fast path did; inert unless Init'ed.
type HandoffSignals struct {
	// Done carries every handed-off relay's outcome, from its lane.
	Done testsignal.Signal[Handed]
}

// Init switches every signal on.
func (s *HandoffSignals) Init() { s.Done.Init() }

// Handed is one relay handed off and what its lane made of it.
type Handed struct {
	MessageID string
	Outcome   lanes.Outcome
}

// NewHandoff builds the fast path onto lanes.
func NewHandoff(lanes Dispatcher, m *metrics.Metrics) *Handoff {
	return &Handoff{lanes: lanes, metrics: m}
}

// Relay hands r to this replica's lanes. It never blocks: the lanes own
// the resume from here, and its outcome is only counted
// (sutra_task_fast_path_total).
func (h *Handoff) Relay(r store.RelayOut) {
	// The outbox publishes a relay row exactly so (outbox.Publisher).
	res, err := decode(&amqp.Delivery{MessageId: r.ID, ContentType: "application/json", RoutingKey: r.RoutingKey, Body: r.Body}, time.Now())
	if err != nil {
		// The consumer dead-letters the published relay with the reason.
		h.metrics.TaskFastPath.WithLabelValues(metrics.FastPathInvalid).Inc()
		return
	}
	res.Done = func(out lanes.Outcome) {
		h.metrics.TaskFastPath.WithLabelValues(fastPathLabel(out)).Inc()
		h.TestSignals.Done.Signal(Handed{MessageID: r.ID, Outcome: out})
	}
	h.lanes.Dispatch(res)
}

// fastPathLabel is the metric label of a handed-off relay's outcome: its
// kind, or for one dropped to be retried, why (claim_held, fenced, …).
func fastPathLabel(out lanes.Outcome) string {
	if (out.Kind == lanes.Refused || out.Kind == lanes.Retry) && out.Reason != "" {
		return out.Reason
	}
	return out.Kind.String()
}

package consumer

import (
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/sutra-run/worker/internal/testsignal"
	"github.com/sutra-run/worker/lanes"
	"github.com/sutra-run/worker/metrics"
	"github.com/sutra-run/worker/store"
)

// Handoff is the local fast path of task outcomes: the relay of an outcome
// this replica just recorded (store.RecordOutcome) is handed to its own
// lanes at once, as the delivery the consumer would make of it once
// published, rather than after the round trip through the outbox publisher
// and the broker.
//
// It adds no path of its own: the relay is decoded by the consumer's
// decoder and claims like any relay. The step that applies it marks its
// outbox row published (lanes.TaskOutcome), so that it is never sent.
// Whatever the lanes do not apply (a held claim, a fenced commit, a full
// lane, a stop) is dropped and the publisher woken: the outbox row is still
// there, and its relay is the durable fallback. Whichever of the two reaches
// the instance first applies the outcome; the inbox row it writes makes the
// other a duplicate.
type Handoff struct {
	lanes Dispatcher
	// wake wakes the outbox publisher. It must not block.
	wake    func()
	on      bool
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
	Outcome   lanes.Result
}

// NewHandoff builds the fast path onto lanes; off (SUTRA_TASK_FAST_PATH=false),
// Relay only wakes the publisher.
func NewHandoff(lanes Dispatcher, wake func(), m *metrics.Metrics, on bool) *Handoff {
	return &Handoff{lanes: lanes, wake: wake, on: on, metrics: m}
}

// Relay hands r, a recorded task outcome's relay, to this replica's lanes.
// It never blocks: the lanes own the resume from here, and its outcome is
// only counted (sutra_task_fast_path_total).
func (h *Handoff) Relay(r store.RelayOut) {
	if !h.on {
		h.wake()
		return
	}
	// The outbox publishes a relay row exactly so (outbox.Publisher).
	res, err := decode(&amqp.Delivery{MessageId: r.ID, ContentType: "application/json", RoutingKey: r.RoutingKey, Body: r.Body}, time.Now())
	if err != nil {
		// Published, the consumer dead-letters it with the reason.
		h.metrics.TaskFastPath.WithLabelValues(metrics.FastPathInvalid).Inc()
		h.wake()
		return
	}
	res.Done = func(out lanes.Result) {
		if out.Kind != lanes.Applied {
			h.wake()
		}
		h.metrics.TaskFastPath.WithLabelValues(fastPathLabel(out)).Inc()
		h.TestSignals.Done.Signal(Handed{MessageID: r.ID, Outcome: out})
	}
	h.lanes.Dispatch(res)
}

// fastPathLabel is the metric label of a handed-off relay's outcome: its
// kind, or for one left to its relay to be retried, why (claim_held,
// fenced, …).
func fastPathLabel(out lanes.Result) string {
	if (out.Kind == lanes.Refused || out.Kind == lanes.Retry) && out.Reason != "" {
		return out.Reason
	}
	return out.Kind.String()
}

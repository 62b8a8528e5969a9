package consumer

import (
	"container/heap"
	"context"
	"errors"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/sutra-run/worker/broker"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/backoff"
	"github.com/sutra-run/worker/internal/clip"
	"github.com/sutra-run/worker/lanes"
	"github.com/sutra-run/worker/metrics"
)

// Dead-letter headers.
const (
	HeaderCode   = "x-sutra-code"
	HeaderReason = "x-sutra-reason"
)

// maxTrackedBounces bounds the per-message bounce memory.
const maxTrackedBounces = 100_000

// result is the outcome of a dispatched delivery, sent back by its lane.
type result struct {
	d   *amqp.Delivery
	out lanes.Result
}

// session is one channel's life. Its goroutine is the only one that touches
// the channel: every ack, nack and dead-letter publish of a delivery happens
// here, on the channel that delivered it. Outcomes of a closed session's
// deliveries land in its own results buffer and are dropped with it; the
// broker redelivers those relays.
type session struct {
	c   *Consumer
	ch  *amqp.Channel
	tag string
	// hard is cancelled at the stop's deadline; it bounds dead-letter publishes.
	hard     context.Context
	results  chan result
	inflight int
	delayed  delayQueue
	// tracked are the deliveries not settled on the channel yet, in tag
	// order; byTag finds them (acks.go).
	tracked []*tracked
	byTag   map[uint64]*tracked
}

func (s *session) loop(soft, hard context.Context, deliveries <-chan amqp.Delivery, closed <-chan *amqp.Error) error {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	softDone := soft.Done()
	stopping := false
	var held time.Time // when the oldest held ack is due (zero: none)
	for {
		if stopping && s.inflight == 0 && deliveries == nil {
			s.nackDelayed(time.Time{}) // requeue now: another replica may take them
			s.flush(time.Now())        // nothing is at a lane: every answer is acked
			return nil
		}
		wake := held
		if len(s.delayed) > 0 && (wake.IsZero() || s.delayed[0].due.Before(wake)) {
			wake = s.delayed[0].due
		}
		if !wake.IsZero() {
			timer.Reset(time.Until(wake))
		}
		select {
		case d, ok := <-deliveries:
			switch {
			case !ok && stopping:
				deliveries = nil
			case !ok:
				return errors.New("consumer: delivery channel closed")
			case stopping:
				// Arrived before the cancel took effect: give it back untouched.
				_ = d.Nack(false, true)
			default:
				s.receive(&d)
			}
		case r := <-s.results:
			s.inflight--
			s.act(r)
			// Take every answer already back, so one ack covers them all.
			for more := true; more; {
				select {
				case r := <-s.results:
					s.inflight--
					s.act(r)
				default:
					more = false
				}
			}
		case <-timer.C:
			s.nackDelayed(time.Now())
		case <-softDone:
			softDone, stopping = nil, true
			if err := s.ch.Cancel(s.tag, false); err != nil {
				return err
			}
		case <-hard.Done():
			return hard.Err()
		case err := <-closed:
			return closeReason(err)
		}
		held = s.flush(time.Now())
	}
}

// receive decodes a delivery and dispatches it, or dead-letters it when it
// can never be decoded.
func (s *session) receive(d *amqp.Delivery) {
	s.track(d)
	r, err := decode(d, time.Now())
	if err != nil {
		s.deadLetter(d, "", err)
		return
	}
	s.inflight++
	results := s.results
	r.Done = func(out lanes.Result) { results <- result{d: d, out: out} }
	s.c.deps.Lanes.Dispatch(r)
}

// act answers a delivery by its outcome.
func (s *session) act(r result) {
	switch r.out.Kind {
	case lanes.Applied:
		s.ack(r.d, metrics.OutcomeCommitted)
	case lanes.Duplicate:
		s.ack(r.d, metrics.OutcomeDuplicate)
	case lanes.Buffered:
		s.ack(r.d, metrics.OutcomeBuffered)
	case lanes.Stale:
		s.ack(r.d, metrics.OutcomeStale)
	case lanes.Refused, lanes.Retry:
		if r.out.CountsAsFailure() {
			if n := s.countFailure(r.d); n >= s.c.cfg.MaxRetries {
				s.deadLetter(r.d, r.out.InstanceID, fault.Wrap(fault.RetriesExhausted, r.out.Err,
					"the relay failed %d times (SUTRA_RELAY_MAX_RETRIES)", n))
				return
			}
		}
		s.requeueLater(r.d, r.out.Reason)
	case lanes.Rejected:
		s.deadLetter(r.d, r.out.InstanceID, r.out.Err)
	}
}

// forget drops what the consumer remembers of a relay answered for good.
func (s *session) forget(d *amqp.Delivery) {
	delete(s.c.bounces, d.MessageId)
}

// attemptsTimeout bounds the statements of the durable failure count, which
// run on the session's goroutine.
const attemptsTimeout = 5 * time.Second

// countFailure counts one more transient failure of d durably and returns
// the relay's count over every replica. A count that cannot be written
// returns 0: the relay is requeued, never dead-lettered on a guess.
func (s *session) countFailure(d *amqp.Delivery) int {
	ctx, cancel := context.WithTimeout(s.hard, attemptsTimeout)
	defer cancel()
	n, err := s.c.deps.Attempts.CountRelayFailure(ctx, d.MessageId)
	if err != nil {
		s.c.deps.Logger.Warn("counting a relay's failure; requeued uncounted", "message_id", d.MessageId, "code", fault.Code(err), "err", err)
		return 0
	}
	return n
}

// forgetFailures deletes the count of a relay dead-lettered for its
// failures, so that the message published again starts afresh. If it fails
// the sweeper trims the count later.
func (s *session) forgetFailures(d *amqp.Delivery) {
	ctx, cancel := context.WithTimeout(s.hard, attemptsTimeout)
	defer cancel()
	if err := s.c.deps.Attempts.ForgetRelayFailures(ctx, d.MessageId); err != nil {
		s.c.deps.Logger.Warn("forgetting a dead-lettered relay's failures", "message_id", d.MessageId, "code", fault.Code(err), "err", err)
	}
}

// ack acknowledges a relay applied (committed, duplicate or buffered).
func (s *session) ack(d *amqp.Delivery, outcome string) {
	s.forget(d)
	s.answerAck(d, outcome, nil)
}

// requeueLater nacks d with requeue after a backoff that grows with each
// bounce of the same message id, so a relay refused for seconds costs a few
// redeliveries, not thousands.
func (s *session) requeueLater(d *amqp.Delivery, reason string) {
	if len(s.c.bounces) >= maxTrackedBounces {
		clear(s.c.bounces)
	}
	n := s.c.bounces[d.MessageId] + 1
	s.c.bounces[d.MessageId] = n
	delay := backoff.Delay(s.c.cfg.RequeueBackoff, s.c.cfg.RequeueBackoffMax, n)
	heap.Push(&s.delayed, delayed{due: time.Now().Add(delay), d: d})
	s.answerDelay(d)
	s.c.deps.Metrics.Relays.WithLabelValues(metrics.OutcomeRequeued).Inc()
	s.c.deps.Metrics.RelayRequeues.WithLabelValues(reason).Inc()
	s.c.TestSignals.Requeued.Signal(Requeue{MessageID: d.MessageId, Reason: reason, Bounce: n, Delay: delay})
}

// nackDelayed requeues every delayed delivery due by now (all if now is zero).
func (s *session) nackDelayed(now time.Time) {
	for len(s.delayed) > 0 && (now.IsZero() || !s.delayed[0].due.After(now)) {
		s.nack(heap.Pop(&s.delayed).(delayed).d)
	}
}

// deadLetter publishes d unchanged, with the code and reason in headers, to
// the dead-letter exchange through the broker owner's confirming channel,
// waits for the broker's confirm, and only then answers it to be acked. If the publish is not
// confirmed (or is returned) the delivery is requeued instead: a dead letter
// is never lost.
func (s *session) deadLetter(d *amqp.Delivery, instanceID string, cause error) {
	code := fault.Code(cause)
	if code == "" {
		code = fault.StepFailed
	}
	headers := amqp.Table{}
	for k, v := range d.Headers {
		headers[k] = v
	}
	headers[HeaderCode] = code
	headers[HeaderReason] = fault.Reason(cause)
	headers["x-sutra-exchange"] = d.Exchange
	headers["x-sutra-routing-key"] = d.RoutingKey
	ctx, cancel := context.WithTimeout(s.hard, 10*time.Second)
	defer cancel()
	err := s.c.deps.Broker.Publish(ctx, []broker.Message{{Exchange: s.c.cfg.DeadExchange, RoutingKey: d.RoutingKey, Publishing: amqp.Publishing{
		Headers: headers, ContentType: d.ContentType, ContentEncoding: d.ContentEncoding,
		DeliveryMode: amqp.Persistent, Priority: d.Priority, CorrelationId: d.CorrelationId,
		ReplyTo: d.ReplyTo, MessageId: d.MessageId, Timestamp: d.Timestamp, Type: d.Type,
		AppId: d.AppId, Body: d.Body,
	}}})[0]
	log := s.c.deps.Logger
	if err != nil {
		log.Error("dead-lettering failed; requeueing the relay", "message_id", d.MessageId, "instance_id", instanceID, "code", code, "err", err)
		s.requeueLater(d, "dead_letter_failed")
		return
	}
	s.forget(d)
	if code == fault.RetriesExhausted {
		s.forgetFailures(d)
	}
	s.answerAck(d, metrics.OutcomeDeadLettered, &DeadLetter{MessageID: d.MessageId, Code: code})
	log.Warn("relay dead-lettered", "message_id", d.MessageId, "instance_id", instanceID, "code", code, "reason", clip.String(fault.Reason(cause)))
}

// delayed is a delivery waiting for its requeue.
type delayed struct {
	due time.Time
	d   *amqp.Delivery
}

// delayQueue is a min-heap of delayed deliveries by due time.
type delayQueue []delayed

func (q delayQueue) Len() int           { return len(q) }
func (q delayQueue) Less(i, j int) bool { return q[i].due.Before(q[j].due) }
func (q delayQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *delayQueue) Push(x any)        { *q = append(*q, x.(delayed)) }
func (q *delayQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

package consumer

import (
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Acks are coalesced: one ack with multiple=true settles every delivery up
// to its tag, so the session keeps each delivery's answer until every
// delivery below it is answered too. A delivery is answered when it is to be
// acked (committed, duplicate, buffered, stale, dead-lettered), or settled on
// its own (a nack-requeue, sent individually, so a later multiple ack never
// covers it). What stops a multiple ack at a tag is a delivery still at a
// lane. A delivery waiting for its delayed requeue does not hold the acks
// above it back: those are sent one by one. Nor does a long step hold them
// longer than Config.AckHold: past it they too are sent one by one.
//
// Acks still pending when the channel closes are lost with it: the broker
// redelivers those relays and the inbox recognises them as duplicates.

// settlement is where a delivery is in the ack protocol.
type settlement int

const (
	atLane   settlement = iota // dispatched, not answered yet
	delaying                   // answered requeue, its nack not sent yet
	acking                     // answered, its ack not sent yet
	settled                    // acked or nacked on the channel
)

// tracked is one delivery of the session, in tag order.
type tracked struct {
	d     *amqp.Delivery
	state settlement
	// since is when an acking delivery was answered.
	since time.Time
	// outcome is the relays metric label of its ack; dead is set for a
	// dead letter, signalled when acked.
	outcome string
	dead    *DeadLetter
}

// track records a new delivery (the channel's tags only grow).
func (s *session) track(d *amqp.Delivery) {
	t := &tracked{d: d}
	s.tracked = append(s.tracked, t)
	s.byTag[d.DeliveryTag] = t
}

// answerAck marks d to be acked; flush sends it.
func (s *session) answerAck(d *amqp.Delivery, outcome string, dead *DeadLetter) {
	t := s.byTag[d.DeliveryTag]
	if t == nil { // not tracked (cannot happen): ack it at once
		_ = d.Ack(false)
		s.acked(d, outcome, dead)
		return
	}
	t.state, t.since, t.outcome, t.dead = acking, time.Now(), outcome, dead
}

// answerDelay marks d as waiting for its delayed requeue.
func (s *session) answerDelay(d *amqp.Delivery) {
	if t := s.byTag[d.DeliveryTag]; t != nil {
		t.state = delaying
	}
}

// nack requeues d now, on its own, before any multiple ack can cover it.
func (s *session) nack(d *amqp.Delivery) {
	_ = d.Nack(false, true)
	if t := s.byTag[d.DeliveryTag]; t != nil {
		t.state = settled
	}
}

// flush sends what acks it can: one multiple ack for the answered prefix,
// single acks for answered deliveries above a delaying one (or that waited
// AckHold behind one still at a lane). It returns when the oldest held ack
// must be sent (zero: none held).
func (s *session) flush(now time.Time) (next time.Time) {
	var multi *tracked
	var covered []*tracked
	prefix, atLaneBelow := true, false
	for _, t := range s.tracked {
		switch t.state {
		case settled:
		case atLane:
			prefix, atLaneBelow = false, true
		case delaying:
			prefix = false
		case acking:
			switch {
			case prefix:
				multi = t
				covered = append(covered, t)
				t.state = settled
			case !atLaneBelow || now.Sub(t.since) >= s.c.cfg.AckHold:
				_ = t.d.Ack(false)
				t.state = settled
				s.acked(t.d, t.outcome, t.dead)
			default:
				if due := t.since.Add(s.c.cfg.AckHold); next.IsZero() || due.Before(next) {
					next = due
				}
			}
		}
	}
	if multi != nil {
		_ = multi.d.Ack(len(covered) > 1)
		for _, t := range covered {
			s.acked(t.d, t.outcome, t.dead)
		}
	}
	// Drop the settled prefix.
	i := 0
	for i < len(s.tracked) && s.tracked[i].state == settled {
		delete(s.byTag, s.tracked[i].d.DeliveryTag)
		i++
	}
	clear(s.tracked[:i])
	s.tracked = s.tracked[i:]
	return next
}

// acked counts and signals an ack sent.
func (s *session) acked(d *amqp.Delivery, outcome string, dead *DeadLetter) {
	s.c.deps.Metrics.Relays.WithLabelValues(outcome).Inc()
	if dead != nil {
		s.c.deps.Metrics.DeadLetters.WithLabelValues(dead.Code).Inc()
		s.c.TestSignals.DeadLettered.Signal(*dead)
		return
	}
	s.c.TestSignals.Acked.Signal(d.MessageId)
}

package broker

import (
	"context"
	"errors"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/sutra-run/worker/fault"
)

// Message is one message to publish.
type Message struct {
	Exchange   string
	RoutingKey string
	amqp.Publishing
}

// Per-message failures of Publish, for errors.Is. Anything else Publish
// reports carries fault.Unavailable.
var (
	// ErrReturned: the broker returned the message (mandatory) because no
	// queue is bound for its routing key. It was not delivered.
	ErrReturned = errors.New("returned by the broker: no queue bound for its routing key")
	// ErrNacked: the broker refused the message (e.g. a full queue with
	// x-overflow reject-publish, or an internal error).
	ErrNacked = errors.New("nacked by the broker")
	// ErrUnconfirmed: the message was sent, and ctx ended before its
	// confirm came. The broker may have it and deliver it still, so it is
	// not "not sent": a caller that publishes it again now races that copy.
	// Such an error carries fault.Unavailable too.
	ErrUnconfirmed = errors.New("sent, but not confirmed in time")
)

// maxInFlight bounds the publishes awaiting confirms at once; it is also the
// room for their returns, so that the connection's reader never waits for us.
const maxInFlight = 1024

// slot is one Publish's right to a confirming channel; pc is opened when
// first needed and again after it closed.
type slot struct {
	pc *confirming
}

// confirming is a channel in confirm mode and its returns.
type confirming struct {
	ch      *amqp.Channel
	returns chan amqp.Return
}

// Publish publishes msgs mandatory, waits for every confirm, and reports per
// message nil (confirmed: acked and not returned), an error wrapping
// ErrReturned or ErrNacked, or a fault.Unavailable error (no connection, the
// channel or connection closed before the confirm, or ctx ended first: a
// message sent by then also wraps ErrUnconfirmed).
// Message ids within one call must be unique: a return names its message
// by id.
//
// A basic.return comes before the basic.ack of its message, so returns are
// collected while waiting for the confirms. Up to Config.PublishChannels
// calls run at once, each on its own channel; more wait for one.
func (o *Owner) Publish(ctx context.Context, msgs []Message) []error {
	errs := make([]error, len(msgs))
	if err := o.publishBlocked(); err != nil {
		fill(errs, err)
		return errs
	}
	var s *slot
	select {
	case s = <-o.slots:
	case <-ctx.Done():
		fill(errs, fault.Wrap(fault.Unavailable, ctx.Err(), "waiting for a confirming channel"))
		return errs
	}
	defer func() { o.slots <- s }()
	for lo := 0; lo < len(msgs); lo += maxInFlight {
		hi := min(lo+maxInFlight, len(msgs))
		o.publish(ctx, s, msgs[lo:hi], errs[lo:hi])
	}
	return errs
}

// publishBlocked is the error of a publish while the broker blocks the
// publishing connection: it would not read what is sent, nor confirm it,
// until it unblocks, and each publish would leave a channel waiting for
// its answers meanwhile. Nothing is sent.
func (o *Owner) publishBlocked() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.publishing.blocked {
		return nil
	}
	return fault.New(fault.Unavailable, "the broker blocks publishing (%s); nothing was sent", o.publishing.reason)
}

// publish publishes at most maxInFlight messages on s's channel and fills
// errs.
func (o *Owner) publish(ctx context.Context, s *slot, msgs []Message, errs []error) {
	pc, err := o.confirming(ctx, s)
	if err != nil {
		fill(errs, err)
		return
	}
	dcs := make([]*amqp.DeferredConfirmation, 0, len(msgs))
	for i, m := range msgs {
		dc, err := pc.ch.PublishWithDeferredConfirmWithContext(ctx, m.Exchange, m.RoutingKey, true, false, m.Publishing)
		if err != nil {
			fill(errs[i:], fault.Wrap(fault.Unavailable, err, "publishing to %s", m.Exchange))
			break
		}
		dcs = append(dcs, dc)
	}
	returned := map[string]amqp.Return{}
	returns := pc.returns
	collect := func(r amqp.Return, ok bool) {
		if !ok {
			returns = nil // the channel closed; its confirms are nacked
			return
		}
		returned[r.MessageId] = r
	}
	waited := 0
wait:
	for ; waited < len(dcs); waited++ {
		for {
			select {
			case r, ok := <-returns:
				collect(r, ok)
				continue
			case <-dcs[waited].Done():
			case <-ctx.Done():
				break wait
			}
			break
		}
	}
	// The returns of every message confirmed so far were sent before its
	// confirm: they are in the buffer by now.
	for drained := false; !drained && returns != nil; {
		select {
		case r, ok := <-returns:
			collect(r, ok)
		default:
			drained = true
		}
	}
	for i, dc := range dcs[:waited] {
		m := msgs[i]
		switch r, isReturned := returned[m.MessageId]; {
		case !dc.Acked() && pc.ch.IsClosed():
			errs[i] = fault.New(fault.Unavailable, "the channel closed before the broker confirmed the message to %s", m.Exchange)
		case !dc.Acked():
			errs[i] = fmt.Errorf("publishing to %s: %w", m.Exchange, ErrNacked)
		case isReturned:
			errs[i] = fmt.Errorf("publishing to %s with routing key %q: %w (%d %s)", m.Exchange, m.RoutingKey, ErrReturned, r.ReplyCode, r.ReplyText)
		}
	}
	if waited < len(dcs) {
		fill(errs[waited:len(dcs)], fault.Wrap(fault.Unavailable, fmt.Errorf("%w: %w", ErrUnconfirmed, ctx.Err()), "waiting for the broker's confirms"))
		// Confirms and returns of this batch may still come: they must not
		// be taken for the next batch's.
		s.pc = nil
		o.discard(pc)
	}
}

func fill(errs []error, err error) {
	for i := range errs {
		errs[i] = err
	}
}

// confirming returns s's confirming channel, opening one on the publishing
// connection when there is none or it closed. Opening waits for the
// broker's answers, which a sick connection may not give: it gives up when
// ctx ends, and a channel that opens after that is closed unused.
func (o *Owner) confirming(ctx context.Context, s *slot) (*confirming, error) {
	if s.pc != nil && !s.pc.ch.IsClosed() {
		return s.pc, nil
	}
	s.pc = nil
	pc, err := within(o, ctx, "opening a confirming channel", o.openConfirming, func(pc *confirming) { _ = pc.ch.Close() })
	s.pc = pc
	return pc, err
}

// openConfirming opens a channel in confirm mode.
func (o *Owner) openConfirming() (*confirming, error) {
	var returns chan amqp.Return
	ch, err := o.open(o.publishing, func(ch *amqp.Channel) error {
		if err := ch.Confirm(false); err != nil {
			return fault.Wrap(fault.Unavailable, err, "enabling publisher confirms")
		}
		returns = ch.NotifyReturn(make(chan amqp.Return, maxInFlight))
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &confirming{ch: ch, returns: returns}, nil
}

// discard closes a confirming channel in the background.
func (o *Owner) discard(pc *confirming) { o.closeChannel(pc.ch) }

// closeChannel closes ch in the background: a close waits for the broker's
// answer, which may take a while on a sick connection.
func (o *Owner) closeChannel(ch *amqp.Channel) {
	if !o.background(func() { _ = ch.Close() }) {
		// The connection is closed: so is the channel, at once.
		_ = ch.Close()
	}
}

// background runs f on a goroutine that the owner's stop waits for, unless
// the owner stopped (false). f must end once its connection closes.
func (o *Owner) background(f func()) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stopped {
		return false
	}
	o.closing.Go(f)
	return true
}

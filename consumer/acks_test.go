package consumer_test

import (
	"sync"
	"testing"
	"time"

	"github.com/sutra-run/worker/consumer"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/lanes"
)

// Acks are coalesced into one ack with multiple=true behind the lowest
// delivery still at a lane, yet a refused delivery between the acked ones is
// never covered by it (it is redelivered and applied later), a dead letter
// between them is acked once and never redelivered, and every applied relay
// is acked exactly once: an ack of a tag already settled would close the
// channel (PRECONDITION_FAILED), which the test would see as a disconnect.
func TestCoalescedAcksNeverCoverARefusedDeliveryAndAckEachAppliedOneOnce(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var mu sync.Mutex
	attempts := map[string]int{}
	cons, pub := start(t, func(r lanes.Resume, n int) lanes.Result {
		mu.Lock()
		attempts[r.InboxID()] = n
		mu.Unlock()
		switch {
		case r.InboxID() == "m-1":
			<-release // the lowest tag answers last: every ack above it waits
		case r.InboxID() == "m-3" && n == 1:
			return lanes.Result{Kind: lanes.Refused, Code: fault.ClaimHeld, Reason: lanes.ReasonClaimHeld}
		case r.InboxID() == "m-4":
			return lanes.Result{Kind: lanes.Rejected, Code: fault.NotWaiting, Err: fault.New(fault.NotWaiting, "poison")}
		}
		return lanes.Result{Kind: lanes.Applied}
	}, func(c *consumer.Config) {
		c.AckHold = time.Minute // nothing is acked on its own behind m-1
		// m-3 is still waiting for its requeue when m-1 is answered.
		c.RequeueBackoff, c.RequeueBackoffMax = 300*time.Millisecond, 300*time.Millisecond
	})
	pub.Publish(relay("m-1"), relay("m-2"), relay("m-3"), relay("m-4"), relay("m-5"))
	if rq := cons.TestSignals.Requeued.WaitOrTimeout(t); rq.MessageID != "m-3" {
		t.Fatalf("requeued %+v, want m-3", rq)
	}
	if acked := cons.TestSignals.Acked.Drain(); len(acked) != 0 {
		t.Errorf("acked %v while m-1, below them, was still at a lane", acked)
	}
	close(release)
	got := map[string]int{}
	for range 4 { // m-1, m-2, m-5, then m-3 once redelivered
		got[cons.TestSignals.Acked.WaitOrTimeout(t)]++
	}
	for _, id := range []string{"m-1", "m-2", "m-3", "m-5"} {
		if got[id] != 1 {
			t.Errorf("%s acked %d times, want once (acks %v)", id, got[id], got)
		}
	}
	if dl := cons.TestSignals.DeadLettered.WaitOrTimeout(t); dl.MessageID != "m-4" {
		t.Errorf("dead-lettered %+v, want m-4", dl)
	}
	mu.Lock()
	if attempts["m-3"] != 2 || attempts["m-4"] != 1 || attempts["m-2"] != 1 {
		t.Errorf("attempts = %v: want m-3 redelivered once, m-2 and m-4 never", attempts)
	}
	mu.Unlock()
	if errs := cons.TestSignals.Disconnected.Drain(); len(errs) != 0 {
		t.Errorf("the channel closed: %v (an ack of a settled tag?)", errs)
	}
}

package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/claims"
	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/lanes"
	"github.com/sutra-run/worker/store"
)

func byKeyWithTTL(messageID, message, key, ttl string) testkit.Relay {
	return testkit.Relay{MessageID: messageID, Body: map[string]any{
		"message": message, "correlation_key": key, "ttl": ttl, "variables": map[string]any{"from": messageID},
	}}
}

func TestMessagesBufferedBeforeTheirSubscriptionsAreConsumedByTheStepsThatOpenThem(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	// Both messages arrive before the instance exists.
	b.pub.Publish(byKeyWithTTL("shipped-o-1", "order-shipped", "o-1", "PT1M"))
	b.pub.Publish(byKeyWithTTL("paid-o-1", "payment-received", "o-1", "PT1M"))
	b.waitRelays(t, "buffered", 2)
	if n := b.env.Int(t, "SELECT count(*) FROM buffered_messages"); n != 2 {
		t.Fatalf("buffered rows = %d, want 2", n)
	}
	// The start opens the payment subscription, which consumes the payment,
	// which opens the shipment subscription, which consumes the shipment: all
	// in the start's one commit.
	b.pub.Publish(start("o-1"))
	b.waitVersion(t, "o-1", 1)
	if n := b.env.Int(t, "SELECT count(*) FROM instances WHERE id = 'o-1' AND status = 'completed'"); n != 1 {
		t.Errorf("instance not completed by the start's commit")
	}
	for _, table := range []string{"buffered_messages", "subscriptions"} {
		if n := b.env.Int(t, "SELECT count(*) FROM "+table); n != 0 {
			t.Errorf("%d rows left in %s", n, table)
		}
	}
	if n := b.env.Int(t, "SELECT count(*) FROM inbox WHERE message_id IN ('start-o-1', 'paid-o-1', 'shipped-o-1')"); n != 3 {
		t.Errorf("inbox has %d of the 3 message ids", n)
	}
	b.waitCounter(t, "sutra_buffered_consumed_total", 2) // counted just after the commit the test saw
	// A redelivered copy of a consumed message is a duplicate, not a second buffering.
	b.pub.Publish(byKeyWithTTL("paid-o-1", "payment-received", "o-1", "PT1M"))
	b.waitRelays(t, "duplicate", 1)
	b.env.AssertNoOverlap(t, false)
	b.env.AssertNoClaimsHeld(t)
}

func TestBufferedMessagePastItsTTLIsDeadLetteredUnchanged(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, func(c *app.Config) { c.Sweeper.Interval = 100 * time.Millisecond; c.LeaseTTL = time.Second })
	relay := byKeyWithTTL("lonely", "order-shipped", "nobody", "PT0.5S")
	b.pub.Publish(relay)
	dead := b.pub.DeadLetters(1, 10*time.Second)
	if len(dead) != 1 || dead[0].MessageID != "lonely" || dead[0].Code != fault.RelayUncorrelated {
		t.Fatalf("dead letters = %+v, want lonely with %s", dead, fault.RelayUncorrelated)
	}
	want, _ := json.Marshal(relay.Body)
	if !bytes.Equal(dead[0].Body, want) {
		t.Errorf("dead letter body = %s, want the relay unchanged: %s", dead[0].Body, want)
	}
	b.w.Sweeper().TestSignals.Swept.Until(t, "buffer emptied", func() bool {
		return b.env.Int(t, "SELECT count(*) FROM buffered_messages") == 0
	})
	b.waitCounter(t, "sutra_buffered_expired_total", 1) // counted just after the commit the test saw
	if got := b.relays(t, "buffered"); got != 1 {
		t.Errorf("relays buffered = %v, want 1", got)
	}
}

func TestRelayWithoutTTLIsDeadLetteredNotBuffered(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	b.pub.Publish(testkit.Relay{MessageID: "no-ttl", Body: map[string]any{"message": "order-shipped", "correlation_key": "nobody"}})
	dead := b.pub.DeadLetters(1, 10*time.Second)
	if len(dead) != 1 || dead[0].Code != fault.RelayUncorrelated {
		t.Fatalf("dead letters = %+v", dead)
	}
	if n := b.env.Int(t, "SELECT count(*) FROM buffered_messages"); n != 0 {
		t.Errorf("a relay without ttl was buffered")
	}
}

func TestBufferingRacingSubscriptionsNeverStrandsAMessage(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, func(c *app.Config) { c.Lanes.Count = 8 })
	const n = 300
	var starts []testkit.Relay
	for i := range n {
		starts = append(starts, start(fmt.Sprintf("o-%d", i)))
	}
	b.pub.Publish(starts...)
	b.waitCommitted(t, "all started", func() bool {
		return b.env.Int(t, "SELECT count(*) FROM instances WHERE version = 1") == n
	})
	// The shipment of each order races the payment step that opens its
	// subscription: it is either resolved, or buffered and then consumed.
	var wg sync.WaitGroup
	pub2 := b.env.Publisher(t)
	for _, p := range []*testkit.Publisher{b.pub, pub2} {
		wg.Go(func() {
			for i := range n {
				id := fmt.Sprintf("o-%d", i)
				if p == b.pub {
					p.Publish(paid(id))
				} else {
					p.Publish(byKeyWithTTL("shipped-"+id, "order-shipped", id, "PT5M"))
				}
			}
		})
	}
	wg.Wait()
	b.waitCommitted(t, "all completed", func() bool {
		return b.env.Int(t, "SELECT count(*) FROM instances WHERE status = 'completed'") == n
	})
	if left := b.env.Int(t, "SELECT count(*) FROM buffered_messages"); left != 0 {
		t.Errorf("%d messages stranded in the buffer while their subscriptions opened", left)
	}
	if dead := b.relays(t, "dead_lettered"); dead != 0 {
		t.Errorf("%v relays dead-lettered", dead)
	}
	t.Logf("buffered %v, consumed from the buffer %v", b.relays(t, "buffered"), b.counter(t, "sutra_buffered_consumed_total", "", ""))
	b.env.AssertNoOverlap(t, false)
}

// stepAsAnotherOwner applies message to instance id as a step of another
// replica would, through the claim helper: the instance's subscription is
// consumed by a step this worker does not run.
func stepAsAnotherOwner(ctx context.Context, env *testkit.Env, id, message, key string) error {
	st, err := store.Open(ctx, env.Config.DatabaseURL, store.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	held, err := claims.New(st, "another-replica/lane/0", time.Minute, nil).Claim(ctx, claims.Request{InstanceID: id})
	if err != nil {
		return err
	}
	defer held.Release(ctx)
	proc, err := st.Process(ctx, held.Instance.DefinitionKey, held.Instance.DefinitionVersion)
	if err != nil {
		return err
	}
	next, eff, err := engine.Step(proc, engine.Instance{ID: id, Version: held.Instance.Version, State: held.Instance.State},
		engine.Trigger{Kind: engine.TriggerMessage, Message: message, CorrelationKey: key}, time.Now())
	if err != nil {
		return err
	}
	return held.WriteStep(ctx, next, eff, claims.Extras{})
}

// raceOnce makes the first resolve of relay messageID lose its instance to
// another replica's step before the claim.
func raceOnce(env *atomic.Pointer[testkit.Env], messageID string) *lanes.Hooks {
	var once sync.Once
	return &lanes.Hooks{AfterResolve: func(ctx context.Context, _ int, r *lanes.Resume) {
		c, ok := r.Cause.(lanes.Correlate)
		if !ok || r.InboxID() != messageID {
			return
		}
		once.Do(func() {
			if err := stepAsAnotherOwner(ctx, env.Load(), r.InstanceID(), c.Message, c.CorrelationKey); err != nil {
				panic(err)
			}
		})
	}}
}

func TestTTLRelayWhoseInstanceStopsWaitingBeforeItsClaimGoesToTheNextWaiterNotTheDeadLetters(t *testing.T) {
	t.Parallel()
	var env atomic.Pointer[testkit.Env]
	b := setup(t, raceOnce(&env, "shipped-race"), nil)
	env.Store(b.env)
	// Two instances wait for order-shipped under the same key; o-1 first.
	b.pub.Publish(start("o-1"))
	b.waitVersion(t, "o-1", 1)
	b.pub.Publish(testkit.Relay{MessageID: "start-o-2", Body: map[string]any{"start": "order", "instance_id": "o-2", "variables": map[string]any{"orderId": "o-1"}}})
	b.waitVersion(t, "o-2", 1)
	b.pub.Publish(paid("o-1"))
	b.waitVersion(t, "o-1", 2)
	b.pub.Publish(testkit.Relay{MessageID: "paid-o-2", Body: map[string]any{"instance_id": "o-2", "message": "payment-received"}})
	b.waitVersion(t, "o-2", 2)
	// Resolved to o-1, which another replica's step completes before the claim.
	b.pub.Publish(byKeyWithTTL("shipped-race", "order-shipped", "o-1", "PT1M"))
	b.waitVersion(t, "o-2", 3)
	if v := b.version(t, "o-1"); v != 3 {
		t.Errorf("o-1 at version %d, want 3 (completed by the other step)", v)
	}
	b.waitRelays(t, "committed", 5)
	if d := b.relays(t, "dead_lettered"); d != 0 {
		t.Errorf("%v relays dead-lettered", d)
	}
	b.env.AssertNoClaimsHeld(t)
}

func TestTTLRelayWhoseInstanceStopsWaitingBeforeItsClaimIsBufferedUntilItsTTL(t *testing.T) {
	t.Parallel()
	var env atomic.Pointer[testkit.Env]
	b := setup(t, raceOnce(&env, "shipped-race"), nil)
	env.Store(b.env)
	b.pub.Publish(start("o-1"))
	b.waitVersion(t, "o-1", 1)
	b.pub.Publish(paid("o-1"))
	b.waitVersion(t, "o-1", 2)
	b.pub.Publish(byKeyWithTTL("shipped-race", "order-shipped", "o-1", "PT1M"))
	b.waitRelays(t, "buffered", 1)
	if n := b.env.Int(t, "SELECT count(*) FROM buffered_messages WHERE message_id = 'shipped-race'"); n != 1 {
		t.Errorf("buffered rows = %d, want 1", n)
	}
	if d := b.relays(t, "dead_lettered"); d != 0 {
		t.Errorf("%v relays dead-lettered before their TTL", d)
	}
	b.env.AssertNoClaimsHeld(t)
}

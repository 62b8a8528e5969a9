package app_test

import (
	"testing"
	"time"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/testkit"
)

func signedUp(messageID, customer, ttl string) testkit.Relay {
	body := map[string]any{"message": "customer-signed-up", "variables": map[string]any{"customerId": customer}}
	if customer != "" {
		body["correlation_key"] = customer
	}
	if ttl != "" {
		body["ttl"] = ttl
	}
	return testkit.Relay{MessageID: messageID, Body: body}
}

func TestAMessageStartEventStartsOneInstancePerMessageID(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	b.env.Deploy(t, "testdata/signup.bpmn")
	b.pub.Publish(signedUp("m-1", "", ""), signedUp("m-1", "", ""), signedUp("m-2", "", ""))
	b.waitCommitted(t, "two instances waiting", func() bool {
		return b.env.Int(t, "SELECT count(*) FROM instances WHERE definition_key = 'signup' AND version = 1") == 2
	})
	b.waitRelays(t, "duplicate", 1)
	if n := b.env.Int(t, "SELECT count(*) FROM subscriptions WHERE message_name = 'email-verified'"); n != 2 {
		t.Errorf("%d subscriptions, want 2", n)
	}
	b.env.AssertNoClaimsHeld(t)
}

func TestASecondMessageStartWithAnActiveKeyAndNoTTLIsDeadLettered(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	b.env.Deploy(t, "testdata/signup.bpmn")
	b.pub.Publish(signedUp("m-1", "c-1", ""))
	b.waitCommitted(t, "c-1 started", func() bool {
		return b.env.Int(t, "SELECT count(*) FROM instances WHERE start_correlation_key = 'c-1' AND status = 'active' AND version = 1") == 1
	})
	b.pub.Publish(signedUp("m-2", "c-1", ""))
	dead := b.pub.DeadLetters(1, 15*time.Second)
	if len(dead) != 1 || dead[0].MessageID != "m-2" || dead[0].Code != fault.StartKeyActive {
		t.Fatalf("dead letters = %+v, want m-2 with %s", dead, fault.StartKeyActive)
	}
	// Another key starts at once.
	b.pub.Publish(signedUp("m-3", "c-2", ""))
	b.waitCommitted(t, "c-2 started", func() bool {
		return b.env.Int(t, "SELECT count(*) FROM instances WHERE start_correlation_key = 'c-2' AND version = 1") == 1
	})
	b.env.AssertNoClaimsHeld(t)
}

// A message start whose key an active instance holds waits, buffered with
// its ttl, and starts the moment that instance ends.
func TestAMessageStartWaitingForItsKeyStartsWhenTheActiveInstanceEnds(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	b.env.Deploy(t, "testdata/signup.bpmn")
	b.pub.Publish(signedUp("m-1", "c-1", ""))
	b.waitCommitted(t, "the first c-1 started", func() bool {
		return b.env.Int(t, "SELECT count(*) FROM instances WHERE start_correlation_key = 'c-1' AND version = 1") == 1
	})
	b.pub.Publish(signedUp("m-2", "c-1", "PT10M"))
	b.waitRelays(t, "buffered", 1)
	if n := b.env.Int(t, "SELECT count(*) FROM instances WHERE definition_key = 'signup'"); n != 1 {
		t.Fatalf("%d instances while the key is held, want 1", n)
	}
	// The first ends: its e-mail is verified.
	b.pub.Publish(testkit.Relay{MessageID: "v-1", Body: map[string]any{"message": "email-verified", "correlation_key": "c-1"}})
	b.waitCommitted(t, "the second c-1 started after the first ended", func() bool {
		return b.env.Int(t, "SELECT count(*) FROM instances WHERE start_correlation_key = 'c-1' AND status = 'active' AND version = 1") == 1 &&
			b.env.Int(t, "SELECT count(*) FROM instances WHERE definition_key = 'signup' AND status = 'completed'") == 1
	})
	if n := b.env.Int(t, "SELECT count(*) FROM buffered_messages"); n != 0 {
		t.Errorf("%d buffered messages left", n)
	}
	if dead := b.pub.QueueDepth(b.env.Config.DeadQueue); dead != 0 {
		t.Errorf("%d dead letters", dead)
	}
	b.env.AssertNoClaimsHeld(t)
}

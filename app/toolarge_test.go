package app_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/testkit"
)

func TestARelayWhoseStepWouldPassTheLimitsIsDeadLetteredAndTheInstanceIsUnchangedAndUnclaimed(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, func(c *app.Config) { c.Lanes.Count = 1; c.MaxVariablesBytes = 8 << 10 })
	b.pub.Publish(start("o-1"), start("o-2"), start("o-3"))
	for _, id := range []string{"o-1", "o-2", "o-3"} {
		b.waitVersion(t, id, 1)
	}
	big := paid("o-2")
	big.Body.(map[string]any)["variables"] = map[string]any{"blob": strings.Repeat("x", 9<<10)}
	// One lane, three relays queued at once: they may run as one batch, whose
	// neighbours commit, or one by one; either way only o-2's is refused.
	b.pub.Publish(paid("o-1"), big, paid("o-3"))
	dead := b.pub.DeadLetters(1, 20*time.Second)
	if len(dead) != 1 || dead[0].Code != fault.StepTooLarge || dead[0].MessageID != "paid-o-2" {
		for _, d := range dead {
			t.Logf("dead letter %s: %s %s", d.MessageID, d.Code, d.Reason)
		}
		t.Fatalf("%d dead letters, want paid-o-2 with %s", len(dead), fault.StepTooLarge)
	}
	b.waitVersion(t, "o-1", 2)
	b.waitVersion(t, "o-3", 2)
	if v := b.version(t, "o-2"); v != 1 {
		t.Errorf("the refused step changed its instance: version %d", v)
	}
	if n := b.env.Int(t, "SELECT count(*) FROM inbox WHERE message_id = 'paid-o-2'"); n != 0 {
		t.Error("the refused relay is in the inbox")
	}
	// A batch answers its steps before it releases their claims; the one
	// lane takes its next relay only once it has released them.
	b.pub.Publish(start("o-4"))
	b.waitVersion(t, "o-4", 1)
	b.env.AssertNoClaimsHeld(t)
}

func TestATimerFireWhoseStepWouldPassTheLimitsStopsInAnIncidentOnItsElement(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, func(c *app.Config) { c.MaxVariablesBytes = 8 << 10; c.Timers.MaxAttempts = 1 })
	signals := &b.w.Timers().TestSignals
	signals.Init()
	b.env.Deploy(t, "testdata/timer-grow.bpmn")
	b.pub.Publish(testkit.Relay{MessageID: "start-g-1", Body: map[string]any{"start": "timer-grow", "instance_id": "g-1",
		"variables": map[string]any{"delay": "PT1S", "seed": strings.Repeat("s", 3<<10)}}})
	b.waitVersion(t, "g-1", 1)
	// The fire's step would leave 12 KB of variables: refused, it fails the
	// fire, and past SUTRA_TIMER_MAX_ATTEMPTS the timer stops in an incident.
	parked := signals.Parked.WaitOrTimeout(t)
	var code, element, message string
	err := b.env.DB.QueryRow(testkit.Ctx(t), "SELECT code, element_id, message FROM incidents WHERE id = $1", parked.IncidentID).
		Scan(&code, &element, &message)
	if err != nil {
		t.Fatal(err)
	}
	if code != fault.IncidentTimerFailed || element != "Wait" || !strings.Contains(message, fault.StepTooLarge) {
		t.Errorf("incident %s on %s: %s; want %s on Wait naming %s", code, element, message, fault.IncidentTimerFailed, fault.StepTooLarge)
	}
	if v := b.version(t, "g-1"); v != 1 {
		t.Errorf("the refused fire changed its instance: version %d", v)
	}
	b.env.AssertNoClaimsHeld(t)
}

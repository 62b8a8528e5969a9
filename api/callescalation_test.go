package api_test

import (
	"testing"
	"time"

	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/metrics"
)

// A child's escalations reach its parent's call activity through the
// relays between them, each instance stepping under its own claim: LATE,
// thrown while the child works on, is caught by a non-interrupting boundary
// event once however often its relay is delivered; STOP, thrown by the
// child's escalation end event, rides in the child's end relay and is caught
// by the interrupting boundary event before the end would complete the call
// activity.
func TestAChildsEscalationsReachItsParentsCallActivityOnceEachThroughTheRelays(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, nil)
	b.env.Deploy(t, "testdata/escalation.bpmn")
	b.pub.Publish(testkit.Relay{MessageID: "start-esc-1", Body: map[string]any{"start": "escalation-parent", "instance_id": "esc-1"}})
	// The child is the call activity's token t1's; its start step (version 1)
	// threw LATE.
	const child, escalation = "esc-1/t1", "escalation:esc-1/t1/1"
	b.applied(t, "start-esc-1", "start:"+child, escalation)
	if n := b.env.Int(t, "SELECT count(*) FROM tasks WHERE instance_id = 'esc-1' AND type = 'note-late'"); n != 1 {
		t.Fatalf("the parent has %d note-late tasks once LATE applied, want 1", n)
	}
	version := b.env.Int(t, "SELECT version FROM instances WHERE id = 'esc-1'")

	// The relay again, as a broker redelivery would bring it: acked as a
	// duplicate, no second step.
	var body []byte
	if err := b.env.DB.QueryRow(testkit.Ctx(t), "SELECT body FROM outbox WHERE id = $1", escalation).Scan(&body); err != nil {
		t.Fatalf("the escalation's relay in the outbox: %v", err)
	}
	b.pub.Publish(testkit.Relay{MessageID: escalation, Body: body})
	b.applied(t, escalation)
	b.relays(t, map[string]float64{metrics.OutcomeDuplicate: 1, metrics.OutcomeDeadLettered: 0})
	if n := b.env.Int(t, "SELECT count(*) FROM tasks WHERE instance_id = 'esc-1' AND type = 'note-late'"); n != 1 {
		t.Errorf("the parent has %d note-late tasks after the redelivery, want 1", n)
	}
	if v := b.env.Int(t, "SELECT version FROM instances WHERE id = 'esc-1'"); v != version {
		t.Errorf("the parent stepped again on the redelivery: version %d, want %d", v, version)
	}

	// The child's worker stops it: its escalation end event throws STOP and
	// ends the child; the parent's interrupting boundary catches it, so the
	// call activity never completes (no after-ship task) and the ended child
	// is not cancelled.
	carry := b.fetch(t, "w", "carry-late", 1, time.Minute, 0)
	if len(carry) != 1 {
		t.Fatalf("fetched %d carry-late tasks, want the child's one", len(carry))
	}
	b.answer(t, carry[0].ID, "complete", map[string]any{"workerId": "w",
		"variables": map[string]any{"stop": map[string]any{"value": true, "type": "Boolean"}}})
	b.stepped(t, child, "completed", outcome(carry[0].ID))
	b.applied(t, "end:"+child)
	if n := b.env.Int(t, "SELECT count(*) FROM tasks WHERE type = 'after-ship'"); n != 0 {
		t.Error("the call activity completed: STOP was not caught before the child's end")
	}
	if n := b.env.Int(t, "SELECT count(*) FROM outbox WHERE id = $1", "cancel:"+child); n != 0 {
		t.Error("the parent cancelled its child, which had ended")
	}
	note := b.fetch(t, "w", "note-late", 1, time.Minute, 0)
	if len(note) != 1 {
		t.Fatalf("fetched %d note-late tasks, want 1", len(note))
	}
	b.answer(t, note[0].ID, "complete", map[string]any{"workerId": "w"})
	b.stepped(t, "esc-1", "completed", outcome(note[0].ID))
	if n := b.env.Int(t, "SELECT count(*) FROM incidents"); n != 0 {
		t.Errorf("%d incidents, want none", n)
	}
	b.env.AssertNoOverlap(t, false)
	b.env.AssertNoClaimsHeld(t)
}

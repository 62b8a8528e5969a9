package store_test

import (
	"bytes"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/store"
)

// Only claims and releases may skip the WAL flush: they are soft state that
// the commit fence re-checks. So may the outbox publisher's leases and marks,
// which precede no ack: a lost one only publishes a message again. Every
// write that precedes an ack or a success answer must be durable when it
// returns: a deploy ("deployed"), a buffered relay (acked once buffered), a
// step commit with its inbox and outbox rows (acked once committed), the
// consumption of a timer fire and of a buffered message, a forward, an admin
// write. The audit reads
// synchronous_commit at each transaction's commit.
func TestEveryWriteBeforeAnAckOrASuccessAnswerWaitsForTheWALFlush(t *testing.T) {
	t.Parallel()
	env, ctx, st := open(t)
	env.AuditDurability(t, "definitions", "instances", "claims", "inbox_days", "buffered_messages", "subscriptions", "timers", "tasks", "outbox", "incidents", "migrations")
	deploy := func(path string) *bpmn.Process {
		xml, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Deploy(ctx, xml); err != nil {
			t.Fatal(err)
		}
		p, err := bpmn.Parse(bytes.NewReader(xml))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	order, timer, quote := deploy("../examples/order.bpmn"), deploy("../app/testdata/timer.bpmn"), deploy("../examples/quote-request.bpmn")
	tasks, review := deploy("../api/testdata/tasks.bpmn"), deploy("../api/testdata/review.bpmn")
	const owner = "r/lane/0"
	claim := func(id, startKey string) store.Instance {
		inst, err := st.Claim(ctx, store.ClaimRequest{InstanceID: id, Owner: owner, Timeout: time.Minute, StartKey: startKey})
		if err != nil {
			t.Fatal(err)
		}
		return inst
	}
	step := func(p *bpmn.Process, inst store.Instance, tr engine.Trigger) (engine.State, engine.Effects) {
		if tr.Kind == engine.TriggerStart {
			inst.State = engine.State{} // a start's row holds no state yet
		}
		st, eff, err := engine.Step(p, engine.Instance{ID: inst.ID, Version: inst.Version, State: inst.State}, tr, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return st, eff
	}

	// A relay buffered before its subscription opens (then acked).
	if _, err := st.ResolveOrBuffer(ctx, store.Buffer{Message: "payment-received", CorrelationKey: "o-1", MessageID: "paid-o-1",
		TTL: time.Minute, Variables: map[string]any{"amount": 1.0}, Body: []byte(`{}`)}); !errors.Is(err, store.ErrBuffered) {
		t.Fatalf("buffering: %v", err)
	}
	// A start whose commit consumes the buffered payment.
	inst := claim("o-1", "order")
	state, eff := step(order, inst, engine.Trigger{Kind: engine.TriggerStart, Variables: map[string]any{"orderId": "o-1"}})
	c := store.StepWrites{InstanceID: "o-1", Owner: owner, Version: inst.Version, State: state, Effects: eff, InboxID: "start-o-1"}
	var m *store.BufferedMatch
	if err := st.WriteStep(ctx, c); !errors.As(err, &m) {
		t.Fatalf("commit = %v, want the buffered match", err)
	}
	next, more := step(order, store.Instance{ID: "o-1", Version: inst.Version, State: state},
		engine.Trigger{Kind: engine.TriggerMessage, Message: m.Message, CorrelationKey: m.CorrelationKey, Variables: m.Variables})
	c.State, c.Consumed, c.SkipBufferCheck = next, []store.Consumed{{BufferedID: m.ID, Effects: more}}, true
	if err := st.WriteStep(ctx, c); err != nil {
		t.Fatal(err)
	}
	// A claim given up without a step.
	claim("o-1", "")
	if err := st.Release(ctx, "o-1", owner); err != nil {
		t.Fatal(err)
	}
	// A timer armed, leased, deferred, and fired.
	inst = claim("t-1", "timer")
	state, eff = step(timer, inst, engine.Trigger{Kind: engine.TriggerStart, Variables: map[string]any{"delay": "PT0S"}})
	if err := st.WriteStep(ctx, store.StepWrites{InstanceID: "t-1", Owner: owner, Version: inst.Version, State: state, Effects: eff}); err != nil {
		t.Fatal(err)
	}
	due, _, _, err := st.TakeDueTimers(ctx, "r", 10, time.Minute)
	if err != nil || len(due) != 1 {
		t.Fatalf("due timers = %v, %v", due, err)
	}
	inst = claim("t-1", "")
	state, eff = step(timer, inst, engine.Trigger{Kind: engine.TriggerTimer, TokenID: due[0].TokenID, Element: due[0].Element})
	if err := st.WriteStep(ctx, store.StepWrites{InstanceID: "t-1", Owner: owner, Version: inst.Version, State: state, Effects: eff, TimerID: due[0].ID}); err != nil {
		t.Fatal(err)
	}

	// A step that sends a message, and its publication.
	inst = claim("q-1", "quote-request")
	state, eff = step(quote, inst, engine.Trigger{Kind: engine.TriggerStart, Variables: map[string]any{"requestId": "q-1", "item": "anvil"}})
	if err := st.WriteStep(ctx, store.StepWrites{InstanceID: "q-1", Owner: owner, Version: inst.Version, State: state, Effects: eff}); err != nil {
		t.Fatal(err)
	}
	rows, err := st.LeaseOutbox(ctx, "r", 10, time.Minute)
	if err != nil || len(rows) != 1 {
		t.Fatalf("leased %v, %v", rows, err)
	}
	if err := st.SettleOutbox(ctx, "r", store.OutboxSettlement{Published: []string{rows[0].ID}}); err != nil {
		t.Fatal(err)
	}

	// A pull task: its lock is soft (like a claim); its outcome, answered
	// 204, is not.
	inst = claim("k-1", "tasks")
	state, eff = step(tasks, inst, engine.Trigger{Kind: engine.TriggerStart, Variables: map[string]any{"topic": "ship", "timeout": "PT1H"}})
	if err := st.WriteStep(ctx, store.StepWrites{InstanceID: "k-1", Owner: owner, Version: inst.Version, State: state, Effects: eff}); err != nil {
		t.Fatal(err)
	}
	locked, err := st.FetchAndLock(ctx, "w", []store.TopicLock{{Topic: "ship", LockDuration: time.Minute}}, 1, false)
	if err != nil || len(locked) != 1 {
		t.Fatalf("locked %v, %v", locked, err)
	}
	if _, err := st.RecordOutcome(ctx, store.TaskReport{TaskID: locked[0].ID, Worker: "w", Kind: store.TaskCompleted}); err != nil {
		t.Fatal(err)
	}

	// A relay no step applies, forwarded as relays in its place (then
	// acked).
	if err := st.Forward(ctx, "fan-1", "o-1", []store.RelayOut{{ID: "fan-1/a", InstanceID: "a-1", RoutingKey: "k", Body: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	// Admin writes answered with success: a user task's assignment and update, a bulk
	// migration's creation (answered 202).
	inst = claim("r-1", "review")
	state, eff = step(review, inst, engine.Trigger{Kind: engine.TriggerStart, Variables: map[string]any{"reviewer": "ann"}})
	if err := st.WriteStep(ctx, store.StepWrites{InstanceID: "r-1", Owner: owner, Version: inst.Version, State: state, Effects: eff}); err != nil {
		t.Fatal(err)
	}
	bob := "bob"
	if err := st.AssignUserTask(ctx, env.Int(t, "SELECT id FROM tasks WHERE instance_id = 'r-1'"), &bob); err != nil {
		t.Fatal(err)
	}
	priority := 80
	if err := st.UpdateUserTask(ctx, env.Int(t, "SELECT id FROM tasks WHERE instance_id = 'r-1'"), engine.UserTaskChanges{Priority: &priority}); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateMigration(ctx, "mig-1", "review", 1, 1, nil); err != nil {
		t.Fatal(err)
	}

	got := env.Durability(t)
	for _, must := range []string{
		"definitions INSERT INSERT", "buffered_messages INSERT INSERT", "buffered_messages DELETE DELETE",
		"inbox_days INSERT INSERT", "instances UPDATE commit", "subscriptions INSERT INSERT", "timers INSERT INSERT",
		"timers DELETE DELETE", "instances INSERT claim", "claims INSERT claim", "claims DELETE release", "claims DELETE commit",
		"outbox INSERT INSERT", "outbox UPDATE UPDATE", "tasks INSERT INSERT", "tasks UPDATE lock", "tasks UPDATE outcome",
		"tasks UPDATE UPDATE", "migrations INSERT INSERT",
	} {
		if _, ok := got[must]; !ok {
			t.Errorf("no %q write was audited: the test does not cover it", must)
		}
	}
	for write, settings := range got {
		soft := slices.Contains([]string{"instances INSERT claim", "instances DELETE release", "claims INSERT claim", "claims UPDATE claim", "claims DELETE release",
			"outbox UPDATE UPDATE", "tasks UPDATE lock"}, write)
		want := "on"
		if soft {
			want = "off"
		}
		if !slices.Equal(settings, []string{want}) {
			t.Errorf("%s committed with synchronous_commit %v, want %s", write, settings, want)
		}
	}
}

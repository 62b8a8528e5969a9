package store_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/store"
)

// loopXML waits for message "ping" forever: each ping is a step that keeps
// the instance active, as most steps do.
const loopXML = `<?xml version="1.0" encoding="UTF-8"?>
<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="D" targetNamespace="t">
  <bpmn:process id="loop" isExecutable="true">
    <bpmn:startEvent id="Start"><bpmn:outgoing>F1</bpmn:outgoing></bpmn:startEvent>
    <bpmn:sequenceFlow id="F1" sourceRef="Start" targetRef="Catch" />
    <bpmn:intermediateCatchEvent id="Catch"><bpmn:incoming>F1</bpmn:incoming><bpmn:incoming>F2</bpmn:incoming><bpmn:outgoing>F2</bpmn:outgoing>
      <bpmn:messageEventDefinition messageRef="M" /></bpmn:intermediateCatchEvent>
    <bpmn:sequenceFlow id="F2" sourceRef="Catch" targetRef="Catch" />
  </bpmn:process>
  <bpmn:message id="M" name="ping"><bpmn:extensionElements><zeebe:subscription correlationKey="=key" /></bpmn:extensionElements></bpmn:message>
</bpmn:definitions>`

// A step's update of its instance row changes no indexed column, so it is
// HOT (the new row version on the same page, no index entry written): the
// claim lives in claims, not in instances' indexed columns. Checked from
// the server's own counters after starts, single steps and a group commit.
func TestAStepsUpdateOfItsInstanceIsHOT(t *testing.T) {
	t.Parallel()
	env, ctx, _ := open(t)
	// The steps run on a store of their own: closing it ends its backends,
	// which report their table counters as they exit.
	st, err := store.Open(ctx, env.Config.DatabaseURL, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Deploy(ctx, []byte(loopXML)); err != nil {
		t.Fatal(err)
	}
	proc, err := st.Process(ctx, "loop", 1)
	if err != nil {
		t.Fatal(err)
	}
	const owner = "r/lane/0"
	// step computes the step of inst (a start: the zero Instance, version 0).
	step := func(id string, inst store.Instance, trig engine.Trigger, inbox string) store.StepWrites {
		state, eff, err := engine.Step(proc, engine.Instance{ID: id, Version: inst.Version, State: inst.State}, trig, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return store.StepWrites{InstanceID: id, Owner: owner, Version: inst.Version, State: state, Effects: eff, InboxID: inbox}
	}
	ping := func(id string, n int) (engine.Trigger, string) {
		return engine.Trigger{Kind: engine.TriggerMessage, Message: "ping"}, id + "-ping-" + strconv.Itoa(n)
	}
	ids := []string{"a", "b", "c"}
	commits := 0
	for _, id := range ids {
		if _, err := st.Claim(ctx, store.ClaimRequest{InstanceID: id, Owner: owner, Timeout: time.Minute, StartKey: "loop"}); err != nil {
			t.Fatal(err)
		}
		w := step(id, store.Instance{}, engine.Trigger{Kind: engine.TriggerStart, Variables: map[string]any{"key": id}}, "")
		if err := st.WriteStep(ctx, w); err != nil {
			t.Fatal(err)
		}
		commits++
	}
	for round := range 3 {
		// One step on its own (Claim, WriteStep) ...
		trig, inbox := ping("a", round)
		inst, err := st.Claim(ctx, store.ClaimRequest{InstanceID: "a", Owner: owner, Timeout: time.Minute, InboxID: inbox})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.WriteStep(ctx, step("a", inst, trig, inbox)); err != nil {
			t.Fatal(err)
		}
		commits++
		// ... and two in a group (ClaimBatch, WriteGroup).
		_, inB := ping("b", round)
		_, inC := ping("c", round)
		claimed, err := st.ClaimBatch(ctx, store.ClaimBatchRequest{Timeout: time.Minute, Owners: []string{owner, owner},
			InstanceIDs: []string{"b", "c"}, InboxIDs: []string{inB, inC}})
		if err != nil {
			t.Fatal(err)
		}
		var group []store.StepWrites
		for i, c := range claimed {
			if !c.OK || c.Err != nil {
				t.Fatalf("batch claim of %s: %+v", ids[i+1], c)
			}
			group = append(group, step(c.Instance.ID, c.Instance, trig, []string{inB, inC}[i]))
		}
		for i, err := range st.WriteGroup(ctx, group) {
			if err != nil {
				t.Fatalf("group commit of %s: %v", group[i].InstanceID, err)
			}
		}
		commits += 2
	}
	st.Close()

	counters := func() (updates, hot int64) {
		var u, h int64
		if err := env.DB.QueryRow(ctx, `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables
			WHERE schemaname = $1 AND relname = 'instances'`, env.Schema).Scan(&u, &h); err != nil {
			t.Fatal(err)
		}
		return u, h
	}
	testkit.Eventually(t, 30*time.Second, "the steps' backends to report their instances updates", func() bool {
		u, _ := counters()
		return u >= int64(commits)
	})
	updates, hot := counters()
	if hot != updates {
		t.Errorf("%d of %d updates of instances were HOT over %d commits, want every one", hot, updates, commits)
	}
	if v := env.Int(t, "SELECT sum(version) FROM instances"); v != int64(commits) {
		t.Errorf("versions add up to %d, want the %d commits", v, commits)
	}
	env.AssertNoClaimsHeld(t)
	env.AssertNoOverlap(t, false)
}

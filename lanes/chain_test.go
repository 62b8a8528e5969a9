package lanes_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/lanes"
	"github.com/sutra-run/worker/metrics"
	"github.com/sutra-run/worker/store"
)

// chainPool is a one-lane pool on the real store (counting the
// transactions that commit steps of o-…) with instances h-0 and o-0
// started on testdata/chain.bpmn, which waits for messages m1 … m5 in
// turn, and o-1 on testdata/fanout.bpmn, which waits for three tasks in
// parallel. run holds the lane on h-0's m1 before its commit, queues resumes
// of o-0 behind it and lets it go: they are all waiting together.
type chainPool struct {
	env *testkit.Env
	st  *countingStore
	p   *lanes.Pool
	// gate holds h-0's step: it sends once held and receives to go on.
	gate chan struct{}
	// beforeCommit runs before the commit of each o-0 step.
	beforeCommit func(ctx context.Context, r *lanes.Resume)
}

func newChainPool(t *testing.T) *chainPool {
	t.Helper()
	env := testkit.New(t)
	env.Deploy(t, "testdata/chain.bpmn")
	env.Deploy(t, "testdata/fanout.bpmn")
	ctx := testkit.Ctx(t)
	inner, err := store.Open(ctx, env.Config.DatabaseURL, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(inner.Close)
	c := &chainPool{env: env, st: &countingStore{Store: inner, committed: map[string]bool{}}, gate: make(chan struct{})}
	hooks := &lanes.Hooks{BeforeCommit: func(ctx context.Context, _ int, r *lanes.Resume) {
		switch {
		case r.InboxID() == "m1-h-0":
			c.gate <- struct{}{}
			select {
			case <-c.gate:
			case <-ctx.Done():
			}
		case r.InstanceID() == "o-0" && c.beforeCommit != nil:
			c.beforeCommit(ctx, r)
		}
	}}
	c.p = lanes.New(lanes.Deps{Store: c.st, Metrics: metrics.New(prometheus.NewRegistry()), Logger: testkit.Logger(t), Hooks: hooks},
		lanes.Config{Replica: "r", Lanes: 1, ClaimTimeout: time.Minute})
	if err := c.p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.p.Stop(context.Background()) })
	for id, def := range map[string]string{"h-0": "chain", "o-0": "chain", "o-1": "fanout"} {
		if o := c.one(lanes.Start{InstanceID: id, MessageID: "start-" + id, Definition: def, Variables: map[string]any{"key": id}}); o.Kind != lanes.Applied {
			t.Fatalf("start %s: %+v", id, o)
		}
	}
	c.st.mu.Lock()
	c.st.groups, c.st.committed = 0, map[string]bool{}
	c.st.mu.Unlock()
	return c
}

// one runs cause and returns its outcome.
func (c *chainPool) one(cause lanes.Cause) lanes.Result {
	done := make(chan lanes.Result, 1)
	c.p.Dispatch(lanes.Resume{Cause: cause, Done: func(o lanes.Result) { done <- o }})
	return <-done
}

// message is relay id applying message name to o-0.
func message(name, id string) lanes.Message {
	return lanes.Message{InstanceID: "o-0", MessageID: id, Name: name}
}

// run queues causes behind the held lane, lets it go and returns their
// outcomes in order. An outcome Applied must come after its commit.
func (c *chainPool) run(t *testing.T, causes ...lanes.Cause) []lanes.Result {
	t.Helper()
	held := make(chan lanes.Result, 1)
	c.p.Dispatch(lanes.Resume{Cause: lanes.Message{InstanceID: "h-0", MessageID: "m1-h-0", Name: "m1"}, Done: func(o lanes.Result) { held <- o }})
	<-c.gate // the lane is held before h-0's commit
	c.p.TestSignals.Queued.Init()
	outs := make([]chan lanes.Result, len(causes))
	for i, cause := range causes {
		out := make(chan lanes.Result, 1)
		outs[i] = out
		id := (&lanes.Resume{Cause: cause}).InstanceID()
		c.p.Dispatch(lanes.Resume{Cause: cause, Done: func(o lanes.Result) {
			if o.Kind == lanes.Applied && !c.st.isCommitted(id) {
				t.Errorf("%+v answered Applied before its commit", cause)
			}
			out <- o
		}})
	}
	for range causes {
		c.p.TestSignals.Queued.WaitOrTimeout(t)
	}
	c.gate <- struct{}{}
	if o := <-held; o.Kind != lanes.Applied {
		t.Errorf("h-0's step: %+v", o)
	}
	got := make([]lanes.Result, len(causes))
	for i, out := range outs {
		got[i] = <-out
	}
	return got
}

// history is o-0's step history: "version message_id" per row, in order,
// and how many distinct commit times the rows of versions from … to have.
func (c *chainPool) history(t *testing.T, from, to int) (rows []string, commits int64) {
	t.Helper()
	r, err := c.env.DB.Query(testkit.Ctx(t), "SELECT version || ' ' || COALESCE(message_id, '') FROM step_history WHERE instance_id = 'o-0' ORDER BY version")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for r.Next() {
		var s string
		if err := r.Scan(&s); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, s)
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	return rows, c.env.Int(t, "SELECT count(DISTINCT committed_at) FROM step_history WHERE instance_id = 'o-0' AND version BETWEEN $1 AND $2", from, to)
}

func (c *chainPool) groups() int {
	c.st.mu.Lock()
	defer c.st.mu.Unlock()
	return c.st.groups
}

func wantKinds(t *testing.T, got []lanes.Result, want ...lanes.Kind) {
	t.Helper()
	for i, o := range got {
		if o.Kind != want[i] {
			t.Errorf("resume %d: %+v, want %s", i+1, o, want[i])
		}
	}
}

// Four resumes of one instance waiting together run as one chain: one
// claim, one transaction (one commit time), each with its own history row
// and counter, in order, and each answered Applied after the commit.
func TestResumesOfOneInstanceWaitingTogetherCommitInOneTransaction(t *testing.T) {
	t.Parallel()
	c := newChainPool(t)
	got := c.run(t, message("m1", "a"), message("m2", "b"), message("m3", "c"), message("m4", "d"))
	wantKinds(t, got, lanes.Applied, lanes.Applied, lanes.Applied, lanes.Applied)
	if g := c.groups(); g != 1 {
		t.Errorf("%d transactions committed o-0's four resumes, want 1", g)
	}
	rows, commits := c.history(t, 2, 5)
	if want := "1 start-o-0,2 a,3 b,4 c,5 d"; strings.Join(rows, ",") != want {
		t.Errorf("history %q, want %q", rows, want)
	}
	if commits != 1 {
		t.Errorf("versions 2 … 5 committed at %d times, want one", commits)
	}
	if v := c.env.Int(t, "SELECT version FROM instances WHERE id = 'o-0'"); v != 5 {
		t.Errorf("o-0 at version %d, want 5", v)
	}
	if n := c.env.Int(t, "SELECT count(*) FROM inbox WHERE message_id IN ('a', 'b', 'c', 'd')"); n != 4 {
		t.Errorf("%d inbox rows, want 4", n)
	}
	// The waits the chain left: m5's subscription only.
	if n := c.env.Int(t, "SELECT count(*) FROM subscriptions WHERE instance_id = 'o-0' AND element_id = 'M5'"); n != 1 {
		t.Errorf("o-0 has %d subscriptions at M5, want 1", n)
	}
	if n := c.env.Int(t, "SELECT count(*) FROM subscriptions WHERE instance_id = 'o-0'"); n != 1 {
		t.Errorf("o-0 has %d subscriptions, want 1 (M5's)", n)
	}
	if o := c.one(message("m5", "e")); o.Kind != lanes.Applied {
		t.Errorf("m5 after the chain: %+v", o)
	}
	if n := c.env.Int(t, "SELECT count(*) FROM instances WHERE id = 'o-0' AND status = 'completed' AND version = 6"); n != 1 {
		t.Error("o-0 did not complete at version 6 on the chain's state")
	}
	c.env.AssertNoClaimsHeld(t)
}

// The third resume of a chain cannot be computed (o-0 does not wait for
// its message): the first two commit together, it is rejected on its own
// path, and the fourth runs on its own after it.
func TestAChainWhoseThirdResumeFailsCommitsTheFirstTwoAndTheRestRunAlone(t *testing.T) {
	t.Parallel()
	c := newChainPool(t)
	got := c.run(t, message("m1", "a"), message("m2", "b"), message("m9", "x"), message("m3", "c"))
	wantKinds(t, got, lanes.Applied, lanes.Applied, lanes.Rejected, lanes.Applied)
	if got[2].Code != fault.NotWaiting {
		t.Errorf("the third resume got code %q, want %s", got[2].Code, fault.NotWaiting)
	}
	if g := c.groups(); g != 2 {
		t.Errorf("%d transactions committed o-0's resumes, want 2 (the first two, then the fourth)", g)
	}
	rows, commits := c.history(t, 2, 3)
	if want := "1 start-o-0,2 a,3 b,4 c"; strings.Join(rows, ",") != want {
		t.Errorf("history %q, want %q", rows, want)
	}
	if commits != 1 {
		t.Errorf("versions 2 and 3 committed at %d times, want one", commits)
	}
	if n := c.env.Int(t, "SELECT count(*) FROM inbox WHERE message_id = 'x'"); n != 0 {
		t.Error("the rejected resume's relay was recorded as applied")
	}
	c.env.AssertNoClaimsHeld(t)
}

// A chain whose commit the server kills acks none of it: each resume is
// answered Retry, nothing is written and the claim is released.
func TestAKilledChainCommitAcksNoneOfTheChain(t *testing.T) {
	t.Parallel()
	c := newChainPool(t)
	if _, err := c.env.DB.Exec(testkit.Ctx(t), `
		CREATE FUNCTION kill_commit() RETURNS trigger LANGUAGE plpgsql AS
		  $$ BEGIN RAISE EXCEPTION 'terminating connection due to administrator command' USING ERRCODE = '57P01'; END $$;
		CREATE TRIGGER kill_commit BEFORE UPDATE ON instances FOR EACH ROW WHEN (NEW.id = 'o-0') EXECUTE FUNCTION kill_commit()`); err != nil {
		t.Fatal(err)
	}
	got := c.run(t, message("m1", "a"), message("m2", "b"), message("m3", "c"))
	wantKinds(t, got, lanes.Retry, lanes.Retry, lanes.Retry)
	if v := c.env.Int(t, "SELECT version FROM instances WHERE id = 'o-0'"); v != 1 {
		t.Errorf("o-0 at version %d after a killed commit, want 1", v)
	}
	if n := c.env.Int(t, "SELECT count(*) FROM inbox WHERE message_id IN ('a', 'b', 'c')"); n != 0 {
		t.Errorf("%d inbox rows written by a killed commit", n)
	}
	c.env.AssertNoClaimsHeld(t)
}

// A copy of a relay already in the chain ends the chain: the chain
// commits, the copy is then answered Duplicate on its own, and the
// resume after it runs on its own too. The relay is applied once.
func TestADuplicateResumeInAChainIsAppliedOnce(t *testing.T) {
	t.Parallel()
	c := newChainPool(t)
	got := c.run(t, message("m1", "a"), message("m2", "b"), message("m1", "a"), message("m3", "c"))
	wantKinds(t, got, lanes.Applied, lanes.Applied, lanes.Duplicate, lanes.Applied)
	if n := c.env.Int(t, "SELECT count(*) FROM inbox WHERE message_id = 'a'"); n != 1 {
		t.Errorf("relay a has %d inbox rows, want 1", n)
	}
	rows, _ := c.history(t, 2, 4)
	if want := "1 start-o-0,2 a,3 b,4 c"; strings.Join(rows, ",") != want {
		t.Errorf("history %q, want %q", rows, want)
	}
	c.env.AssertNoClaimsHeld(t)
}

// The outcomes of three parallel tasks waiting together run as a chain:
// each closes its own task's row, the join fires on the state the two
// before it left, and the instance completes in one transaction.
func TestTaskOutcomesOfOneInstanceWaitingTogetherCommitAsOneChain(t *testing.T) {
	t.Parallel()
	c := newChainPool(t)
	r, err := c.env.DB.Query(testkit.Ctx(t), "SELECT token_id, element_id FROM tasks WHERE instance_id = 'o-1' ORDER BY element_id")
	if err != nil {
		t.Fatal(err)
	}
	var causes []lanes.Cause
	for r.Next() {
		var tok, el string
		if err := r.Scan(&tok, &el); err != nil {
			t.Fatal(err)
		}
		causes = append(causes, lanes.TaskOutcome{InstanceID: "o-1", MessageID: "done-" + el,
			Trigger: engine.Trigger{Kind: engine.TriggerTaskCompleted, TokenID: tok, Element: el}})
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if len(causes) != 3 {
		t.Fatalf("o-1 has %d tasks, want 3", len(causes))
	}
	got := c.run(t, causes...)
	wantKinds(t, got, lanes.Applied, lanes.Applied, lanes.Applied)
	if g := c.groups(); g != 1 {
		t.Errorf("%d transactions committed o-1's three outcomes, want 1", g)
	}
	if n := c.env.Int(t, "SELECT count(*) FROM instances WHERE id = 'o-1' AND status = 'completed' AND version = 4"); n != 1 {
		t.Error("o-1 did not complete at version 4")
	}
	if n := c.env.Int(t, "SELECT count(*) FROM tasks WHERE instance_id = 'o-1'"); n != 0 {
		t.Errorf("o-1 has %d task rows left", n)
	}
	if n := c.env.Int(t, "SELECT count(*) FROM step_history WHERE instance_id = 'o-1' AND cause = 'task'"); n != 3 {
		t.Errorf("o-1 has %d task rows of step history, want 3", n)
	}
	c.env.AssertNoClaimsHeld(t)
}

package store_test

import (
	"errors"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/store"
)

// batchEnv starts n orders (each waits for payment-received) and returns the
// store, the parsed definition and the ids.
func batchEnv(t *testing.T, ids ...string) (*testkit.Env, *store.Store, *bpmn.Process) {
	t.Helper()
	env, ctx, st := open(t)
	xml, err := os.ReadFile("../examples/order.bpmn")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Deploy(ctx, xml); err != nil {
		t.Fatal(err)
	}
	proc, err := st.Process(ctx, "order", 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		inst, err := st.Claim(ctx, store.ClaimRequest{InstanceID: id, Owner: "r/lane/0", Timeout: time.Minute, StartKey: "order"})
		if err != nil {
			t.Fatal(err)
		}
		state, eff, err := engine.Step(proc, engine.Instance{ID: id}, engine.Trigger{Kind: engine.TriggerStart,
			Variables: map[string]any{"orderId": id}}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := st.WriteStep(ctx, store.StepWrites{InstanceID: id, Owner: "r/lane/0", Version: inst.Version, State: state, Effects: eff}); err != nil {
			t.Fatal(err)
		}
	}
	return env, st, proc
}

// claimPaid claims the orders ids for owner in one batch claim and computes
// each one's payment step, for the relay pay-<id without "o-">.
func claimPaid(t *testing.T, st *store.Store, proc *bpmn.Process, owner string, ids []string) []store.StepWrites {
	t.Helper()
	inboxes := make([]string, len(ids))
	for i, id := range ids {
		inboxes[i] = "pay-" + id[2:]
	}
	claimed, err := st.ClaimBatch(testkit.Ctx(t), store.ClaimBatchRequest{Timeout: time.Minute, Owners: owners(owner, ids), InstanceIDs: ids, InboxIDs: inboxes})
	if err != nil {
		t.Fatal(err)
	}
	var cs []store.StepWrites
	for i, c := range claimed {
		state, eff, err := engine.Step(proc, engine.Instance{ID: ids[i], Version: c.Instance.Version, State: c.Instance.State},
			engine.Trigger{Kind: engine.TriggerMessage, Message: "payment-received"}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, store.StepWrites{InstanceID: ids[i], Owner: owner, Version: c.Instance.Version, State: state, Effects: eff, InboxID: inboxes[i]})
	}
	return cs
}

// A batch commit whose fence fails for one instance (its claim was stolen)
// commits the other steps and leaves that one out entirely: its state,
// version and inbox row are untouched, and its error says StepFenced.
func TestBatchCommitLeavesOutTheFencedInstanceAndCommitsTheOthers(t *testing.T) {
	t.Parallel()
	ids := []string{"o-a", "o-b", "o-c"}
	env, st, proc := batchEnv(t, ids...)
	ctx := testkit.Ctx(t)
	const owner = "r/lane/1"
	inboxes := []string{"pay-a", "pay-b", "pay-c"}
	claimed, err := st.ClaimBatch(ctx, store.ClaimBatchRequest{Timeout: time.Minute, Owners: owners(owner, ids), InstanceIDs: ids, InboxIDs: inboxes})
	if err != nil {
		t.Fatal(err)
	}
	var cs []store.StepWrites
	for i, c := range claimed {
		if !c.OK || c.Err != nil || c.Instance.ID != ids[i] || c.Instance.Version != 1 {
			t.Fatalf("claimed[%d] = %+v", i, c)
		}
		state, eff, err := engine.Step(proc, engine.Instance{ID: ids[i], Version: c.Instance.Version, State: c.Instance.State},
			engine.Trigger{Kind: engine.TriggerMessage, Message: "payment-received", CorrelationKey: ids[i]}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, store.StepWrites{InstanceID: ids[i], Owner: owner, Version: c.Instance.Version, State: state, Effects: eff, InboxID: inboxes[i]})
	}
	// o-b's claim goes stale and another lane takes it over.
	if _, err := env.DB.Exec(ctx, "UPDATE claims SET claimed_at = now() - interval '1 hour' WHERE instance_id = 'o-b'"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Claim(ctx, store.ClaimRequest{InstanceID: "o-b", Owner: "r/lane/9", Timeout: time.Minute}); err != nil {
		t.Fatal(err)
	}
	errs := st.WriteGroup(ctx, cs)
	if errs[0] != nil || errs[2] != nil || fault.Code(errs[1]) != fault.StepFenced {
		t.Fatalf("errs = %v, want [nil fenced nil]", errs)
	}
	for _, id := range ids {
		want := int64(2)
		if id == "o-b" {
			want = 1
		}
		if v := env.Int(t, "SELECT version FROM instances WHERE id = $1", id); v != want {
			t.Errorf("%s at version %d, want %d", id, v, want)
		}
	}
	if n := env.Int(t, "SELECT count(*) FROM inbox WHERE message_id = ANY($1)", inboxes); n != 2 {
		t.Errorf("%d inbox rows, want 2 (the fenced step wrote nothing)", n)
	}
	if n := env.Int(t, "SELECT count(*) FROM claims WHERE instance_id <> 'o-b'"); n != 0 {
		t.Errorf("%d claims still held after the commit, want 0", n)
	}
	env.AssertNoOverlap(t, true)
}

// The batch claim refuses, like Claim, a row held by another owner and a
// relay already applied, and takes the others, each for the owner that asked
// for it: a row one lane holds is re-entered by that lane in the same
// statement that refuses it to another.
func TestBatchClaimTakesOnlyFreeRowsOfUnappliedRelaysEachForItsOwnOwner(t *testing.T) {
	t.Parallel()
	ids := []string{"o-a", "o-b", "o-c", "o-d", "o-e"}
	env, st, _ := batchEnv(t, ids...)
	ctx := testkit.Ctx(t)
	if _, err := env.DB.Exec(ctx, "INSERT INTO claims (instance_id, owner) VALUES ('o-b', 'r/lane/9'), ('o-d', 'r/lane/9')"); err != nil {
		t.Fatal(err)
	}
	if _, err := env.DB.Exec(ctx, "INSERT INTO inbox (message_id, instance_id) VALUES ('pay-c', 'o-c')"); err != nil {
		t.Fatal(err)
	}
	claimed, err := st.ClaimBatch(ctx, store.ClaimBatchRequest{Timeout: time.Minute,
		InstanceIDs: append(ids, "o-missing"), Owners: []string{"r/lane/1", "r/lane/1", "r/lane/1", "r/lane/9", "r/lane/2", "r/lane/1"},
		InboxIDs: []string{"pay-a", "pay-b", "pay-c", "pay-d", "pay-e", "pay-f"}})
	if err != nil {
		t.Fatal(err)
	}
	var took []string
	for _, c := range claimed {
		if c.OK {
			took = append(took, c.Instance.ID)
		}
	}
	if !slices.Equal(took, []string{"o-a", "o-d", "o-e"}) {
		t.Fatalf("claimed %v, want o-a, o-d (re-entered by its holder) and o-e", took)
	}
	for id, want := range map[string]string{"o-a": "r/lane/1", "o-b": "r/lane/9", "o-c": "", "o-d": "r/lane/9", "o-e": "r/lane/2"} {
		var owner *string
		if err := env.DB.QueryRow(ctx, "SELECT (SELECT owner FROM claims WHERE instance_id = $1)", id).Scan(&owner); err != nil {
			t.Fatal(err)
		}
		if got := ""; owner != nil && *owner != want || owner == nil && want != got {
			t.Errorf("%s is held by %v, want %q", id, owner, want)
		}
	}
	if _, err := st.Claim(ctx, store.ClaimRequest{InstanceID: "o-c", Owner: "r/lane/1", Timeout: time.Minute, InboxID: "pay-c"}); !errors.Is(err, store.ErrDuplicate) {
		t.Fatalf("single claim of the applied relay = %v, want ErrDuplicate", err)
	}
}

// A batch commit is acked like a step commit, so it waits for the WAL flush;
// its batch claim is soft state like a single claim and does not.
func TestABatchCommitWaitsForTheWALFlushAndItsBatchClaimDoesNot(t *testing.T) {
	t.Parallel()
	ids := []string{"o-a", "o-b"}
	env, st, proc := batchEnv(t, ids...)
	env.AuditDurability(t, "instances", "claims", "inbox_days", "subscriptions")
	ctx := testkit.Ctx(t)
	cs := claimPaid(t, st, proc, "r/lane/1", ids)
	for i, err := range st.WriteGroup(ctx, cs) {
		if err != nil {
			t.Fatalf("commit of %s: %v", ids[i], err)
		}
	}
	got := env.Durability(t)
	want := map[string][]string{
		"claims INSERT claim": {"off"}, "instances UPDATE commit": {"on"}, "claims DELETE commit": {"on"},
		"inbox_days INSERT INSERT": {"on"}, "subscriptions INSERT INSERT": {"on"},
	}
	for write, settings := range want {
		if !slices.Equal(got[write], settings) {
			t.Errorf("%s committed with synchronous_commit %v, want %v", write, got[write], settings)
		}
	}
}

// When one step's writes fail (a copy of its relay committed after the batch
// claim read the inbox), the batch writes nothing, every step it let through
// the fence is ErrNotWritten with its claim still held, and each then
// commits on its own: the copy's step is a duplicate, the other commits.
func TestAStepWhoseWritesFailLeavesTheBatchUncommittedAndEachCommitsOnItsOwn(t *testing.T) {
	t.Parallel()
	ids := []string{"o-a", "o-b"}
	env, st, proc := batchEnv(t, ids...)
	ctx := testkit.Ctx(t)
	const owner = "r/lane/1"
	cs := claimPaid(t, st, proc, owner, ids)
	if _, err := env.DB.Exec(ctx, "INSERT INTO inbox (message_id, instance_id) VALUES ('pay-b', 'o-b')"); err != nil {
		t.Fatal(err)
	}
	errs := st.WriteGroup(ctx, cs)
	for i, err := range errs {
		if !errors.Is(err, store.ErrNotWritten) {
			t.Fatalf("errs[%d] = %v, want ErrNotWritten", i, err)
		}
	}
	if n := env.Int(t, "SELECT count(*) FROM claims WHERE owner = $1", owner); n != 2 {
		t.Fatalf("%d claims held after the failed batch, want both", n)
	}
	if err := st.WriteStep(ctx, cs[0]); err != nil {
		t.Fatalf("o-a on its own: %v", err)
	}
	if err := st.WriteStep(ctx, cs[1]); !errors.Is(err, store.ErrDuplicate) {
		t.Fatalf("o-b on its own: %v, want ErrDuplicate", err)
	}
	if v := env.Int(t, "SELECT version FROM instances WHERE id = 'o-a'"); v != 2 {
		t.Errorf("o-a at version %d, want 2", v)
	}
}

// A batch that lost a claim is committed again the slow way (the fence, then
// the writes of the steps that passed); when a step's writes fail there too,
// the fenced step stays fenced and only the steps that passed the fence are
// left uncommitted with their claims held.
func TestABatchThatLostAClaimAndWhoseWritesFailLeavesOnlyTheFencedStepFenced(t *testing.T) {
	t.Parallel()
	ids := []string{"o-a", "o-b", "o-c"}
	env, st, proc := batchEnv(t, ids...)
	ctx := testkit.Ctx(t)
	const owner = "r/lane/1"
	cs := claimPaid(t, st, proc, owner, ids)
	// o-a's claim is taken over; a copy of o-c's relay commits meanwhile.
	if _, err := env.DB.Exec(ctx, "UPDATE claims SET owner = 'r/lane/9' WHERE instance_id = 'o-a'"); err != nil {
		t.Fatal(err)
	}
	if _, err := env.DB.Exec(ctx, "INSERT INTO inbox (message_id, instance_id) VALUES ('pay-c', 'o-c')"); err != nil {
		t.Fatal(err)
	}
	errs := st.WriteGroup(ctx, cs)
	if fault.Code(errs[0]) != fault.StepFenced || !errors.Is(errs[1], store.ErrNotWritten) || !errors.Is(errs[2], store.ErrNotWritten) {
		t.Fatalf("errs = %v, want [fenced, not committed, not committed]", errs)
	}
	if n := env.Int(t, "SELECT count(*) FROM claims WHERE owner = $1", owner); n != 2 {
		t.Fatalf("%d claims held after the failed batch, want o-b's and o-c's", n)
	}
	if n := env.Int(t, "SELECT count(*) FROM instances WHERE version <> 1"); n != 0 {
		t.Errorf("%d instances moved, want none", n)
	}
}

// owners is owner once for each of ids (a batch claim of one lane).
func owners(owner string, ids []string) []string {
	out := make([]string, len(ids))
	for i := range out {
		out[i] = owner
	}
	return out
}

// A batch commit writes the waits of all its steps in one statement per
// table and kind, over arrays that name each row's instance: every step's
// closes, renames and opens land on its own instance only, even where two
// steps use the same token and element, and a buffered message that one
// step's new subscription matches leaves the whole batch uncommitted.
func TestABatchCommitWritesEachStepsWaitsToItsOwnInstanceOnly(t *testing.T) {
	t.Parallel()
	ids := []string{"o-a", "o-b", "o-c"}
	env, st, _ := batchEnv(t, ids...)
	ctx := testkit.Ctx(t)
	const owner = "r/lane/1"
	claimed, err := st.ClaimBatch(ctx, store.ClaimBatchRequest{Timeout: time.Minute, Owners: owners(owner, ids), InstanceIDs: ids,
		InboxIDs: []string{"in-a", "in-b", "in-c"}})
	if err != nil {
		t.Fatal(err)
	}
	// Each order waits on one subscription; all three use the same token
	// and element.
	var tok, el string
	if err := env.DB.QueryRow(ctx, "SELECT token_id, element_id FROM subscriptions WHERE instance_id = 'o-a'").Scan(&tok, &el); err != nil {
		t.Fatal(err)
	}
	if n := env.Int(t, "SELECT count(*) FROM subscriptions WHERE token_id = $1 AND element_id = $2", tok, el); n != 3 {
		t.Fatalf("%d orders wait on token %s at %s, want 3", n, tok, el)
	}
	due := time.Now().Add(time.Hour)
	effects := map[string]engine.Effects{
		// o-a closes its wait and opens a subscription and a timer.
		"o-a": {CloseWaits: []engine.WaitRef{{TokenID: tok, Element: el}},
			Subscriptions: []engine.Subscription{{TokenID: "tx", Element: "E1", Message: "m", CorrelationKey: "a"}},
			Timers:        []engine.Timer{{TokenID: "tx", Element: "T1", DueAt: due}}},
		// o-b keeps its wait and opens the same token and element as o-a.
		"o-b": {Subscriptions: []engine.Subscription{{TokenID: "tx", Element: "E1", Message: "m", CorrelationKey: "b"}}},
		// o-c moves its wait to another element.
		"o-c": {RenameWaits: []engine.WaitRename{{TokenID: tok, From: el, To: "E9"}}},
	}
	var cs []store.StepWrites
	for i, c := range claimed {
		if !c.OK || c.Err != nil {
			t.Fatalf("claimed[%d] = %+v", i, c)
		}
		cs = append(cs, store.StepWrites{InstanceID: ids[i], Owner: owner, Version: c.Instance.Version, State: c.Instance.State,
			Effects: effects[ids[i]], InboxID: "in-" + ids[i][2:]})
	}

	// A message buffered for o-b's new subscription: the look finds it.
	if _, err := env.DB.Exec(ctx, `INSERT INTO buffered_messages (message_id, message_name, correlation_key, expires_at)
		VALUES ('m-b', 'm', 'b', now() + interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	// The step that matched is left out with its match; the others are
	// written as a group without it.
	for i, err := range st.WriteGroup(ctx, cs) {
		var m *store.BufferedMatch
		switch {
		case i == 1 && (!errors.As(err, &m) || m.MessageID != "m-b" || m.Message != "m" || m.CorrelationKey != "b"):
			t.Fatalf("with a match buffered: o-b = %v, want the match of m-b", err)
		case i != 1 && err != nil:
			t.Fatalf("with a match buffered: errs[%d] = %v, want written", i, err)
		}
	}
	if _, err := env.DB.Exec(ctx, "DELETE FROM buffered_messages"); err != nil {
		t.Fatal(err)
	}
	if err := st.WriteStep(ctx, cs[1]); err != nil {
		t.Fatalf("o-b on its own: %v", err)
	}
	rows := func(sql string) []string {
		t.Helper()
		r, err := env.DB.Query(ctx, sql)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for r.Next() {
			var s string
			if err := r.Scan(&s); err != nil {
				t.Fatal(err)
			}
			got = append(got, s)
		}
		if err := r.Err(); err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		return got
	}
	subs := rows("SELECT concat_ws('/', instance_id, token_id, element_id, message_name, correlation_key) FROM subscriptions")
	want := []string{"o-a/tx/E1/m/a", "o-b/tx/E1/m/b", "o-b/" + tok + "/" + el + "/payment-received/o-b",
		"o-c/" + tok + "/E9/payment-received/o-c"}
	slices.Sort(want)
	if !slices.Equal(subs, want) {
		t.Errorf("subscriptions = %v, want %v", subs, want)
	}
	if timers := rows("SELECT concat_ws('/', instance_id, token_id, element_id) FROM timers"); !slices.Equal(timers, []string{"o-a/tx/T1"}) {
		t.Errorf("timers = %v, want o-a's only", timers)
	}
	if inbox := rows("SELECT concat_ws('/', message_id, instance_id) FROM inbox"); !slices.Equal(inbox, []string{"in-a/o-a", "in-b/o-b", "in-c/o-c"}) {
		t.Errorf("inbox = %v", inbox)
	}
}

// When a batch commit meets a lost claim it commits the others in a second
// transaction: that commit tells the outbox publisher of their rows, once.
func TestAFencedBatchNotifiesThePublisherOfTheRowsItCommitted(t *testing.T) {
	t.Parallel()
	ids := []string{"o-a", "o-b"}
	env, st, proc := batchEnv(t, ids...)
	var n atomic.Int32
	st.NotifyOutbox(func() { n.Add(1) })
	ctx := testkit.Ctx(t)
	cs := claimPaid(t, st, proc, "r/lane/1", ids)
	for i := range cs {
		cs[i].Effects.Publish = append(cs[i].Effects.Publish, engine.OutboxMessage{ID: "msg-" + ids[i], Element: "e", Message: "m", Variables: map[string]any{}})
	}
	// o-b's claim is taken over: the batch commits o-a alone.
	if _, err := env.DB.Exec(ctx, "UPDATE claims SET owner = 'r/lane/9' WHERE instance_id = 'o-b'"); err != nil {
		t.Fatal(err)
	}
	if errs := st.WriteGroup(ctx, cs); errs[0] != nil || fault.Code(errs[1]) != fault.StepFenced {
		t.Fatalf("errs = %v, want [nil fenced]", errs)
	}
	if n.Load() != 1 {
		t.Fatalf("%d notifications, want 1", n.Load())
	}
	if got := env.Int(t, "SELECT count(*) FROM outbox WHERE id = 'msg-o-a' AND locked_by IS NULL"); got != 1 {
		t.Fatal("o-a's message not written unleased")
	}
}

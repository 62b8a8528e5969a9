package store_test

import (
	"slices"
	"testing"
	"time"

	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/store"
)

func ids(rows []store.OutboxRow) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

// An instance's rows are leased in commit order and never past an earlier
// row of the instance that another publisher holds or that backs off.
func TestOutboxLeasesKeepEachInstancesCommitOrderAcrossPublishers(t *testing.T) {
	t.Parallel()
	env, ctx, st := open(t)
	// Commit order: a1 b1 a2 a3 b2.
	for _, r := range [][2]string{{"a", "a1"}, {"b", "b1"}, {"a", "a2"}, {"a", "a3"}, {"b", "b2"}} {
		if _, err := env.DB.Exec(ctx, "INSERT INTO outbox (id, instance_id, message_name) VALUES ($2, $1, 'm')", r[0], r[1]); err != nil {
			t.Fatal(err)
		}
	}
	lease := func(owner string, limit int, want ...string) []store.OutboxRow {
		t.Helper()
		rows, err := st.LeaseOutbox(ctx, owner, limit, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(rows); !slices.Equal(got, want) {
			t.Fatalf("%s leased %v, want %v", owner, got, want)
		}
		return rows
	}
	// The limit cuts instance a after a2; b1 comes with it.
	rows := lease("r1", 3, "a1", "b1", "a2")
	if r := rows[0]; r.InstanceID != "a" || r.Message != "m" || r.Target != store.TargetOutbox || string(r.Variables) != "{}" || time.Since(r.Written) < 0 || time.Since(r.Written) > time.Minute {
		t.Fatalf("row %+v", r)
	}
	// a3 waits behind a2, which r1 holds; b2 comes after b1, which r1 holds.
	lease("r2", 10)
	// r1 publishes a1 and b1; a2 fails and backs off: a3 still waits, b2 goes.
	if err := st.SettleOutbox(ctx, "r1", store.OutboxSettlement{
		Published: []string{"a1", "b1"}, Deferred: []store.OutboxDeferral{{ID: "a2", Delay: time.Hour}},
	}); err != nil {
		t.Fatal(err)
	}
	lease("r2", 10, "b2")
	// Writes of a lease that is not the writer's are ignored.
	if err := st.SettleOutbox(ctx, "r1", store.OutboxSettlement{Published: []string{"b2"}}); err != nil {
		t.Fatal(err)
	}
	if n := env.Int(t, "SELECT count(*) FROM outbox WHERE published_at IS NULL"); n != 3 {
		t.Fatalf("%d unpublished, want a2 a3 b2", n)
	}
	if n := env.Int(t, "SELECT attempts FROM outbox WHERE id = 'a2'"); n != 1 {
		t.Fatalf("a2 attempts = %d, want 1", n)
	}
	// r2 hands b2 back; once a2's backoff is over, a2 and a3 go in order.
	if err := st.SettleOutbox(ctx, "r2", store.OutboxSettlement{Released: []string{"b2"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.DB.Exec(ctx, "UPDATE outbox SET locked_until = now() - interval '1 second' WHERE id = 'a2'"); err != nil {
		t.Fatal(err)
	}
	rows = lease("r2", 10, "a2", "a3", "b2")
	if rows[0].Attempts != 1 {
		t.Fatalf("a2 leased with %d attempts", rows[0].Attempts)
	}
	if c, err := st.Census(ctx); err != nil || c.OutboxBacklog != 3 {
		t.Fatalf("backlog = %d, %v", c.OutboxBacklog, err)
	}
	if err := st.SettleOutbox(ctx, "r2", store.OutboxSettlement{Published: []string{"a2", "a3", "b2"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.DB.Exec(ctx, "UPDATE outbox SET published_at = now() - interval '2 hours' WHERE id IN ('a1', 'a2', 'b1')"); err != nil {
		t.Fatal(err)
	}
	if n, err := st.TrimOutbox(ctx, time.Hour, 2); err != nil || n != 2 {
		t.Fatalf("trimmed %d, %v; want 2 (the limit)", n, err)
	}
	if n, err := st.TrimOutbox(ctx, time.Hour, 2); err != nil || n != 1 {
		t.Fatalf("trimmed %d, %v; want the last old one", n, err)
	}
	if c, err := st.Census(ctx); err != nil || c.OutboxBacklog != 0 {
		t.Fatalf("backlog = %d, %v", c.OutboxBacklog, err)
	}
}

// A publisher that died holding leases leaves its rows to the others once
// the leases lapse, and only then.
func TestOutboxRowsOfADeadPublisherAreTakenWhenItsLeaseLapses(t *testing.T) {
	t.Parallel()
	env, ctx, st := open(t)
	if _, err := env.DB.Exec(ctx, "INSERT INTO outbox (id, instance_id, message_name) VALUES ('a1', 'a', 'm')"); err != nil {
		t.Fatal(err)
	}
	// Leased for 2 s: the check that nobody else may take it runs well
	// inside that even on a busy machine.
	if rows, err := st.LeaseOutbox(ctx, "dead", 10, 2*time.Second); err != nil || len(rows) != 1 {
		t.Fatalf("leased %v, %v", rows, err)
	}
	if rows, err := st.LeaseOutbox(ctx, "live", 10, time.Minute); err != nil || len(rows) != 0 {
		t.Fatalf("a held row leased again: %v, %v", rows, err)
	}
	testkit.Eventually(t, 10*time.Second, "the dead publisher's row taken over", func() bool {
		rows, err := st.LeaseOutbox(ctx, "live", 10, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return len(rows) == 1
	})
}

// One owner may lease an instance's rows behind rows it holds already (its
// batches in flight chain them), each naming the latest of those (After);
// other owners still may not.
func TestOutboxLeasesOfOneOwnerTakeRowsBehindItsOwnAndNameTheRowTheyFollow(t *testing.T) {
	t.Parallel()
	env, ctx, st := open(t)
	// Commit order: a1 a2 b1 a3.
	seq := map[string]int64{}
	for _, r := range [][2]string{{"a", "a1"}, {"a", "a2"}, {"b", "b1"}, {"a", "a3"}} {
		var n int64
		if err := env.DB.QueryRow(ctx, "INSERT INTO outbox (id, instance_id, message_name) VALUES ($2, $1, 'm') RETURNING seq",
			r[0], r[1]).Scan(&n); err != nil {
			t.Fatal(err)
		}
		seq[r[1]] = n
	}
	lease := func(owner string, limit int, lease time.Duration) map[string]int64 {
		t.Helper()
		rows, err := st.LeaseOutbox(ctx, owner, limit, lease)
		if err != nil {
			t.Fatal(err)
		}
		after := map[string]int64{}
		for _, r := range rows {
			after[r.ID] = r.After
		}
		return after
	}
	if got := lease("r1", 1, time.Minute); len(got) != 1 || got["a1"] != 0 {
		t.Fatalf("first lease: %v, want a1 after nothing", got)
	}
	if got := lease("r2", 10, time.Minute); len(got) != 1 || got["b1"] != 0 {
		t.Fatalf("another owner leased %v, want only b1: a2 and a3 wait behind r1's a1", got)
	}
	// a3 follows a2 in the same lease: only a2's After counts.
	if got := lease("r1", 10, 100*time.Millisecond); len(got) != 2 || got["a2"] != seq["a1"] {
		t.Fatalf("r1 leased %v, want a2 and a3, a2 after its a1 (seq %d)", got, seq["a1"])
	}
	// Once r1's leases of a2 and a3 lapse, r1 takes them again, now behind
	// nothing of its own but a1; after a1 is published, behind nothing.
	if err := st.SettleOutbox(ctx, "r1", store.OutboxSettlement{Published: []string{"a1"}}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "r1's short leases lapse", func() bool {
		got := lease("r1", 10, time.Minute)
		if len(got) > 0 && (len(got) != 2 || got["a2"] != 0) {
			t.Fatalf("r1 leased %v again, want a2 after nothing, and a3", got)
		}
		return len(got) == 2
	})
}

// handoff is an OutboxHandoff that records what commits wrote.
type handoff struct {
	owner   string
	written []store.OutboxWritten
}

func (h *handoff) Lessee() (string, time.Duration) { return h.owner, time.Minute }
func (h *handoff) Written(w store.OutboxWritten)   { h.written = append(h.written, w) }
func (h *handoff) last(t *testing.T) store.OutboxWritten {
	t.Helper()
	if len(h.written) == 0 {
		t.Fatal("nothing handed over")
	}
	return h.written[len(h.written)-1]
}

// A commit leases the rows it writes to the lessee when every earlier
// unpublished row of their instance is the lessee's, naming the latest of
// those, and hands them over; rows behind another publisher's are left to
// the lease, and so are rows written with no lessee.
func TestCommitsLeaseTheirOutboxRowsToTheLesseeOnlyWhereNothingOfAnotherIsBefore(t *testing.T) {
	t.Parallel()
	env, ctx, st := open(t)
	h := &handoff{owner: "r1"}
	st.HandOutboxTo(h)
	forward := func(inbox string, rs ...string) store.OutboxWritten {
		t.Helper()
		var out []store.RelayOut
		for _, r := range rs {
			out = append(out, store.RelayOut{ID: r, InstanceID: r[:1], RoutingKey: "k", Body: []byte("{}")})
		}
		n := len(h.written)
		if err := st.Forward(ctx, inbox, "src", out); err != nil {
			t.Fatal(err)
		}
		if len(h.written) != n+1 {
			t.Fatalf("%d handoffs for one commit", len(h.written)-n)
		}
		return h.last(t)
	}
	seq := func(id string) int64 { return int64(env.Int(t, "SELECT seq FROM outbox WHERE id = '"+id+"'")) }
	holder := func(id string) string {
		var by *string
		if err := env.DB.QueryRow(ctx, "SELECT locked_by FROM outbox WHERE id = $1", id).Scan(&by); err != nil {
			t.Fatal(err)
		}
		if by == nil {
			return ""
		}
		return *by
	}

	// a1 and a2 in one commit: both leased, a2 after a1; b1 after nothing.
	start := time.Now()
	w := forward("in-1", "a1", "a2", "b1")
	if got := ids(w.Leased); !slices.Equal(got, []string{"a1", "a2", "b1"}) || w.Unleased != 0 {
		t.Fatalf("leased %v, %d unleased; want a1 a2 b1, none", got, w.Unleased)
	}
	if l := w.Leased; l[0].After != 0 || l[1].After != seq("a1") || l[2].After != 0 || w.At.Before(start) || l[0].Written != w.At {
		t.Fatalf("handed %+v", w)
	}
	// a3 after the lessee's a2, in a later commit.
	if w := forward("in-2", "a3"); len(w.Leased) != 1 || w.Leased[0].After != seq("a2") {
		t.Fatalf("a3 handed %+v, want leased after a2", w)
	}
	// Another publisher holds c1, a relay like c2: c2 waits for the lease.
	if _, err := env.DB.Exec(ctx, "INSERT INTO outbox (id, instance_id, message_name, target) VALUES ('c1', 'c', 'm', 'relay')"); err != nil {
		t.Fatal(err)
	}
	if rows, err := st.LeaseOutbox(ctx, "r2", 10, time.Minute); err != nil || !slices.Contains(ids(rows), "c1") {
		t.Fatalf("r2 leased %v, %v", ids(rows), err)
	}
	if w := forward("in-3", "c2"); len(w.Leased) != 0 || w.Unleased != 1 || holder("c2") != "" {
		t.Fatalf("c2 handed %+v, held by %q; want left to the lease", w, holder("c2"))
	}
	// No lessee (a publisher that stopped): left to the lease.
	h.owner = ""
	if w := forward("in-4", "d1"); len(w.Leased) != 0 || w.Unleased != 1 || holder("d1") != "" {
		t.Fatalf("d1 handed %+v, held by %q; want left to the lease", w, holder("d1"))
	}
	for _, id := range []string{"a1", "a2", "a3", "b1"} {
		if holder(id) != "r1" {
			t.Fatalf("%s held by %q, want r1", id, holder(id))
		}
	}
}

// An instance's rows are ordered within their target class only: its
// relays (task outcomes) are leased, and leased at commit, past its BPMN
// messages held by another publisher or backing off, and the reverse.
func TestOutboxOrderHoldsWithinATargetClassOnly(t *testing.T) {
	t.Parallel()
	env, ctx, st := open(t)
	// Commit order: a1 (a message), ar1 (a relay), a2 (a message).
	for _, r := range [][2]string{{"a1", "outbox"}, {"ar1", "relay"}, {"a2", "outbox"}} {
		if _, err := env.DB.Exec(ctx, "INSERT INTO outbox (id, instance_id, message_name, target) VALUES ($1, 'a', 'm', $2)", r[0], r[1]); err != nil {
			t.Fatal(err)
		}
	}
	lease := func(owner string, limit int, want ...string) []store.OutboxRow {
		t.Helper()
		rows, err := st.LeaseOutbox(ctx, owner, limit, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(rows); !slices.Equal(got, want) {
			t.Fatalf("%s leased %v, want %v", owner, got, want)
		}
		return rows
	}
	lease("r1", 1, "a1")
	// ar1 is not behind r1's a1; a2 is.
	if rows := lease("r2", 10, "ar1"); rows[0].After != 0 {
		t.Fatalf("ar1 after %d, want after nothing", rows[0].After)
	}
	if err := st.SettleOutbox(ctx, "r2", store.OutboxSettlement{Published: []string{"ar1"}}); err != nil {
		t.Fatal(err)
	}
	lease("r1", 10, "a2")
	// A relay committed while r1 holds a1 and a2 is leased to r1 at
	// commit, after nothing of its class.
	h := &handoff{owner: "r1"}
	st.HandOutboxTo(h)
	if err := st.Forward(ctx, "in-1", "src", []store.RelayOut{{ID: "ar2", InstanceID: "a", RoutingKey: "k", Body: []byte("{}")}}); err != nil {
		t.Fatal(err)
	}
	if w := h.last(t); len(w.Leased) != 1 || w.Leased[0].ID != "ar2" || w.Leased[0].After != 0 || w.Unleased != 0 {
		t.Fatalf("ar2 handed %+v, want leased after nothing", w)
	}
	// a1 backs off: a2 waits behind it, the relays do not.
	if err := st.SettleOutbox(ctx, "r1", store.OutboxSettlement{Published: []string{"ar2"},
		Deferred: []store.OutboxDeferral{{ID: "a1", Delay: time.Hour}}, Released: []string{"a2"}}); err != nil {
		t.Fatal(err)
	}
	lease("r2", 10)
	h.owner = "r2"
	if err := st.Forward(ctx, "in-2", "src", []store.RelayOut{{ID: "ar3", InstanceID: "a", RoutingKey: "k", Body: []byte("{}")}}); err != nil {
		t.Fatal(err)
	}
	if w := h.last(t); len(w.Leased) != 1 || w.Leased[0].ID != "ar3" || w.Unleased != 0 {
		t.Fatalf("ar3 handed %+v, want leased", w)
	}
}

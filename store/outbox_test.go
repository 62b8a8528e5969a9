package store_test

import (
	"errors"
	"slices"
	"sync/atomic"
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

// lapse ends owner's leases now: the database's clock, which leases are
// on, passes them.
func lapse(t *testing.T, env *testkit.Env, owner string) {
	t.Helper()
	if _, err := env.DB.Exec(testkit.Ctx(t), "UPDATE outbox SET locked_until = now() - interval '1 millisecond' WHERE locked_by = $1",
		owner); err != nil {
		t.Fatal(err)
	}
}

// A publisher that died holding leases leaves its rows to the others once
// the leases lapse, and only then.
func TestOutboxRowsOfADeadPublisherAreTakenWhenItsLeaseLapses(t *testing.T) {
	t.Parallel()
	env, ctx, st := open(t)
	if _, err := env.DB.Exec(ctx, "INSERT INTO outbox (id, instance_id, message_name) VALUES ('a1', 'a', 'm'), ('a2', 'a', 'm')"); err != nil {
		t.Fatal(err)
	}
	if rows, err := st.LeaseOutbox(ctx, "dead", 1, time.Minute); err != nil || !slices.Equal(ids(rows), []string{"a1"}) {
		t.Fatalf("leased %v, %v", ids(rows), err)
	}
	if rows, err := st.LeaseOutbox(ctx, "live", 10, time.Minute); err != nil || len(rows) != 0 {
		t.Fatalf("leased %v, %v while the dead publisher's lease lives; want nothing", ids(rows), err)
	}
	lapse(t, env, "dead")
	if rows, err := st.LeaseOutbox(ctx, "live", 10, time.Minute); err != nil || !slices.Equal(ids(rows), []string{"a1", "a2"}) {
		t.Fatalf("leased %v, %v once the lease lapsed; want a1 a2", ids(rows), err)
	}
	// The dead publisher's settlement, late, is fenced off.
	if err := st.SettleOutbox(ctx, "dead", store.OutboxSettlement{Published: []string{"a1"}, Released: []string{"a2"}}); err != nil {
		t.Fatal(err)
	}
	if n := env.Int(t, "SELECT count(*) FROM outbox WHERE locked_by = 'live' AND published_at IS NULL"); n != 2 {
		t.Fatalf("%d rows left to live, want both: a lapsed holder's settlement must change nothing", n)
	}
}

// An instance's rows of a class are in at most one live lease, whoever
// holds it: a publisher does not lease rows behind rows it holds itself
// (its own batch in flight) until those are settled.
func TestAnInstancesRowsAreInAtMostOneLiveLeaseEvenOfTheirHolder(t *testing.T) {
	t.Parallel()
	env, ctx, st := open(t)
	// Commit order: a1 a2 b1 a3.
	for _, r := range [][2]string{{"a", "a1"}, {"a", "a2"}, {"b", "b1"}, {"a", "a3"}} {
		if _, err := env.DB.Exec(ctx, "INSERT INTO outbox (id, instance_id, message_name) VALUES ($2, $1, 'm')", r[0], r[1]); err != nil {
			t.Fatal(err)
		}
	}
	lease := func(owner string, limit int, want ...string) {
		t.Helper()
		rows, err := st.LeaseOutbox(ctx, owner, limit, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(rows); !slices.Equal(got, want) {
			t.Fatalf("%s leased %v, want %v", owner, got, want)
		}
	}
	lease("r1", 1, "a1")
	lease("r1", 10, "b1") // a2 and a3 wait behind r1's own a1
	lease("r2", 10)
	// a1 handed back unsent: a's rows go in one lease again, a1 first.
	if err := st.SettleOutbox(ctx, "r1", store.OutboxSettlement{Released: []string{"a1"}}); err != nil {
		t.Fatal(err)
	}
	lease("r2", 10, "a1", "a2", "a3")
	// A row committed while they are held waits for their settlement.
	if _, err := env.DB.Exec(ctx, "INSERT INTO outbox (id, instance_id, message_name) VALUES ('a4', 'a', 'm')"); err != nil {
		t.Fatal(err)
	}
	lease("r2", 10)
	if err := st.SettleOutbox(ctx, "r2", store.OutboxSettlement{Published: []string{"a1", "a2", "a3"}}); err != nil {
		t.Fatal(err)
	}
	lease("r1", 10, "a4")
}

// An instance's rows are ordered within their target class only: its
// relays (task outcomes) are leased past its BPMN messages held by another
// publisher or backing off, and the reverse.
func TestOutboxOrderHoldsWithinATargetClassOnly(t *testing.T) {
	t.Parallel()
	env, ctx, st := open(t)
	insert := func(id, target string) {
		t.Helper()
		if _, err := env.DB.Exec(ctx, "INSERT INTO outbox (id, instance_id, message_name, target) VALUES ($1, 'a', 'm', $2)", id, target); err != nil {
			t.Fatal(err)
		}
	}
	// Commit order: a1 (a message), ar1 (a relay), a2 (a message).
	insert("a1", store.TargetOutbox)
	insert("ar1", store.TargetRelay)
	insert("a2", store.TargetOutbox)
	lease := func(owner string, limit int, want ...string) {
		t.Helper()
		rows, err := st.LeaseOutbox(ctx, owner, limit, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(rows); !slices.Equal(got, want) {
			t.Fatalf("%s leased %v, want %v", owner, got, want)
		}
	}
	lease("r1", 1, "a1")
	lease("r2", 10, "ar1") // not behind r1's a1; a2 is
	if err := st.SettleOutbox(ctx, "r2", store.OutboxSettlement{Published: []string{"ar1"}}); err != nil {
		t.Fatal(err)
	}
	// A relay committed while r1 holds a1 goes to another publisher.
	insert("ar2", store.TargetRelay)
	lease("r2", 10, "ar2")
	if err := st.SettleOutbox(ctx, "r2", store.OutboxSettlement{Published: []string{"ar2"}}); err != nil {
		t.Fatal(err)
	}
	// a1 backs off: a2 waits behind it, the relays do not.
	if err := st.SettleOutbox(ctx, "r1", store.OutboxSettlement{Deferred: []store.OutboxDeferral{{ID: "a1", Delay: time.Hour}}}); err != nil {
		t.Fatal(err)
	}
	insert("ar3", store.TargetRelay)
	lease("r2", 10, "ar3")
}

// A commit that wrote outbox rows tells the publisher once it committed;
// one that wrote none, or failed, does not.
func TestACommitThatWroteOutboxRowsNotifiesThePublisher(t *testing.T) {
	t.Parallel()
	_, ctx, st := open(t)
	var n atomic.Int32
	st.NotifyOutbox(func() { n.Add(1) })
	relay := []store.RelayOut{{ID: "ar1", InstanceID: "a", RoutingKey: "k", Body: []byte("{}")}, {ID: "ar2", InstanceID: "a", RoutingKey: "k", Body: []byte("{}")}}
	if err := st.Forward(ctx, "in-1", "src", relay); err != nil || n.Load() != 1 {
		t.Fatalf("forward: %v, %d notifications; want 1", err, n.Load())
	}
	if err := st.Forward(ctx, "in-1", "src", relay); !errors.Is(err, store.ErrDuplicate) || n.Load() != 1 {
		t.Fatalf("duplicate forward: %v, %d notifications; want ErrDuplicate, no more", err, n.Load())
	}
	if err := st.Forward(ctx, "in-2", "src", nil); err != nil || n.Load() != 1 {
		t.Fatalf("forward of nothing: %v, %d notifications; want none more", err, n.Load())
	}
}

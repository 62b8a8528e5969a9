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
	if r := rows[0]; r.InstanceID != "a" || r.Message != "m" || r.Target != store.TargetOutbox || string(r.Variables) != "{}" || r.Age < 0 || r.Age > time.Minute {
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
	if rows, err := st.LeaseOutbox(ctx, "dead", 10, 500*time.Millisecond); err != nil || len(rows) != 1 {
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
// batches in flight chain them), flagged Behind; other owners still may not.
func TestOutboxLeasesOfOneOwnerTakeRowsBehindItsOwnAndFlagThem(t *testing.T) {
	t.Parallel()
	env, ctx, st := open(t)
	// Commit order: a1 a2 b1 a3.
	for _, r := range [][2]string{{"a", "a1"}, {"a", "a2"}, {"b", "b1"}, {"a", "a3"}} {
		if _, err := env.DB.Exec(ctx, "INSERT INTO outbox (id, instance_id, message_name) VALUES ($2, $1, 'm')", r[0], r[1]); err != nil {
			t.Fatal(err)
		}
	}
	lease := func(owner string, limit int, lease time.Duration) map[string]bool {
		t.Helper()
		rows, err := st.LeaseOutbox(ctx, owner, limit, lease)
		if err != nil {
			t.Fatal(err)
		}
		behind := map[string]bool{}
		for _, r := range rows {
			behind[r.ID] = r.Behind
		}
		return behind
	}
	if got := lease("r1", 1, time.Minute); len(got) != 1 || got["a1"] {
		t.Fatalf("first lease: %v, want a1 not behind", got)
	}
	if got := lease("r2", 10, time.Minute); len(got) != 1 || got["b1"] {
		t.Fatalf("another owner leased %v, want only b1: a2 and a3 wait behind r1's a1", got)
	}
	if got := lease("r1", 10, 100*time.Millisecond); len(got) != 2 || !got["a2"] || !got["a3"] {
		t.Fatalf("r1 leased %v, want a2 and a3 behind its a1", got)
	}
	// Once r1's leases of a2 and a3 lapse, r1 takes them again, now behind
	// nothing of its own but a1; after a1 is published, behind nothing.
	if err := st.SettleOutbox(ctx, "r1", store.OutboxSettlement{Published: []string{"a1"}}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "r1's short leases lapse", func() bool {
		got := lease("r1", 10, time.Minute)
		if len(got) > 0 && (len(got) != 2 || got["a2"] || got["a3"]) {
			t.Fatalf("r1 leased %v again, want a2 and a3 behind nothing", got)
		}
		return len(got) == 2
	})
}

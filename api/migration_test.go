package api_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/lanes"
)

// A bulk migration of 1 000 waiting instances from v1 to v2, an element
// renamed, while relays keep stepping them on two replicas: every instance
// ends on v2, every relay applies once, no two steps of one instance overlap,
// and a migration refused by a held claim is tried again later.
func TestABulkMigrationUnderLoadMovesEveryInstanceOnceWithoutOverlap(t *testing.T) {
	t.Parallel()
	const n, pings = 1000, 3
	// One step of l-0 holds its claim from before the migration starts until
	// the migration has been refused once, so that a refusal and its retry
	// certainly happen.
	var held atomic.Bool
	holding, release := make(chan struct{}), make(chan struct{})
	hooks := &lanes.Hooks{BeforeCommit: func(ctx context.Context, _ int, r *lanes.Resume) {
		if r.InboxID() == "ping-l-0-0" && held.CompareAndSwap(false, true) {
			close(holding)
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
	}}
	// The held step must not go stale while it waits (a busy machine may take
	// a while to reach l-0): a stale takeover is another test's subject.
	b := setupAdmin(t, hooks, func(c *app.Config) { c.Lanes.Count, c.ClaimTimeout = 4, 5*time.Minute })
	b.env.Deploy(t, "testdata/loop-v1.bpmn")
	var starts []testkit.Relay
	var ids []string
	for i := range n {
		id := fmt.Sprintf("l-%d", i)
		starts = append(starts, testkit.Relay{MessageID: "start-" + id, Body: map[string]any{"start": "loop", "instance_id": id,
			"variables": map[string]any{"key": id}}})
		ids = append(ids, "start-"+id)
	}
	b.pub.Publish(starts...)
	b.applied(t, ids...)
	if got := b.env.Int(t, "SELECT count(*) FROM instances WHERE definition_key = 'loop' AND version = 1"); got != n {
		t.Fatalf("%d instances waiting once started, want %d", got, n)
	}
	b.env.Deploy(t, "testdata/loop-v2.bpmn")

	// A second replica on the same database and queues.
	cfg := b.cfg
	cfg.ReplicaID += "-b"
	otherReg := prometheus.NewRegistry()
	other, err := app.Start(testkit.Ctx(t), cfg, app.Options{Logger: testkit.Logger(t), Registry: otherReg, Hooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = other.Stop(ctx)
	})
	// Either replica may run the migration.
	retried := func() float64 {
		return testkit.Counter(t, b.reg, "sutra_migrations_instances_total", "outcome", "retried") +
			testkit.Counter(t, otherReg, "sutra_migrations_instances_total", "outcome", "retried")
	}

	// Pings by correlation key (they follow the subscription, whatever its
	// element) arrive while the migration runs.
	published := make(chan struct{})
	go func() {
		defer close(published)
		for p := range pings {
			var batch []testkit.Relay
			for i := range n {
				id := fmt.Sprintf("l-%d", i)
				batch = append(batch, testkit.Relay{MessageID: fmt.Sprintf("ping-%s-%d", id, p), Body: map[string]any{"message": "ping", "correlation_key": id}})
			}
			b.pub.Publish(batch...)
		}
	}()
	select {
	case <-holding:
	case <-time.After(2 * time.Minute):
		t.Fatal("l-0's first ping never reached its commit")
	}
	status, p := b.do(t, "POST", "/migrations", map[string]any{"definition": "loop", "from_version": 1, "to_version": 2,
		"mapping": map[string]string{"Catch_V1": "Catch_V2"}})
	if status != http.StatusAccepted {
		t.Fatalf("start migration: %d %v", status, p)
	}
	id := fmt.Sprint(p["id"])
	testkit.Eventually(t, 2*time.Minute, "the migration refused by l-0's held claim", func() bool {
		return retried() >= 1
	})
	close(release)
	<-published
	var m map[string]any
	testkit.Eventually(t, 5*time.Minute, "the migration done", func() bool {
		_, m = b.do(t, "GET", "/migrations/"+id, nil)
		return m["state"] == "done"
	})
	if m["total"] != float64(n) || m["migrated"] != float64(n) || len(m["refused"].([]any)) != 0 {
		t.Errorf("migration = %v", m)
	}
	testkit.Eventually(t, 3*time.Minute, "every ping applied", func() bool {
		return b.env.Int(t, "SELECT count(*) FROM inbox WHERE message_id LIKE 'ping-%'") == n*pings
	})
	if v := b.env.Int(t, "SELECT count(*) FROM instances WHERE definition_key = 'loop' AND definition_version = 2"); v != n {
		t.Errorf("%d of %d instances on v2", v, n)
	}
	// Each instance took its start, each ping once, and the migration.
	if v := b.env.Int(t, "SELECT count(*) FROM instances WHERE definition_key = 'loop' AND version <> $1", 1+pings+1); v != 0 {
		t.Errorf("%d instances took other than one step per relay and one migration", v)
	}
	if v := b.env.Int(t, "SELECT count(*) FROM subscriptions WHERE element_id = 'Catch_V2'"); v != n {
		t.Errorf("%d subscriptions on the renamed element, want %d", v, n)
	}
	if retried() < 1 {
		t.Error("no migration was refused and retried")
	}
	// The step history holds each of those steps once, under both replicas'
	// group commits, and the migrations' refusals as their bounces.
	if v := b.env.Int(t, `SELECT count(*) FROM (SELECT instance_id FROM step_history GROUP BY instance_id
		HAVING count(*) <> $1 OR min(version) <> 1 OR max(version) <> $1) x`, 1+pings+1); v != 0 {
		t.Errorf("%d instances whose history is not one row per step", v)
	}
	if v := b.env.Int(t, "SELECT count(DISTINCT instance_id) FROM step_history"); v != n {
		t.Errorf("the history names %d instances, want %d", v, n)
	}
	if v := b.env.Int(t, `SELECT count(*) FROM step_history h JOIN migration_items m ON m.instance_id = h.instance_id
		WHERE h.cause = 'admin_migrate' AND h.bounces = m.attempts - 1`); v != n {
		t.Errorf("%d of %d migration steps record their earlier tries as bounces", v, n)
	}
	if sum := b.env.Int(t, "SELECT sum(bounces) FROM step_history WHERE cause = 'admin_migrate'"); float64(sum) != retried() {
		t.Errorf("the migrations' bounces sum to %d, the retries counted are %v", sum, retried())
	}
	b.env.AssertNoOverlap(t, false)
	b.env.AssertNoClaimsHeld(t)
}

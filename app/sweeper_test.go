package app_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/claims"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/internal/testsignal"
	"github.com/sutra-run/worker/lanes"
)

func fastSweep(c *app.Config) {
	c.Sweeper.Interval = 100 * time.Millisecond
	c.LeaseTTL = time.Second
}

func (b *bundle) gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return 0
}

func TestSweepClearsOnlyClaimsOlderThanTheTimeoutAndIsOwnerBlind(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, fastSweep)
	b.pub.Publish(start("o-1"), start("o-2"), start("o-3"))
	b.waitVersion(t, "o-1", 1)
	b.waitVersion(t, "o-2", 1)
	b.waitVersion(t, "o-3", 1)
	ctx := testkit.Ctx(t)
	for _, q := range []string{
		// A dead lane's claim, a claim by an owner id of no known shape (the
		// sweep never parses owners), a live claim, and a start that never
		// committed its first step.
		"INSERT INTO claims (instance_id, owner, claimed_at) VALUES ('o-1', 'dead-replica/lane/3', now() - interval '1 hour') ON CONFLICT (instance_id) DO UPDATE SET owner = EXCLUDED.owner, claimed_at = EXCLUDED.claimed_at",
		"INSERT INTO claims (instance_id, owner, claimed_at) VALUES ('o-2', 'no slashes at all', now() - interval '31 seconds') ON CONFLICT (instance_id) DO UPDATE SET owner = EXCLUDED.owner, claimed_at = EXCLUDED.claimed_at",
		"INSERT INTO claims (instance_id, owner, claimed_at) VALUES ('o-3', 'live/lane/1', now() + interval '1 hour') ON CONFLICT (instance_id) DO UPDATE SET owner = EXCLUDED.owner, claimed_at = EXCLUDED.claimed_at",
		"INSERT INTO instances (id, definition_key, definition_version, status) VALUES ('half-started', 'order', 1, 'active')",
		"INSERT INTO claims (instance_id, owner, claimed_at) VALUES ('half-started', 'dead-replica/lane/0', now() - interval '1 hour')",
	} {
		if _, err := b.env.DB.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	b.w.Sweeper().TestSignals.Swept.Until(t, "three stale claims swept", func() bool {
		return b.counter(t, "sutra_claims_swept_total", "", "") == 3
	})
	if n := b.env.Int(t, "SELECT count(*) FROM claims"); n != 1 {
		t.Errorf("%d claims held, want only the live one", n)
	}
	if n := b.env.Int(t, "SELECT count(*) FROM claims WHERE instance_id = 'o-3' AND owner = 'live/lane/1'"); n != 1 {
		t.Errorf("the live claim was swept")
	}
	if n := b.env.Int(t, "SELECT count(*) FROM instances WHERE id = 'half-started'"); n != 0 {
		t.Errorf("the stale start that never committed was left behind")
	}
	// A swept instance is resumable at once.
	b.pub.Publish(paid("o-1"))
	b.waitVersion(t, "o-1", 2)
}

// The inbox keeps its ids by day, like the step history.
func TestInboxDaysPastTheRetentionAreDropped(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, func(c *app.Config) { fastSweep(c); c.InboxRetention = time.Hour })
	ctx := testkit.Ctx(t)
	for _, q := range []string{
		`SELECT sutra_day_partitions('inbox_days', (now() AT TIME ZONE 'UTC')::date - 3, (now() AT TIME ZONE 'UTC')::date - 3)`,
		`INSERT INTO inbox_days (message_id, instance_id, day)
		SELECT 'old-' || g, 'x', (now() AT TIME ZONE 'UTC')::date - 3 FROM generate_series(1, 10) g
		UNION ALL SELECT 'new-' || g, 'x', (now() AT TIME ZONE 'UTC')::date FROM generate_series(1, 10) g`,
	} {
		if _, err := b.env.DB.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	b.w.Sweeper().TestSignals.Swept.Until(t, "old ids dropped", func() bool {
		return b.env.Int(t, "SELECT count(*) FROM inbox WHERE message_id LIKE 'old-%'") == 0
	})
	if n := b.env.Int(t, "SELECT count(*) FROM inbox_days WHERE message_id LIKE 'new-%'"); n != 10 {
		t.Errorf("%d of 10 ids within the retention kept in the partitioned table", n)
	}
}

func TestSweeperLeaseHasOneHolderAndPassesOnWhenItStops(t *testing.T) {
	t.Parallel()
	// A TTL of 3 s, not fastSweep's 1 s: the holder renews every second, and
	// a stall of two thirds of a TTL (a busy 2-core machine, -race) would let
	// the other take the lease and fail a test of the holder keeping it.
	a := setup(t, nil, func(c *app.Config) { fastSweep(c); c.LeaseTTL = 3 * time.Second })
	a.w.Sweeper().TestSignals.Init()
	second := &bundle{env: a.env, pub: a.pub, cfg: a.cfg}
	second.cfg.ReplicaID += "-b"
	second.start(t, nil)
	second.w.Sweeper().TestSignals.Init()
	held := func(b *bundle) float64 { return b.gauge(t, b.reg, "sutra_lease_held") }
	a.w.Sweeper().TestSignals.Lease.Until(t, "one holder", func() bool { return held(a)+held(second) == 1 })
	holder, other := a, second
	if held(second) == 1 {
		holder, other = second, a
	}
	// Over more than a TTL of renewals (one every third of it), the holder
	// keeps the lease and every attempt of the other is refused.
	holder.w.Sweeper().TestSignals.Lease.Drain()
	other.w.Sweeper().TestSignals.Lease.Drain()
	for range 4 {
		if !holder.w.Sweeper().TestSignals.Lease.WaitOrTimeout(t) {
			t.Fatal("the holder lost the lease while renewing it")
		}
	}
	for _, got := range other.w.Sweeper().TestSignals.Lease.Drain() {
		if got {
			t.Fatal("both replicas held the lease")
		}
	}
	stopped := time.Now()
	holder.stop(t, holder.w)
	for !other.w.Sweeper().TestSignals.Lease.WaitOrTimeout(t) {
	}
	t.Logf("lease passed on %s after its holder stopped", time.Since(stopped))
	// The new holder sweeps.
	if _, err := a.env.DB.Exec(testkit.Ctx(t), `INSERT INTO instances (id, definition_key, definition_version, status, version) VALUES ('stale', 'order', 1, 'active', 1);
		INSERT INTO claims (instance_id, owner, claimed_at) VALUES ('stale', 'gone/lane/0', now() - interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	other.w.Sweeper().TestSignals.Swept.Until(t, "the new holder sweeps", func() bool {
		return other.counter(t, "sutra_claims_swept_total", "", "") == 1
	})
}

func TestSlowStepIsSweptAnotherLaneAdvancesAndTheSlowCommitIsFenced(t *testing.T) {
	t.Parallel()
	var pool atomic.Pointer[lanes.Pool]
	release := make(chan struct{})
	var held atomic.Bool
	var holding testsignal.Signal[struct{}]
	holding.Init()
	hooks := &lanes.Hooks{
		// The second payment goes to another lane than the instance's own.
		Route: func(r *lanes.Resume) int {
			if r.InboxID() == "paid-again-o-1" {
				return (pool.Load().Lane("o-1") + 1) % pool.Load().Lanes()
			}
			return -1
		},
		// The first payment's step is alive but slow: held past the claim timeout.
		BeforeCommit: func(ctx context.Context, _ int, r *lanes.Resume) {
			if r.InboxID() == "paid-o-1" && held.CompareAndSwap(false, true) {
				holding.Signal(struct{}{})
				<-release
			}
		},
	}
	// The default claim timeout (30 s): the test ages the held claim itself,
	// so no ordinary step is swept (the test counts exactly one fence).
	b := setup(t, hooks, fastSweep)
	pool.Store(b.w.Lanes())
	b.pub.Publish(start("o-1"))
	b.waitVersion(t, "o-1", 1)
	b.pub.Publish(paid("o-1"))
	holding.WaitOrTimeout(t) // the slow step is running
	// Its claim grows older than the timeout while it runs.
	if _, err := b.env.DB.Exec(testkit.Ctx(t), "UPDATE claims SET claimed_at = now() - interval '1 hour' WHERE instance_id = 'o-1'"); err != nil {
		t.Fatal(err)
	}
	b.w.Sweeper().TestSignals.Swept.Until(t, "its claim swept", func() bool {
		return b.counter(t, "sutra_claims_swept_total", "", "") >= 1
	})
	b.pub.Publish(testkit.Relay{MessageID: "paid-again-o-1", Body: map[string]any{"instance_id": "o-1", "message": "payment-received"}})
	b.waitVersion(t, "o-1", 2)
	close(release)
	// A fenced step is retried: its relay is requeued.
	b.w.Consumer().TestSignals.Requeued.Until(t, "the slow commit fenced", func() bool {
		return b.counter(t, "sutra_steps_fenced_total", "", "") == 1
	})
	// The fenced relay comes back, finds the payment applied, and is dead-lettered as not waiting.
	b.waitRelays(t, "dead_lettered", 1)
	if v := b.version(t, "o-1"); v != 2 {
		t.Errorf("version = %d, want 2: the slow step must not have committed", v)
	}
	other := claims.LaneOwner(b.cfg.ReplicaID, (pool.Load().Lane("o-1")+1)%pool.Load().Lanes())
	if owners := b.env.Committers(t, "o-1"); len(owners) != 2 || owners[1] != other {
		t.Errorf("committers = %v, want the payment committed by %s", owners, other)
	}
	b.env.AssertNoOverlap(t, true)
	b.env.AssertNoClaimsHeld(t)
}

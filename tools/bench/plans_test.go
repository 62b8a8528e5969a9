package bench_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/store"
	"github.com/sutra-run/worker/tools/bench"
)

// TestHotPlansUseIndexes explains every hot statement's generic plan on
// tables of a moderate size (issue 10's shape, a twentieth of its rows),
// analyzed, and fails when one reads a watched table sequentially or misses
// the index it must use: on the million rows such a plan costs the
// step a scan.
func TestHotPlansUseIndexes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := store.EnsureDatabase(ctx, testkit.DatabaseURL()); err != nil {
		t.Fatal(err)
	}
	env, err := bench.NewEnv(ctx, testkit.DatabaseURL(), "amqp://unused/", "plans", 64, bench.ProcessXML)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	// First as a new schema is: K instances, nothing analyzed.
	checkPlans(ctx, t, env, "on new tables", func(s bench.Statement) string { return s.KnownEmpty })
	if err := env.Seed(ctx, bench.Data{Instances: 50_000, Timers: 5_000, Subscriptions: 5_000, Tasks: 1_000,
		Inbox: 50_000, Outbox: 5_000, History: 100_000}); err != nil {
		t.Fatal(err)
	}
	checkPlans(ctx, t, env, "at 50 000 instances", func(s bench.Statement) string { return s.Known })
}

// Every statement the store names as hot is explained, so a new one cannot
// escape the plan check.
func TestEveryHotStatementOfTheStoreIsExplained(t *testing.T) {
	listed := map[string]bool{}
	for _, s := range bench.HotStatements {
		listed[s.Name] = true
	}
	for name := range store.HotStatements() {
		if !listed[name] {
			t.Errorf("store hot statement %q is not in bench.HotStatements", name)
		}
	}
}

// checkPlans explains every hot statement in env and fails the test on a
// fault that known does not excuse.
func checkPlans(ctx context.Context, t *testing.T, env *bench.Env, when string, known func(bench.Statement) string) {
	t.Helper()
	conn, err := pgx.Connect(ctx, env.Config.Database.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, s := range bench.HotStatements {
		plan, err := bench.Explain(ctx, conn, s)
		if err != nil {
			t.Error(err)
			continue
		}
		faults := s.Faults(plan)
		switch {
		case len(faults) > 0 && known(s) != "":
			t.Logf("%s %s: %v (known: %s)", when, s.Name, faults, known(s))
		case len(faults) > 0:
			t.Errorf("%s %s: %v:\n%s", when, s.Name, faults, plan)
		}
	}
}

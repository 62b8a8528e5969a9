package bench_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sutra-run/worker/bench"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/store"
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
	if err := env.Seed(ctx, bench.Data{Instances: 50_000, Timers: 5_000, Subscriptions: 5_000, Tasks: 1_000,
		Inbox: 50_000, Outbox: 5_000}); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, env.Config.DatabaseURL)
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
		case len(faults) > 0 && s.Known != "":
			t.Logf("%s %v (known: %s)", s.Name, faults, s.Known)
		case len(faults) > 0:
			t.Errorf("%s %v:\n%s", s.Name, faults, plan)
		}
	}
}

package upgrade_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/clock"
	"github.com/sutra-run/worker/upgrade"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The component tries once per interval, never before, and stops trying
// once a try applied every step.
func TestContractsRetryEachIntervalUntilApplied(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC))
	clk.Set.Init()
	tries := make(chan struct{}, 10)
	results := []error{fault.New(fault.MigrateContractWaiting, "waits for old"), fault.New(fault.Unavailable, "database down"), nil}
	c := upgrade.New(upgrade.Deps{Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Migrate: func(context.Context) error {
		err := results[0]
		results = results[1:]
		tries <- struct{}{}
		return err
	}}, upgrade.Config{Interval: time.Minute})
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(context.Background())
	for i := range 3 {
		if d := clk.Set.WaitOrTimeout(t); d != time.Minute {
			t.Fatalf("try %d: timer set for %s, want the interval", i, d)
		}
		clk.Advance(time.Minute - time.Millisecond)
		select {
		case <-tries:
			t.Fatalf("try %d came before its interval", i)
		default:
		}
		clk.Advance(time.Millisecond)
		select {
		case <-tries:
		case <-time.After(10 * time.Second):
			t.Fatalf("try %d did not come at its interval", i)
		}
	}
	select {
	case <-c.Stopped(): // applied: nothing left to try
	case <-time.After(10 * time.Second):
		t.Fatal("the component goes on trying after every step was applied")
	}
	if len(results) != 0 || len(tries) != 0 {
		t.Fatalf("%d results left, %d extra tries", len(results), len(tries))
	}
}

package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/store"
)

func TestAParkedTimerIsNeverDueAndItsIncidentIsResolvedByARetryOrWhenItsWaitCloses(t *testing.T) {
	t.Parallel()
	env, ctx, st := open(t)
	if _, err := env.DB.Exec(ctx, `INSERT INTO timers (instance_id, token_id, element_id, due_at)
		VALUES ('i-1', 't1', 'wait', now() - interval '1 s'), ('i-2', 't1', 'wait', now() - interval '1 s')`); err != nil {
		t.Fatal(err)
	}
	take := func(want int) []store.DueTimer {
		t.Helper()
		due, _, _, err := st.TakeDueTimers(ctx, "r1", 10, time.Minute)
		if err != nil || len(due) != want {
			t.Fatalf("took %d timers (%v), want %d", len(due), err, want)
		}
		return due
	}
	due := take(2)
	parked, err := st.ParkTimers(ctx, "r1", []store.Parking{{Timer: due[0], Reason: "boom"}, {Timer: due[1], Reason: "boom"}})
	if err != nil || len(parked) != 2 {
		t.Fatalf("parked %+v (%v)", parked, err)
	}
	if n := env.Int(t, "SELECT count(*) FROM incidents WHERE resolved_at IS NULL AND code = $1 AND message = 'boom'", fault.IncidentTimerFailed); n != 2 {
		t.Fatalf("%d open incidents, want 2", n)
	}
	// Parked rows are not due, whatever their due_at, and not next either.
	if _, _, ok, err := st.TakeDueTimers(ctx, "r2", 10, time.Minute); err != nil || ok {
		t.Fatalf("a parked timer was reported as next due (%v)", err)
	}
	take(0)

	// A retry arms the timer now and resolves its incident.
	if err := st.RetryTimer(ctx, parked[0].IncidentID); err != nil {
		t.Fatal(err)
	}
	if err := st.RetryTimer(ctx, parked[0].IncidentID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a second retry of the same incident = %v, want ErrNotFound", err)
	}
	if again := take(1); again[0].ID != parked[0].TimerID || again[0].Failures != 0 {
		t.Fatalf("after the retry took %+v, want timer %d with no failures", again[0], parked[0].TimerID)
	}
	// The other timer's wait closes (a cancel, a boundary event): its
	// incident goes with it.
	if _, err := env.DB.Exec(ctx, "DELETE FROM timers WHERE instance_id = 'i-2'"); err != nil {
		t.Fatal(err)
	}
	if n := env.Int(t, "SELECT count(*) FROM incidents WHERE resolved_at IS NULL"); n != 0 {
		t.Fatalf("%d incidents left open", n)
	}
}

package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/lanes"
)

func TestATimerStartEventStartsOneInstancePerFireUntilItsCycleEnds(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	b.env.Deploy(t, "testdata/timer-start.bpmn") // R3/PT0.2S
	b.waitCommitted(t, "three fires", func() bool {
		return b.env.Int(t, "SELECT count(*) FROM instances WHERE definition_key = 'nightly' AND status = 'completed'") == 3
	})
	b.waitCommitted(t, "the schedule ended", func() bool {
		return b.env.Int(t, "SELECT count(*) FROM timers") == 0
	})
	if n := b.env.Int(t, "SELECT count(DISTINCT id) FROM instances WHERE definition_key = 'nightly'"); n != 3 {
		t.Errorf("%d instances, want one per fire", n)
	}
	b.env.AssertNoClaimsHeld(t)
}

func TestDeployingANewVersionReplacesTheTimerStartSchedule(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	b.env.Deploy(t, "testdata/timer-start-v2.bpmn") // v1: R/PT1H
	b.env.Deploy(t, "testdata/timer-start.bpmn")    // v2: R3/PT0.2S
	b.waitCommitted(t, "v2's three fires", func() bool {
		return b.env.Int(t, "SELECT count(*) FROM instances WHERE definition_key = 'nightly' AND status = 'completed'") == 3
	})
	if n := b.env.Int(t, "SELECT count(*) FROM instances WHERE definition_key = 'nightly' AND definition_version <> 2"); n != 0 {
		t.Errorf("%d instances of the replaced version", n)
	}
	if n := b.env.Int(t, "SELECT count(*) FROM timers"); n != 0 {
		t.Errorf("%d schedule rows left: v1's hourly schedule must have gone with v2's deploy", n)
	}
}

// A fire whose lease lapsed while it was in flight can be fired again by
// another poller, after the first one's commit started the instance and
// moved the schedule on. The copy must start nothing and leave the
// schedule alone.
func TestATimerStartFiredTwiceStartsItsInstanceOnce(t *testing.T) {
	t.Parallel()
	fired := make(chan lanes.ScheduledStart, 1)
	hooks := &lanes.Hooks{BeforeCommit: func(_ context.Context, _ int, r *lanes.Resume) {
		if c, ok := r.Cause.(lanes.ScheduledStart); ok {
			select {
			case fired <- c:
			default:
			}
		}
	}}
	b := setup(t, hooks, nil)
	b.env.Deploy(t, "testdata/timer-start-v2.bpmn") // R/PT1H: fires once an hour after deploy
	if _, err := b.env.DB.Exec(testkit.Ctx(t), "UPDATE timers SET due_at = now() WHERE definition_key = 'nightly'"); err != nil {
		t.Fatal(err)
	}
	b.w.Timers().Armed(time.Now())
	first := <-fired
	b.waitCommitted(t, "the first fire's instance", func() bool {
		return b.env.Int(t, "SELECT count(*) FROM instances WHERE id = $1 AND status = 'completed'", first.Timer.InstanceID) == 1
	})
	var fires int64
	var due time.Time
	if err := b.env.DB.QueryRow(testkit.Ctx(t), "SELECT fired, due_at FROM timers WHERE definition_key = 'nightly'").Scan(&fires, &due); err != nil {
		t.Fatal(err)
	}
	if fires != 1 || due.Sub(first.Timer.DueAt) != time.Hour {
		t.Fatalf("schedule after the first fire: fired %d, next due %v after the fired one; want 1, 1h", fires, due.Sub(first.Timer.DueAt))
	}

	// The copy: the same schedule row and lease, fired again.
	outcome := make(chan lanes.Result, 1)
	again := lanes.Resume{Cause: first, Done: func(o lanes.Result) { outcome <- o }}
	b.w.Lanes().Dispatch(again)
	if o := <-outcome; o.Kind != lanes.Rejected || o.Code != fault.InstanceExists {
		t.Fatalf("the copy's outcome: %v %s, want rejected %s", o.Kind, o.Code, fault.InstanceExists)
	}
	if n := b.env.Int(t, "SELECT count(*) FROM instances WHERE definition_key = 'nightly'"); n != 1 {
		t.Errorf("%d instances, want 1", n)
	}
	if n := b.env.Int(t, "SELECT fired FROM timers WHERE definition_key = 'nightly'"); n != 1 {
		t.Errorf("the copy moved the schedule to fire %d", n)
	}
}

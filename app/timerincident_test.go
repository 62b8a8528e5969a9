package app_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/lanes"
	"github.com/sutra-run/worker/metrics"
	"github.com/sutra-run/worker/store"
)

func TestATimerThatFailsForGoodStopsInAnIncidentThatARetryArmsAgain(t *testing.T) {
	t.Parallel()
	const maxAttempts = 3
	var failing atomic.Bool
	hooks := &lanes.Hooks{BeforeCommit: func(_ context.Context, _ int, r *lanes.Resume) {
		if r.Path() == metrics.PathTimer && failing.Load() {
			panic("the timer's step fails")
		}
	}}
	b := setup(t, hooks, func(c *app.Config) {
		c.Timers.MaxAttempts = maxAttempts
		c.Timers.Backoff, c.Timers.BackoffMax = 10*time.Millisecond, 40*time.Millisecond
		c.AdminToken = "secret"
	})
	signals := &b.w.Timers().TestSignals
	signals.Init()
	b.env.Deploy(t, "testdata/timer.bpmn")
	b.pub.Publish(startTimer("t-1", "PT2S"))
	b.waitVersion(t, "t-1", 1)
	ctx := testkit.Ctx(t)
	exec := func(sql string) {
		t.Helper()
		if _, err := b.env.DB.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	// Refusals are not failures: twice the cap of them parks nothing.
	exec("INSERT INTO claims (instance_id, owner, claimed_at) VALUES ('t-1', 'elsewhere/lane/0', now()) ON CONFLICT (instance_id) DO UPDATE SET owner = EXCLUDED.owner, claimed_at = EXCLUDED.claimed_at")
	for range 2 * maxAttempts {
		if d := signals.Deferred.WaitOrTimeout(t); d.Failed {
			t.Fatalf("a refused fire was deferred as a failure: %+v", d)
		}
	}
	failing.Store(true)
	exec("DELETE FROM claims WHERE instance_id = 't-1'")
	// Refusals may still be answered before the first failure.
	failures := 0
	for failures < maxAttempts-1 {
		if d := signals.Deferred.WaitOrTimeout(t); d.Failed {
			failures++
		}
	}
	parked := signals.Parked.WaitOrTimeout(t)
	open := true
	incidents, err := b.w.Store().ListIncidents(ctx, store.IncidentFilter{Open: &open, InstanceID: "t-1", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(incidents) != 1 || incidents[0].ID != parked.IncidentID || incidents[0].Code != fault.IncidentTimerFailed ||
		incidents[0].Element != "Wait" || !strings.Contains(incidents[0].Message, "failed 3 times") {
		t.Fatalf("open incidents = %+v, want one %s on the timer's element, parked as %+v", incidents, fault.IncidentTimerFailed, parked)
	}
	if n := b.env.Int(t, "SELECT count(*) FROM timers WHERE instance_id = 't-1' AND incident_id IS NOT NULL AND failures = $1", maxAttempts); n != 1 {
		t.Fatalf("the timer row is not parked with %d failures", maxAttempts)
	}
	if v := b.version(t, "t-1"); v != 1 {
		t.Fatalf("version %d: a failed fire committed", v)
	}

	// The retry arms the timer to fire now; the fire then commits.
	failing.Store(false)
	req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("http://%s/v1/incidents/%d/retry", b.w.APIAddr(), parked.IncidentID), strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer secret")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("retry answered %s", resp.Status)
	}
	b.waitVersion(t, "t-1", 2)
	if open := b.env.Int(t, "SELECT count(*) FROM incidents WHERE resolved_at IS NULL"); open != 0 {
		t.Errorf("%d incidents still open after the retried fire committed", open)
	}
	if left := b.env.Int(t, "SELECT count(*) FROM timers"); left != 0 {
		t.Errorf("%d timer rows left", left)
	}
	b.env.AssertNoClaimsHeld(t)
}

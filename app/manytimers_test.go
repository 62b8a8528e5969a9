package app_test

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/internal/testkit"
)

// envInt reads a test size from the environment (for the 100k measurement:
// SUTRA_TEST_TIMERS=100000 SUTRA_TEST_TIMERS_SPREAD=60s).
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// seedTimerInstances writes n instances of testdata/timer.bpmn parked at
// their timer, due over spread from start, as the start step would have.
func seedTimerInstances(t *testing.T, env *testkit.Env, n int, start time.Time, spread time.Duration) {
	t.Helper()
	xml, err := os.Open("testdata/timer.bpmn")
	if err != nil {
		t.Fatal(err)
	}
	defer xml.Close()
	proc, err := bpmn.Parse(xml)
	if err != nil {
		t.Fatal(err)
	}
	st, eff, err := engine.Step(proc, engine.Instance{ID: "seed"}, engine.Trigger{Kind: engine.TriggerStart, Variables: map[string]any{"delay": "PT1H"}}, start)
	if err != nil || len(eff.Timers) != 1 {
		t.Fatalf("seed step: %v, %+v", err, eff)
	}
	tokens, _ := json.Marshal(st)
	tm := eff.Timers[0]
	ctx := testkit.Ctx(t)
	inst, timers := make([][]any, n), make([][]any, n)
	for i := range n {
		id := fmt.Sprintf("m-%d", i)
		inst[i] = []any{id, "timer", 1, "active", st.Variables, tokens, int64(1)}
		timers[i] = []any{id, tm.TokenID, tm.Element, start.Add(spread * time.Duration(i) / time.Duration(n))}
	}
	if _, err := env.DB.CopyFrom(ctx, pgx.Identifier{"instances"}, []string{"id", "definition_key", "definition_version", "status", "variables", "tokens", "version"}, pgx.CopyFromRows(inst)); err != nil {
		t.Fatal(err)
	}
	if _, err := env.DB.CopyFrom(ctx, pgx.Identifier{"timers"}, []string{"instance_id", "token_id", "element_id", "due_at"}, pgx.CopyFromRows(timers)); err != nil {
		t.Fatal(err)
	}
	if _, err := env.DB.Exec(ctx, "ANALYZE instances; ANALYZE timers"); err != nil {
		t.Fatal(err)
	}
}

func TestManyTimersDueTogetherFireExactlyOnceAcrossTwoReplicas(t *testing.T) {
	t.Parallel()
	n := envInt("SUTRA_TEST_TIMERS", 3000)
	spread, err := time.ParseDuration(os.Getenv("SUTRA_TEST_TIMERS_SPREAD"))
	if err != nil {
		spread = 2 * time.Second
	}
	a := setup(t, nil, nil)
	a.env.Deploy(t, "testdata/timer.bpmn")
	second := &bundle{env: a.env, pub: a.pub, cfg: a.cfg}
	second.cfg.ReplicaID += "-b"
	second.start(t, nil)

	begin := time.Now().Add(time.Second)
	seedTimerInstances(t, a.env, n, begin, spread)
	runtime.GC() // the seed's rows are garbage now: measure the worker, not them
	var peak atomic.Uint64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-stopSampling:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	fired := func() float64 {
		return a.counter(t, "sutra_timers_fired_total", "", "") + second.counter(t, "sutra_timers_fired_total", "", "")
	}
	testkit.Eventually(t, spread+5*time.Minute, "every timer fired", func() bool { return fired() >= float64(n) })
	done := time.Since(begin)
	close(stopSampling)
	<-sampled
	if got := a.env.Int(t, "SELECT count(*) FROM instances WHERE status = 'completed' AND version = 2"); got != int64(n) {
		t.Errorf("%d of %d instances completed by exactly one step", got, n)
	}
	if f := fired(); f != float64(n) {
		t.Errorf("%v fires committed for %d timers", f, n)
	}
	if left := a.env.Int(t, "SELECT count(*) FROM timers"); left != 0 {
		t.Errorf("%d timer rows left", left)
	}
	lagCount, within := a.histogram(t, "sutra_timer_fire_lag_seconds", 0.244)
	t.Logf("%d timers due over %s fired in %s (%.0f/s after the first due); replica a fired %v, b %v; a's fires within 244 ms: %d/%d; peak heap in use %d MiB",
		n, spread, done, float64(n)/done.Seconds(), a.counter(t, "sutra_timers_fired_total", "", ""),
		second.counter(t, "sutra_timers_fired_total", "", ""), within, lagCount, peak.Load()>>20)
	a.env.AssertNoOverlap(t, false)
	a.env.AssertNoClaimsHeld(t)
}

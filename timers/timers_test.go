package timers_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/sutra-run/worker/internal/clock"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/lanes"
	"github.com/sutra-run/worker/metrics"
	"github.com/sutra-run/worker/store"
	"github.com/sutra-run/worker/timers"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// take is one TakeDueTimers answer the test gives when the poller asks.
type take struct {
	next time.Duration
	ok   bool
}

// fakeStore hands each look of the poller to the test: asked receives a
// value when a look starts, and the look answers what the test sends on
// answer.
type fakeStore struct {
	asked  chan struct{}
	answer chan take
}

func (f *fakeStore) TakeDueTimers(ctx context.Context, _ string, _ int, _ time.Duration) ([]store.DueTimer, time.Duration, bool, error) {
	f.asked <- struct{}{}
	select {
	case a := <-f.answer:
		return nil, a.next, a.ok, nil
	case <-ctx.Done():
		return nil, 0, false, ctx.Err()
	}
}
func (f *fakeStore) DeferTimers(context.Context, string, []store.Deferral) error { return nil }
func (f *fakeStore) ParkTimers(context.Context, string, []store.Parking) ([]store.ParkedTimer, error) {
	return nil, nil
}
func (f *fakeStore) DropTimers(context.Context, string, []store.DueTimer) ([]int64, error) {
	return nil, nil
}
func (f *fakeStore) ReleaseTimerLeases(context.Context, string) error { return nil }

type noLanes struct{}

func (noLanes) Dispatch(r lanes.Resume) {}

func TestATimerArmedWhileThePollerTakesABatchWakesItAtOnce(t *testing.T) {
	t.Parallel()
	st := &fakeStore{asked: make(chan struct{}), answer: make(chan take)}
	// The clock moves only when the test moves it, and never as far as the
	// poll interval: only the due time and wake-ups make the poller look.
	clk := clock.NewFake(time.Now())
	clk.Set.Init()
	p := timers.New(timers.Deps{Store: st, Lanes: noLanes{}, Metrics: metrics.New(prometheus.NewRegistry()), Logger: testkit.Logger(t)},
		timers.Config{Replica: "r", PollInterval: time.Hour, Clock: clk})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		go func() { // answer a look the stop may interrupt
			for range st.asked {
			}
		}()
		_ = p.Stop(context.Background())
		close(st.asked)
	}()
	look := func(what string) {
		t.Helper()
		select {
		case <-st.asked:
		case <-time.After(10 * time.Second):
			t.Fatalf("the poller did not look: %s", what)
		}
	}
	look("at start")
	// The earliest timer is due in 10 ms: the poller sleeps until then.
	st.answer <- take{next: 10 * time.Millisecond, ok: true}
	for clk.Set.WaitOrTimeout(t) != 10*time.Millisecond { // the first timer was the start's, due at once
	}
	select {
	case <-st.asked:
		t.Fatal("the poller looked before the earliest timer fell due")
	default:
	}
	clk.Advance(10 * time.Millisecond)
	look("when the earliest timer fell due")
	// While that look runs, a step of this replica arms a timer due a little
	// later: the look's answer predates it, so it cannot report it.
	p.Armed(clk.Now().Add(20 * time.Millisecond))
	st.answer <- take{}
	look("after a timer was armed during the previous look")
	st.answer <- take{}
}

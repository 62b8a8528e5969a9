package sweeper_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"github.com/sutra-run/worker/broker"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/clock"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/metrics"
	"github.com/sutra-run/worker/store"
	"github.com/sutra-run/worker/sweeper"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeStore answers the lease as the test sets it and records the chores.
type fakeStore struct {
	mu       sync.Mutex
	lease    func() (bool, error)
	sweeps   int
	expired  []store.BufferedMessage
	deleted  []int64
	released bool
	// tasksOpen, when set, is the census's count of open tasks by topic.
	tasksOpen map[string]int64
	// attemptsTrimmed records the retention of every trim of relay attempts.
	attemptsTrimmed []time.Duration
	// ensured and droppedAt record every call to keep the partitions by day.
	ensured, droppedAt []partitionCall
	// drops, when set, is sent every call to drop partitions.
	drops chan partitionCall
}

// partitionCall is a call to create or drop partitions by day.
type partitionCall struct {
	table     string
	now       time.Time
	retention time.Duration
	ahead     int
}

func (f *fakeStore) AcquireLease(context.Context, string, string, time.Duration) (bool, error) {
	f.mu.Lock()
	lease := f.lease
	f.mu.Unlock()
	return lease()
}
func (f *fakeStore) setLease(l func() (bool, error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lease = l
}
func (f *fakeStore) ReleaseLease(context.Context, string, string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.released = true
	return nil
}
func (f *fakeStore) SweepClaims(context.Context, time.Duration, int) ([]store.SweptClaim, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sweeps++
	return []store.SweptClaim{{InstanceID: "i", Owner: "dead/lane/0", Age: time.Hour}}, nil
}
func (f *fakeStore) EnsurePartitions(_ context.Context, t store.DayTable, now time.Time, retention time.Duration, ahead int) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ensured = append(f.ensured, partitionCall{t.Name, now, retention, ahead})
	return 0, nil
}
func (f *fakeStore) MoveBeforeDays(context.Context, store.DayTable, time.Time, time.Duration, int) (int64, int64, error) {
	return 0, 0, nil
}
func (f *fakeStore) DropPartitions(_ context.Context, t store.DayTable, now time.Time, retention time.Duration) ([]string, error) {
	f.mu.Lock()
	c := partitionCall{table: t.Name, now: now, retention: retention}
	f.droppedAt = append(f.droppedAt, c)
	drops := f.drops
	f.mu.Unlock()
	if drops != nil {
		drops <- c
	}
	return nil, nil
}
func (f *fakeStore) TrimRelayAttempts(_ context.Context, retention time.Duration, _ int) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attemptsTrimmed = append(f.attemptsTrimmed, retention)
	return 0, nil
}
func (f *fakeStore) ExpiredBuffered(context.Context, int) ([]store.BufferedMessage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]store.BufferedMessage(nil), f.expired...), nil
}
func (f *fakeStore) DeleteBuffered(_ context.Context, ids []int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleted = append(f.deleted, ids...)
	f.expired = slices.DeleteFunc(f.expired, func(m store.BufferedMessage) bool { return slices.Contains(ids, m.ID) })
	return nil
}
func (f *fakeStore) TrimOutbox(context.Context, time.Duration, int) (int64, error) { return 0, nil }
func (f *fakeStore) Census(context.Context) (store.Census, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	open := f.tasksOpen
	if open == nil {
		open = map[string]int64{"ship": 4}
	}
	return store.Census{OutboxBacklog: 7, OldestClaim: 3 * time.Second, IncidentsOpen: 2, TasksOpen: maps.Clone(open)}, nil
}
func (f *fakeStore) setTasksOpen(open map[string]int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tasksOpen = open
}
func (f *fakeStore) sweepCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sweeps
}

// deadLetters is a broker that confirms every message unless err is set.
type deadLetters struct {
	mu  sync.Mutex
	err error
	got []broker.Message
}

func (d *deadLetters) QueueDepth(string) (int, error) { return 5, nil }

func (d *deadLetters) Publish(_ context.Context, msgs []broker.Message) []error {
	d.mu.Lock()
	defer d.mu.Unlock()
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		if errs[i] = d.err; d.err == nil {
			d.got = append(d.got, m)
		}
	}
	return errs
}

// loop drives a sweeper's loop by its fake clock, one tick at a time.
type loop struct {
	clk *clock.Fake
	// next is the timer the idle loop set, once settle has seen it.
	next   time.Duration
	seeing bool
}

// settle waits until the loop has finished its tick and set its timer.
func (l *loop) settle(t *testing.T) {
	t.Helper()
	if !l.seeing {
		l.next, l.seeing = l.clk.Set.WaitOrTimeout(t), true
	}
}

// tick moves the clock to the loop's timer and waits until that tick is
// done: every signal it gave is queued when tick returns.
func (l *loop) tick(t *testing.T) {
	t.Helper()
	l.settle(t)
	l.seeing = false
	l.clk.Advance(l.next)
	l.settle(t)
}

// start starts a sweeper with the default intervals on st and dl, with
// metrics of its own and a fake clock, and returns once its first tick is
// done. It is stopped at the test's end (Stop may be called more than once).
func start(t *testing.T, st *fakeStore, dl *deadLetters) (*sweeper.Sweeper, *metrics.Metrics, *loop) {
	t.Helper()
	m := metrics.New(prometheus.NewRegistry())
	clk := clock.NewFake(time.Now())
	clk.Set.Init()
	s := sweeper.New(sweeper.Deps{Store: st, Broker: dl, Metrics: m, Logger: testkit.Logger(t)},
		sweeper.Config{Replica: "r", Clock: clk})
	s.TestSignals.Init()
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	clk.Set.WaitOrTimeout(t) // the first tick's timer, due at once
	l := &loop{clk: clk}
	l.settle(t)
	return s, m, l
}

func TestOnlyTheLeaseHolderSweepsAndItGivesTheLeaseUpWhenItStops(t *testing.T) {
	t.Parallel()
	st := &fakeStore{lease: func() (bool, error) { return false, nil }}
	s, _, l := start(t, st, &deadLetters{})
	for i := range 3 {
		if i > 0 {
			l.tick(t)
		}
		if s.TestSignals.Lease.WaitOrTimeout(t) {
			t.Fatal("took a lease the store refused")
		}
	}
	if n := st.sweepCount(); n != 0 {
		t.Fatalf("a follower swept %d times", n)
	}
	st.setLease(func() (bool, error) { return true, nil })
	l.tick(t)
	if got := s.TestSignals.State.WaitOrTimeout(t); got != "leader" {
		t.Fatalf("state = %s, want leader", got)
	}
	if n := s.TestSignals.Swept.WaitOrTimeout(t); n != 1 {
		t.Fatalf("swept %d claims, want 1", n)
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !st.released {
		t.Error("the holder did not give the lease up on its way out")
	}
}

func TestAHolderThatCannotRenewStopsSweepingOnceItsLeaseRunsOut(t *testing.T) {
	t.Parallel()
	st := &fakeStore{lease: func() (bool, error) { return true, nil }}
	s, _, l := start(t, st, &deadLetters{})
	if got := s.TestSignals.State.WaitOrTimeout(t); got != "leader" {
		t.Fatalf("state = %s, want leader", got)
	}
	renewed := l.clk.Now() // the first tick took the lease
	// The database stops answering: the holder keeps its lease only until it
	// runs out by its own clock, since another replica may take it then.
	st.setLease(func() (bool, error) { return false, fault.New(fault.Unavailable, "connection refused") })
	const ttl = 15 * time.Second // the default LeaseTTL
	for !slices.Contains(s.TestSignals.State.Drain(), "follower") {
		if l.clk.Now().Sub(renewed) > 2*ttl {
			t.Fatalf("still the holder %s after its last renewal, with a lease of %s", l.clk.Now().Sub(renewed), ttl)
		}
		l.tick(t)
	}
	if held := l.clk.Now().Sub(renewed); held < ttl {
		t.Fatalf("gave the lease up %s after its last renewal, before it ran out (%s)", held, ttl)
	}
	swept := st.sweepCount()
	// Another replica holds it now.
	s.TestSignals.Lease.Drain() // the renewals before the outage
	st.setLease(func() (bool, error) { return false, nil })
	for range 3 {
		l.tick(t)
		if s.TestSignals.Lease.WaitOrTimeout(t) {
			t.Fatal("lease held without a renewal")
		}
	}
	if n := st.sweepCount(); n != swept {
		t.Errorf("swept %d more times after the lease ran out", n-swept)
	}
}

func TestAnExpiredBufferedMessageIsDeletedOnlyOnceItsDeadLetterIsConfirmed(t *testing.T) {
	t.Parallel()
	st := &fakeStore{lease: func() (bool, error) { return true, nil },
		expired: []store.BufferedMessage{{ID: 7, MessageID: "m-7"}, {ID: 8, MessageID: "m-8", Applied: true}}}
	dl := &deadLetters{err: errors.New("broker down")}
	_, _, l := start(t, st, dl)
	l.tick(t)
	l.tick(t) // three sweeps with the broker down
	st.mu.Lock()
	deleted := slices.Contains(st.deleted, 7)
	st.mu.Unlock()
	if deleted {
		t.Fatal("a buffered message deleted before its dead letter was confirmed")
	}
	dl.mu.Lock()
	dl.err = nil
	dl.mu.Unlock()
	l.tick(t)
	st.mu.Lock()
	deleted = slices.Contains(st.deleted, 7) && slices.Contains(st.deleted, 8)
	st.mu.Unlock()
	if !deleted {
		t.Fatal("the expired messages were not deleted by the sweep after the broker came back")
	}
	dl.mu.Lock()
	defer dl.mu.Unlock()
	if len(dl.got) != 1 || dl.got[0].MessageId != "m-7" {
		t.Fatalf("dead-lettered %v, want m-7 only (m-8 was applied by a copy)", dl.got)
	}
	if m := dl.got[0]; m.Exchange != "sutra.relays.dead" || m.Headers["x-sutra-code"] != fault.RelayUncorrelated {
		t.Errorf("dead letter %+v, want one to sutra.relays.dead with %s", m, fault.RelayUncorrelated)
	}
}

func TestOnlyTheLeaseHolderReportsTheCensus(t *testing.T) {
	t.Parallel()
	st := &fakeStore{lease: func() (bool, error) { return true, nil }}
	s, m, _ := start(t, st, &deadLetters{}) // the first tick swept and counted
	held := map[string]prometheus.Gauge{"outbox backlog": m.OutboxBacklog, "oldest claim age": m.ClaimOldestAge,
		"incidents open": m.IncidentsOpen, "dead-letter queue": m.DeadLetterMessages, "ship tasks open": m.TasksOpen.WithLabelValues("ship")}
	want := map[string]float64{"outbox backlog": 7, "oldest claim age": 3, "incidents open": 2, "dead-letter queue": 5, "ship tasks open": 4}
	for name, g := range held {
		if n := gauge(t, g); n != want[name] {
			t.Errorf("%s = %v on the holder, want %v", name, n, want[name])
		}
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	delete(held, "ship tasks open") // checked below: the series must be gone
	for name, g := range held {
		if n := gauge(t, g); n != 0 {
			t.Errorf("%s = %v after the lease was given up, want 0 (the new holder reports it)", name, n)
		}
	}
	series := make(chan prometheus.Metric, 8)
	m.TasksOpen.Collect(series)
	close(series)
	if n := len(series); n != 0 {
		t.Errorf("%d sutra_tasks_open series after the lease was given up, want none", n)
	}
}

// A topic whose last task ended leaves sutra_tasks_open at the next census,
// and the topics still open keep their series with the new counts.
func TestATopicLeavesTheOpenTasksGaugeWhenItsLastTaskEnds(t *testing.T) {
	t.Parallel()
	st := &fakeStore{lease: func() (bool, error) { return true, nil }, tasksOpen: map[string]int64{"ship": 4, "bill": 1}}
	_, m, l := start(t, st, &deadLetters{}) // the first tick swept and counted
	series := func() map[string]float64 {
		ch := make(chan prometheus.Metric, 8)
		m.TasksOpen.Collect(ch)
		close(ch)
		got := map[string]float64{}
		for metric := range ch {
			var d dto.Metric
			if err := metric.Write(&d); err != nil {
				t.Fatal(err)
			}
			got[d.GetLabel()[0].GetValue()] = d.GetGauge().GetValue()
		}
		return got
	}
	if got := series(); !maps.Equal(got, map[string]float64{"ship": 4, "bill": 1}) {
		t.Fatalf("sutra_tasks_open = %v, want ship = 4 and bill = 1", got)
	}
	st.setTasksOpen(map[string]int64{"ship": 2})
	l.tick(t)
	if got := series(); !maps.Equal(got, map[string]float64{"ship": 2}) {
		t.Errorf("sutra_tasks_open = %v, want only ship = 2 once bill has no task left", got)
	}
}

func gauge(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

func TestEachSweepTrimsRelayFailureCountsWithTheInboxRetention(t *testing.T) {
	t.Parallel()
	st := &fakeStore{lease: func() (bool, error) { return true, nil }}
	start(t, st, &deadLetters{}) // the first tick swept
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.attemptsTrimmed) == 0 || st.attemptsTrimmed[0] != 7*24*time.Hour {
		t.Fatalf("relay attempts trimmed with %v, want the inbox retention (7 days) on every sweep", st.attemptsTrimmed)
	}
}

func TestEachSweepKeepsThePartitionsByDayOnItsClockWithEachTablesRetention(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 12, 7, 23, 59, 0, 0, time.UTC))
	st := &fakeStore{lease: func() (bool, error) { return true, nil }, drops: make(chan partitionCall, 2)}
	s := sweeper.New(sweeper.Deps{Store: st, Broker: &deadLetters{}, Metrics: metrics.New(prometheus.NewRegistry()), Logger: testkit.Logger(t)},
		sweeper.Config{Replica: "r", Clock: clk, StepHistoryRetention: 5 * time.Hour})
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	<-st.drops
	<-st.drops
	st.mu.Lock()
	defer st.mu.Unlock()
	now := clk.Now()
	want := []partitionCall{{"inbox_days", now, 7 * 24 * time.Hour, 3}, {"step_history_days", now, 5 * time.Hour, 3}}
	if len(st.ensured) < 2 || !slices.Equal(st.ensured[:2], want) {
		t.Errorf("partitions created by %v, want %v", st.ensured, want)
	}
	for i := range want {
		want[i].ahead = 0
	}
	if len(st.droppedAt) < 2 || !slices.Equal(st.droppedAt[:2], want) {
		t.Errorf("partitions dropped by %v, want %v", st.droppedAt, want)
	}
}

// slowInbox is a store whose inbox of before the partitioning holds full
// batches of rows for its first moves, each statement taking 20ms on the
// clock.
type slowInbox struct {
	*fakeStore
	clk   *clock.Fake
	full  int
	calls chan int
}

func (s *slowInbox) MoveBeforeDays(_ context.Context, t store.DayTable, _ time.Time, _ time.Duration, limit int) (int64, int64, error) {
	if t != store.InboxDays {
		return 0, 0, nil
	}
	s.clk.Advance(20 * time.Millisecond)
	s.full--
	s.calls <- s.full
	if s.full >= 0 {
		return int64(limit), 0, nil
	}
	return 0, 0, nil
}

func TestATrimBacklogIsDeletedInPacedBatchesNotInOneBurst(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Now())
	clk.Set.Init()
	st := &slowInbox{fakeStore: &fakeStore{lease: func() (bool, error) { return true, nil }}, clk: clk, full: 2, calls: make(chan int, 8)}
	s := sweeper.New(sweeper.Deps{Store: st, Broker: &deadLetters{}, Metrics: metrics.New(prometheus.NewRegistry()), Logger: testkit.Logger(t)},
		sweeper.Config{Replica: "r", Clock: clk})
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	if d := clk.Set.WaitOrTimeout(t); d != 0 {
		t.Fatalf("first timer %v, want the first tick at once", d)
	}
	for batch := 1; batch <= 2; batch++ {
		<-st.calls
		// A full batch that took 20ms: the next waits three times that.
		if d := clk.Set.WaitOrTimeout(t); d != 60*time.Millisecond {
			t.Fatalf("after full batch %d the sweeper set a timer of %v, want a pause of 60ms", batch, d)
		}
		select {
		case <-st.calls:
			t.Fatalf("batch %d followed at once: no pause between trim batches", batch+1)
		default:
		}
		clk.Advance(60 * time.Millisecond)
	}
	<-st.calls // the short batch ends the trim
}

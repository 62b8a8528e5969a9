package usecase_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sutra-run/worker/api/taskwait"
	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/metrics"
	"github.com/sutra-run/worker/store"
	"github.com/sutra-run/worker/usecase"
)

// activation is a long poll (or stream) of one topic by worker "w".
func activation(topic string, max int, stopping <-chan struct{}) usecase.Activation {
	return usecase.Activation{Protocol: taskwait.EngineRest, Worker: "w", Asks: []store.TopicLock{{Topic: topic, LockDuration: time.Minute}},
		Max: max, Slots: taskwait.NewSlots(10, func(float64) {}), Full: func() error { return errors.New("full") }, Stopping: stopping}
}

// within waits for ch or fails the test.
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("no %s", what)
		panic("unreachable")
	}
}

// tasksOf counts the open tasks of topic.
func (b *bundle) tasksOf(t *testing.T, topic string) int {
	var n int
	if err := b.env.DB.QueryRow(testkit.Ctx(t), `SELECT count(*) FROM tasks WHERE type = $1`, topic).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestALongPollWaitsHoldingNoConnectionAndIsHandedTheTaskAStepCreates(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	waiting, idle := make(chan struct{}, 1), 0
	a := activation("lp", 5, nil)
	a.Wait = time.Minute
	a.Conn.Idle = func() { idle++ }
	a.Waiting = func(*taskwait.Waiter) { waiting <- struct{}{} }
	got := make(chan []store.LockedTask, 2)
	done := make(chan error, 1)
	go func() {
		done <- b.w.UseCases().Activate(testkit.Ctx(t), a, func(ts []store.LockedTask) error { got <- ts; return nil })
	}()
	within(t, waiting, "wait: the long poll found nothing")
	if idle != 1 {
		t.Errorf("the long poll waits having given its connection back %d times, want 1", idle)
	}
	b.start("i-1", "lp")
	ts := within(t, got, "answer")
	if len(ts) != 1 || ts[0].InstanceID != "i-1" || ts[0].Topic != "lp" {
		t.Fatalf("the long poll answered %+v, want the task of i-1", ts)
	}
	if err := within(t, done, "return"); err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Errorf("a long poll answered twice")
	}
}

func TestALongPollAnswersNothingWhenItsProtocolStopsAndItsCallerEnding(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	stopping := make(chan struct{})
	waiting := make(chan struct{}, 2)
	a := activation("none", 1, stopping)
	a.Wait = time.Hour
	a.Waiting = func(*taskwait.Waiter) { waiting <- struct{}{} }
	answers := 0
	done := make(chan error, 1)
	go func() {
		done <- b.w.UseCases().Activate(testkit.Ctx(t), a, func(ts []store.LockedTask) error {
			if len(ts) != 0 {
				t.Errorf("answered %d tasks, want none", len(ts))
			}
			answers++
			return nil
		})
	}()
	within(t, waiting, "wait")
	close(stopping)
	if err := within(t, done, "return"); err != nil || answers != 1 {
		t.Fatalf("a stopped long poll returned %v having answered %d times, want nil and 1", err, answers)
	}

	ctx, cancel := context.WithCancel(testkit.Ctx(t))
	a.Stopping = nil
	go func() {
		done <- b.w.UseCases().Activate(ctx, a, func([]store.LockedTask) error { answers++; return nil })
	}()
	within(t, waiting, "wait")
	cancel()
	if err := within(t, done, "return"); !errors.Is(err, context.Canceled) || answers != 1 {
		t.Fatalf("a long poll whose caller went returned %v having answered %d times, want context.Canceled and no answer", err, answers-1)
	}
}

func TestAStreamTakesABacklogOneTaskAtATimePassingItsWakeUpOn(t *testing.T) {
	t.Parallel()
	// No look: only the stream's own pass-on brings it back for the rest
	// of the backlog.
	b := setup(t, func(c *app.Config) { c.Tasks.PollInterval = time.Hour })
	// The backlog is there before the stream: every step that created a
	// task has committed and told the waiters (the lanes signal Committed
	// after their notify), so none is handed to the stream.
	committed := &b.w.Lanes().TestSignals.Committed
	committed.Init()
	for _, id := range []string{"s-1", "s-2", "s-3"} {
		b.start(id, "st")
	}
	for seen := map[string]bool{}; len(seen) < 3; {
		seen[committed.WaitOrTimeout(t)] = true
	}
	if n := b.tasksOf(t, "st"); n != 3 {
		t.Fatalf("%d tasks, want 3", n)
	}
	stopping := make(chan struct{})
	waiting := make(chan struct{}, 1)
	a := activation("st", 1, stopping)
	a.Stream = true
	a.Waiting = func(*taskwait.Waiter) { waiting <- struct{}{} }
	var batches [][]store.LockedTask
	done := make(chan error, 1)
	go func() {
		done <- b.w.UseCases().Activate(testkit.Ctx(t), a, func(ts []store.LockedTask) error {
			batches = append(batches, ts)
			return nil
		})
	}()
	within(t, waiting, "wait after the backlog")
	close(stopping)
	if err := within(t, done, "return"); err != nil {
		t.Fatal(err)
	}
	if len(batches) != 3 {
		t.Fatalf("the stream delivered %d batches, want 3 of one task", len(batches))
	}
	for _, ts := range batches {
		if len(ts) != 1 {
			t.Errorf("a batch of %d tasks, want 1", len(ts))
		}
	}
}

func TestWithEverySlotTakenALongPollFetchesOnceAndAStreamIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.start("f-1", "full")
	testkit.Eventually(t, 20*time.Second, "the task", func() bool { return b.tasksOf(t, "full") == 1 })
	full := errors.New("full")
	a := activation("full", 5, nil)
	a.Slots = taskwait.NewSlots(0, func(float64) {})
	a.Wait = time.Hour
	a.Waiting = func(*taskwait.Waiter) { t.Errorf("a long poll with no slot waited") }
	fulls := 0
	a.Full = func() error { fulls++; return nil }
	var got []store.LockedTask
	if err := b.w.UseCases().Activate(testkit.Ctx(t), a, func(ts []store.LockedTask) error { got = ts; return nil }); err != nil {
		t.Fatal(err)
	}
	if fulls != 1 || len(got) != 1 {
		t.Errorf("a long poll with no slot was told so %d times and answered %d tasks, want 1 and 1", fulls, len(got))
	}

	a.Stream, a.Full = true, func() error { return full }
	err := b.w.UseCases().Activate(testkit.Ctx(t), a, func([]store.LockedTask) error {
		t.Errorf("a refused stream delivered")
		return nil
	})
	if !errors.Is(err, full) {
		t.Errorf("a stream with no slot returned %v, want Full's error", err)
	}
}

func TestAStreamWhoseDeliveryFailsEndsWithThatError(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.start("d-1", "gone")
	testkit.Eventually(t, 20*time.Second, "the task", func() bool { return b.tasksOf(t, "gone") == 1 })
	gone := errors.New("client gone")
	a := activation("gone", 1, nil)
	a.Stream = true
	err := b.w.UseCases().Activate(testkit.Ctx(t), a, func([]store.LockedTask) error { return gone })
	if !errors.Is(err, gone) {
		t.Fatalf("returned %v, want the delivery's error", err)
	}
}

// A step that creates more jobs than the waiting streams have room for
// hands each stream one; the rest reach the streams as they take them, by
// hand-off, with no look for tasks (these waiters never look: they are not
// started) and no wait for the backstop interval.
func TestABacklogCreatedAtOnceReachesTheWaitingStreamsWithNoLook(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *app.Config) { c.Tasks.PollInterval = time.Hour })
	b.env.Deploy(t, "testdata/fanout.bpmn")
	const streams, jobs = 3, 12
	ws := taskwait.New(taskwait.Deps{Store: b.w.Store()}, taskwait.Config{})
	uc := usecase.New(usecase.Deps{Store: b.w.Store(), Metrics: metrics.New(prometheus.NewRegistry()), Waiters: ws}, usecase.Config{})
	stopping := make(chan struct{})
	waiting := make(chan struct{}, streams)
	got := make(chan store.LockedTask, jobs)
	done := make(chan error, streams)
	for range streams {
		a := activation("fan", 1, stopping)
		a.Stream = true
		var once sync.Once
		a.Waiting = func(*taskwait.Waiter) { once.Do(func() { waiting <- struct{}{} }) }
		go func() {
			done <- uc.Activate(testkit.Ctx(t), a, func(ts []store.LockedTask) error {
				for _, task := range ts {
					got <- task
				}
				return nil
			})
		}()
	}
	for range streams {
		within(t, waiting, "stream waiting")
	}
	// One step creates every job; this replica's lanes would hand them to
	// ws as they hand them to the worker's own waiters.
	committed := &b.w.Lanes().TestSignals.Committed
	committed.Init()
	items := make([]int, jobs)
	b.pub.Publish(testkit.Relay{MessageID: "start-fan", Body: map[string]any{"start": "fanout", "instance_id": "fan",
		"variables": map[string]any{"topic": "fan", "items": items}}})
	for committed.WaitOrTimeout(t) != "fan" {
	}
	rows, err := b.env.DB.Query(testkit.Ctx(t), `SELECT type, instance_id, token_id, element_id FROM tasks WHERE instance_id = 'fan'`)
	if err != nil {
		t.Fatal(err)
	}
	created, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.CreatedTask, error) {
		var c store.CreatedTask
		return c, r.Scan(&c.Topic, &c.InstanceID, &c.TokenID, &c.Element)
	})
	if err != nil || len(created) != jobs {
		t.Fatalf("%d tasks created (%v), want %d", len(created), err, jobs)
	}
	ws.Created(created)
	seen := map[string]bool{}
	for range jobs {
		task := within(t, got, "job delivered")
		if seen[task.TokenID] {
			t.Errorf("job %s delivered twice", task.TokenID)
		}
		seen[task.TokenID] = true
	}
	close(stopping)
	for range streams {
		if err := within(t, done, "stream's end"); err != nil {
			t.Error(err)
		}
	}
}

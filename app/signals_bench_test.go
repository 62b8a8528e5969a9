package app_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/internal/testkit/apptest"
	"github.com/sutra-run/worker/internal/testsignal"
)

// BenchmarkSignalBroadcast measures one broadcast of a signal 10,000
// instances wait for, from the call to every one of them stepped (and the
// one instance it starts): the broadcast writes a relay per instance to the
// outbox, page by page, and each is published, consumed and stepped under
// its own claim. The instances wait on a non-interrupting boundary event,
// so every broadcast reaches all of them again.
//
//	go test -run '^$' -bench SignalBroadcast -benchtime 3x ./app
func BenchmarkSignalBroadcast(b *testing.B) {
	const waiting = 10_000
	env := testkit.New(b)
	env.Deploy(b, "testdata/signals.bpmn")
	w, err := app.Start(testkit.Ctx(b), apptest.Config(env), app.Options{Logger: testkit.Logger(b), Registry: prometheus.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := w.Stop(context.Background()); err != nil {
			b.Log(err)
		}
	}()
	committed := &w.Lanes().TestSignals.Committed
	committed.Init()
	if err := w.Ready(testkit.Ctx(b)); err != nil {
		b.Fatal(err)
	}
	relays := make([]testkit.Relay, waiting)
	for i := range relays {
		relays[i] = startOf("sig-notify", fmt.Sprintf("n-%d", i), nil)
	}
	env.Publisher(b).Publish(relays...)
	awaitCommits(b, committed, waiting)

	var written time.Duration
	b.ResetTimer()
	for i := range b.N {
		began := time.Now()
		reach, err := w.Store().BroadcastSignal(testkit.Ctx(b), fmt.Sprintf("bench-%d", i), "alarm", nil)
		if err != nil || reach.Subscriptions != waiting || reach.Starts != 1 {
			b.Fatalf("broadcast reached %+v, %v", reach, err)
		}
		written += time.Since(began)
		awaitCommits(b, committed, waiting+reach.Starts)
	}
	b.ReportMetric(float64(waiting*b.N)/b.Elapsed().Seconds(), "instances/s")
	// The broadcast call alone: its relays durable in the outbox.
	b.ReportMetric(float64(written.Milliseconds())/float64(b.N), "broadcast-ms/op")
}

// awaitCommits waits for n steps committed.
func awaitCommits(b *testing.B, committed *testsignal.Signal[string], n int) {
	b.Helper()
	for range n {
		if _, ok := committed.Wait(testsignal.Timeout); !ok {
			b.Fatalf("a step did not commit within %s", testsignal.Timeout)
		}
	}
}

package startstop

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStopIsSafeBeforeStartAndTwiceAndStartAfterStopIsRefused(t *testing.T) {
	var b Base
	if err := b.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.Stopped():
	default:
		t.Fatal("Stopped not closed by a Stop before Start")
	}
	if err := b.Run(context.Background(), "test", func(_, _ context.Context) {}); err == nil {
		t.Fatal("Run after Stop succeeded")
	}
}

func TestSoftStopLetsTheLoopFinishItsWork(t *testing.T) {
	var b Base
	finished := make(chan struct{})
	if err := b.Run(context.Background(), "test", func(soft, hard context.Context) {
		<-soft.Done()
		if hard.Err() != nil {
			t.Error("hard context cancelled on a soft stop")
		}
		close(finished)
	}); err != nil {
		t.Fatal(err)
	}
	<-b.Started()
	if err := b.Run(context.Background(), "test", func(_, _ context.Context) {}); err == nil {
		t.Fatal("second Run succeeded")
	}
	if err := b.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-finished:
	default:
		t.Fatal("Stop returned before the loop did")
	}
	if err := b.Stop(context.Background()); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

func TestStopCancelsTheHardContextAtItsDeadline(t *testing.T) {
	var b Base
	if err := b.Run(context.Background(), "test", func(_, hard context.Context) {
		<-hard.Done() // work that only gives up when forced
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the deadline has passed
	err := b.Stop(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop = %v, want the deadline's error", err)
	}
	<-b.Stopped()
}

func TestStopGivesUpOnALoopThatIgnoresItsHardContext(t *testing.T) {
	var b Base
	release := make(chan struct{})
	if err := b.Run(context.Background(), "stuck", func(_, _ context.Context) { <-release }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	began := time.Now()
	err := b.Stop(ctx)
	if !errors.Is(err, ErrAbandoned) {
		t.Fatalf("Stop = %v, want ErrAbandoned", err)
	}
	if took := time.Since(began); took < Grace {
		t.Fatalf("Stop abandoned the loop after %s, before its grace", took)
	}
	close(release) // let goleak see the goroutine end
	<-b.Stopped()
}

func TestStopAllParallelStopsEveryServiceWithinOneDeadline(t *testing.T) {
	var a, b Base
	for _, s := range []*Base{&a, &b} {
		if err := s.Run(context.Background(), "svc", func(_, hard context.Context) { <-hard.Done() }); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := StopAllParallel(ctx, svc{&a}, svc{&b})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("StopAllParallel = %v", err)
	}
	<-a.Stopped()
	<-b.Stopped()
}

// svc is a Service whose loop the test started by hand.
type svc struct{ *Base }

func (svc) Start(context.Context) error { return nil }

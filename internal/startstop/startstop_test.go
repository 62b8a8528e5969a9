package startstop

import (
	"context"
	"testing"

	"go.uber.org/goleak"
)

func TestStopIsSafeBeforeStartAndTwiceAndWaitsForTheLoop(t *testing.T) {
	defer goleak.VerifyNone(t)
	var l Loop
	l.Stop() // before Start: nothing to do
	returned := false
	if err := l.Start(context.Background(), "test", func(ctx context.Context) {
		<-ctx.Done()
		returned = true
	}); err != nil {
		t.Fatal(err)
	}
	if err := l.Start(context.Background(), "test", func(context.Context) {}); err == nil {
		t.Fatal("second Start succeeded")
	}
	l.Stop()
	if !returned {
		t.Fatal("Stop returned before the loop did")
	}
	l.Stop()
}

package clock_test

import (
	"testing"
	"time"

	"github.com/sutra-run/worker/internal/clock"
)

func TestAFakeTimerFiresOnlyOnceTheClockReachesIt(t *testing.T) {
	f := clock.NewFake(time.Unix(0, 0))
	f.Set.Init()
	tm := f.NewTimer(time.Second)
	if d := f.Set.WaitOrTimeout(t); d != time.Second {
		t.Fatalf("Set carried %s, want 1s", d)
	}
	f.Advance(999 * time.Millisecond)
	select {
	case <-tm.C():
		t.Fatal("fired before its time")
	default:
	}
	f.Advance(time.Millisecond)
	if at := <-tm.C(); !at.Equal(time.Unix(1, 0)) {
		t.Fatalf("fired at %s, want the clock's time", at)
	}
	f.Advance(time.Hour)
	select {
	case <-tm.C():
		t.Fatal("fired twice")
	default:
	}
}

func TestAResetFakeTimerNeverDeliversAStaleTick(t *testing.T) {
	f := clock.NewFake(time.Unix(0, 0))
	tm := f.NewTimer(0) // due at once: its tick waits in the channel
	tm.Reset(time.Minute)
	select {
	case <-tm.C():
		t.Fatal("a tick from before the Reset was delivered")
	default:
	}
	tm.Stop()
	f.Advance(time.Hour)
	select {
	case <-tm.C():
		t.Fatal("a stopped timer fired")
	default:
	}
}

func TestAFakeAfterFuncRunsOnceDueAndNeverOnceStopped(t *testing.T) {
	f := clock.NewFake(time.Unix(0, 0))
	var ran []string
	f.AfterFunc(time.Second, func() { ran = append(ran, "due") })
	stop := f.AfterFunc(time.Second, func() { ran = append(ran, "stopped") })
	f.AfterFunc(0, func() { ran = append(ran, "at once") })
	if len(ran) != 1 || ran[0] != "at once" {
		t.Fatalf("before the clock moved: %v, want only the one due at once", ran)
	}
	if !stop() {
		t.Fatal("stop of a pending func reported it had not been pending")
	}
	f.Advance(999 * time.Millisecond)
	if len(ran) != 1 {
		t.Fatalf("ran before its time: %v", ran)
	}
	f.Advance(time.Millisecond)
	f.Advance(time.Hour)
	if len(ran) != 2 || ran[1] != "due" {
		t.Fatalf("after its time: %v, want the due func once and the stopped one never", ran)
	}
	if stop() {
		t.Fatal("a second stop reported the func pending")
	}
}

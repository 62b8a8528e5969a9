package testsignal_test

import (
	"sync/atomic"
	"testing"

	"github.com/sutra-run/worker/internal/testsignal"
)

func TestUntilChecksTheConditionAfterEachSignalAndNotBefore(t *testing.T) {
	var s testsignal.Signal[int]
	s.Init()
	var n atomic.Int32
	checks := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 3 {
			n.Add(1)
			s.Signal(int(n.Load()))
		}
	}()
	s.Until(t, "three events", func() bool { checks++; return n.Load() == 3 })
	<-done
	if checks > 4 {
		t.Errorf("the condition was checked %d times for three signals: Until polled", checks)
	}
}

func TestASignalThatWasNotInitedRecordsNothing(t *testing.T) {
	var s testsignal.Signal[int]
	s.Signal(1)
	if got := s.Drain(); len(got) != 0 {
		t.Fatalf("an inert signal recorded %v", got)
	}
}

package backoff

import (
	"testing"
	"time"
)

func TestDelayDoublesPerAttemptUpToTheCapWithBoundedJitter(t *testing.T) {
	for n, want := range map[int]time.Duration{1: 50 * time.Millisecond, 2: 100 * time.Millisecond, 4: 400 * time.Millisecond, 7: 2 * time.Second, 100: 2 * time.Second} {
		for range 100 {
			d := Delay(50*time.Millisecond, 2*time.Second, n)
			if d < want*8/10 || d > want*12/10 {
				t.Fatalf("attempt %d: delay %v, want %v ±20%%", n, d, want)
			}
		}
	}
}

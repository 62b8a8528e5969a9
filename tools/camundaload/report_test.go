package main

import (
	"testing"
	"time"
)

// samples are a run's samples every 5 s over window, active(t) instances
// active at t.
func samples(window time.Duration, active func(t float64) int) []sample {
	var out []sample
	for at := 5 * time.Second; at <= window; at += 5 * time.Second {
		out = append(out, sample{at: at, rootsActive: active(at.Seconds()) / 51, childrenActive: active(at.Seconds()) - active(at.Seconds())/51})
	}
	return out
}

func TestBacklogFlatWhenTheWorkerKeepsUp(t *testing.T) {
	window := 2 * time.Minute
	steady := samples(window, func(t float64) int { return 150 + int(t)%7 })
	if s := backlogSlope(steady, window); !flat(s, 2) {
		t.Fatalf("a steady backlog: slope %.2f not flat", s)
	}
	// Two roots a second offered, one and a half done: half a root (25.5
	// instances) a second piles up.
	growing := samples(window, func(t float64) int { return 150 + int(25.5*t) })
	if s := backlogSlope(growing, window); flat(s, 2) || s < 0.45 || s > 0.55 {
		t.Fatalf("a growing backlog: slope %.2f", s)
	}
}

func TestSecondHalfRateLeavesTheRampOut(t *testing.T) {
	var ss []sample
	for at := 5 * time.Second; at <= 2*time.Minute; at += 5 * time.Second {
		done := 0
		if at > 10*time.Second { // the first roots end after 10 s, then 2 a second
			done = int(2 * (at - 10*time.Second).Seconds())
		}
		ss = append(ss, sample{at: at, rootsDone: done})
	}
	r := result{duration: 2 * time.Minute, samples: ss}
	if got := r.secondHalf(rootsDone); got != 2 {
		t.Fatalf("roots/s over the second half: %v, want 2", got)
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	if p := percentile(d, 0.99); p != 100*time.Millisecond {
		t.Fatalf("p99 %v", p)
	}
	if p := percentile(d, 0.5); p != 51*time.Millisecond {
		t.Fatalf("p50 %v", p)
	}
	if p := percentile(nil, 0.99); p != 0 {
		t.Fatalf("empty: %v", p)
	}
}

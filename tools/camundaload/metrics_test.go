package main

import (
	"testing"
	"time"
)

func TestHistogramDeltaAndQuantile(t *testing.T) {
	before := hist{count: 10, sum: 1, bounds: []float64{0.001, 0.01, 0.1}, cum: []float64{10, 10, 10}}
	// 100 more: 90 under 1 ms, 9 under 10 ms, 1 under 100 ms.
	after := hist{count: 110, sum: 1.2, bounds: []float64{0.001, 0.01, 0.1}, cum: []float64{100, 109, 110}}
	d := after.minus(before)
	if d.count != 100 || d.mean().Round(time.Microsecond) != 2*time.Millisecond {
		t.Fatalf("delta: %+v, mean %v", d, d.mean())
	}
	if q := d.quantile(0.5); q != (bound{d: time.Millisecond}) || q.String() != "≤ 1ms" {
		t.Fatalf("p50 %v", q)
	}
	if q := d.quantile(0.99); q != (bound{d: 10 * time.Millisecond}) {
		t.Fatalf("p99 %v", q)
	}
	if q := d.quantile(1); q != (bound{d: 100 * time.Millisecond}) {
		t.Fatalf("max %v", q)
	}
	// Past the last bucket (the +Inf one is not in the exposition's
	// bounds): over the largest bound.
	d.cum[2] = 99
	if q := d.quantile(1); q != (bound{d: 100 * time.Millisecond, over: true}) || q.String() != "> 100ms" {
		t.Fatalf("past the buckets: %v", q)
	}
}

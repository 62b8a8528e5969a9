package main

import (
	"math"
	"testing"
	"time"
)

// The budget of a step: 70% of a batch ceiling that spends 140 µs a step
// allows 200; of the worker's 300 µs a step the floor's client (30) is the
// load generator's, the rest of its client (80 - 30) its own.
func TestStepBudgetSplitsAWorkerStepAgainstSeventyPercentOfTheBatchCeiling(t *testing.T) {
	us := func(n int) time.Duration { return time.Duration(n) * 1000 * time.Microsecond }
	batch := result{kind: "batch", steps: 1000, perSecond: 10000, cpu: cpuUse{machine: us(140), client: us(10), postgres: us(130)}}
	floor := result{kind: "floor", steps: 1000, perSecond: 20000, cpu: cpuUse{machine: us(100), client: us(30), broker: us(70)}}
	worker := result{kind: "worker", steps: 1000, perSecond: 5000, cpu: cpuUse{machine: us(300), client: us(80), broker: us(100), postgres: us(110), foreign: us(4)}}
	b, ok := stepBudget(floor, worker, batch)
	if !ok {
		t.Fatal("no budget from three measured runs")
	}
	want := budget{allowed: 200, broker: 100, load: 30, postgres: 110, own: 50, kernel: 10, cores: 1.5, batchCores: 1.4}
	for _, f := range []struct {
		name      string
		got, want float64
	}{
		{"allowed", b.allowed, want.allowed}, {"broker", b.broker, want.broker}, {"load", b.load, want.load},
		{"postgres", b.postgres, want.postgres}, {"own", b.own, want.own}, {"kernel", b.kernel, want.kernel},
		{"cores", b.cores, want.cores}, {"batch cores", b.batchCores, want.batchCores},
	} {
		if math.Abs(f.got-f.want) > 1e-9 {
			t.Errorf("%s = %v, want %v", f.name, f.got, f.want)
		}
	}
	if _, ok := stepBudget(result{}, worker, batch); ok {
		t.Error("a budget without the broker floor")
	}
}

package main

import (
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// soakOf is a soak of n one-minute intervals whose p99, instances size and RSS
// follow the given functions of the interval index, plus the drain's.
func soakOf(n int, p99 func(int) time.Duration, size func(int) int64, rss func(int) float64) report {
	c := config{Rate: rate{value: 3000}, MaxP99: 50 * time.Millisecond, MaxDrift: 1.5, MaxGrow: 1.25}
	var ss []sample
	for i := range n + 1 {
		ss = append(ss, sample{elapsed: time.Duration(i+1) * time.Minute, p99: p99(i), rss: rss(i),
			tables: map[string]table{"instances": {heap: size(i)}}})
	}
	return report{config: c, rate: 3000, samples: ss, drained: 100 * time.Millisecond}
}

func missed(r report) []string {
	var out []string
	for _, t := range r.targets() {
		if !t.met {
			out = append(out, t.name)
		}
	}
	return out
}

func TestAFlatSoakMeetsEveryTarget(t *testing.T) {
	r := soakOf(10, func(int) time.Duration { return 20 * time.Millisecond }, func(int) int64 { return 50 << 20 }, func(int) float64 { return 40 << 20 })
	if m := missed(r); len(m) != 0 {
		t.Fatalf("missed %v", m)
	}
}

func TestASoakWhoseLatencyOrTablesOrMemoryGrowMissesItsTargets(t *testing.T) {
	flat := func(int) time.Duration { return 20 * time.Millisecond }
	for name, tc := range map[string]struct {
		r    report
		want string
	}{
		"p99 rises": {soakOf(10, func(i int) time.Duration { return time.Duration(10+4*i) * time.Millisecond },
			func(int) int64 { return 50 << 20 }, func(int) float64 { return 40 << 20 }), "p99 flat"},
		"p99 over the bound once": {soakOf(10, func(i int) time.Duration {
			if i == 5 {
				return 80 * time.Millisecond
			}
			return 20 * time.Millisecond
		}, func(int) int64 { return 50 << 20 }, func(int) float64 { return 40 << 20 }), "worst interval"},
		"instances grows": {soakOf(10, flat, func(i int) int64 { return int64(50+20*i) << 20 }, func(int) float64 { return 40 << 20 }), "size of instances"},
		"RSS grows":       {soakOf(10, flat, func(int) int64 { return 50 << 20 }, func(i int) float64 { return float64(40+10*i) * (1 << 20) }), "RSS"},
	} {
		t.Run(name, func(t *testing.T) {
			m := missed(tc.r)
			if len(m) != 1 || !strings.Contains(m[0], tc.want) {
				t.Fatalf("missed %v, want only %q", m, tc.want)
			}
		})
	}
}

func TestTooShortASoakIsNotJudgedFlat(t *testing.T) {
	r := soakOf(2, func(int) time.Duration { return time.Millisecond }, func(int) int64 { return 1 }, func(int) float64 { return 1 })
	if m := missed(r); len(m) != 1 {
		t.Fatalf("missed %v, want the one saying there are too few intervals", m)
	}
}

func TestThePlotIsAPNGEvenWithASpikeAndAnEmptyInterval(t *testing.T) {
	r := soakOf(10, func(i int) time.Duration {
		switch i {
		case 3:
			return 5 * time.Second
		case 4:
			return 0 // an interval with no commit
		}
		return 30 * time.Millisecond
	}, func(int) int64 { return 50 << 20 }, func(int) float64 { return 40 << 20 })
	plotDecodes(t, r)
}

// A soak no longer than one interval has only its drain to plot (its
// report says it is too short to judge); the log axis of an empty plot
// panicked.
func TestThePlotOfASoakOfOneIntervalIsAPNG(t *testing.T) {
	plotDecodes(t, soakOf(0, func(int) time.Duration { return 30 * time.Millisecond },
		func(int) int64 { return 50 << 20 }, func(int) float64 { return 40 << 20 }))
}

func plotDecodes(t *testing.T, r report) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "soak.png")
	if err := writePlot(path, r.samples, r.config); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Fatalf("soak.png: %v", err)
	}
}

func TestPercentileInterpolatesAsPostgresPercentileCont(t *testing.T) {
	ms := func(n ...int) []time.Duration {
		var out []time.Duration
		for _, x := range n {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	for _, tc := range []struct {
		sorted []time.Duration
		q      float64
		want   time.Duration
	}{
		{nil, 0.99, 0},
		{ms(7), 0.99, 7 * time.Millisecond},
		{ms(1, 2, 3, 4), 0.5, 2500 * time.Microsecond}, // SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY x) FROM (VALUES (1),(2),(3),(4)) v(x): 2.5
		{ms(0, 100), 0.99, 99 * time.Millisecond},
		{ms(1, 2, 3), 1, 3 * time.Millisecond},
	} {
		if got := percentile(tc.sorted, tc.q); got != tc.want {
			t.Errorf("percentile(%v, %v) = %v, want %v", tc.sorted, tc.q, got, tc.want)
		}
	}
}

package feel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sutra-run/worker/fault"
)

// doubling is {p0: [x, x], p1: [p0, p0], …, p<n>: [p<n-1>, p<n-1>]}: a
// context of 2n+2 list items whose last entry, written out, holds x 2^(n+1)
// times.
func doubling(p, x string, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "{%s0: [%s, %s]", p, x, x)
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, ", %s%d: [%s%d, %s%d]", p, i, p, i-1, p, i-1)
	}
	b.WriteString("}")
	return b.String()
}

// measure runs f and returns the bytes it allocated and how long it took.
func measure(f func()) (allocated uint64, took time.Duration) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	f()
	took = time.Since(start)
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc, took
}

// wantLimit checks that err is a *LimitError of limit ("": steps or bytes,
// whichever comes first), naming the limit and the expression.
func wantLimit(t *testing.T, err error, limit, src string) {
	t.Helper()
	var le *LimitError
	if !errors.As(err, &le) || le.Limit != limit && (limit != "" || le.Limit == LimitDeadline) {
		t.Fatalf("error = %v, want the limit %q", err, limit)
	}
	// The expression is quoted whole up to maxQuoted characters, cut after.
	head := strings.TrimSuffix(fmt.Sprintf("%q", src[:min(len(src), maxQuoted)]), `"`)
	if msg := err.Error(); !strings.Contains(msg, le.Limit) || !strings.Contains(msg, head) || len(msg) > 2*maxQuoted+200 {
		t.Fatalf("error %q does not name the limit %s and the expression, briefly", msg, le.Limit)
	}
}

// TestBlowupsStopAtTheirLimitQuicklyWithBoundedMemory evaluates each shape
// of the reported blowups under small limits, where an uncharged copy,
// walk or loop would allocate or run far past them, and requires the limit
// error with an allocation and a time bounded by the budget.
func TestBlowupsStopAtTheirLimitQuicklyWithBoundedMemory(t *testing.T) {
	const maxBytes = 1 << 20
	lim := Limits{MaxSteps: 1 << 16, MaxBytes: maxBytes}
	s4k := strings.Repeat("x", 4<<10)
	s1m := strings.Repeat("y", 1<<20)
	tests := []struct {
		name  string
		src   string
		vars  map[string]any
		limit string
	}{
		// Uncharged leaf bytes: 4 KiB written 2^14 times is 64 MiB in about
		// 30k nodes.
		{"string() of a context doubling a string", "=string(" + doubling("b", "s", 12) + ")", map[string]any{"s": s4k}, ""},
		// Uncharged list literals and an unbudgeted result walk: 2^22 items.
		{"nested list literals returned", "=" + doubling("a", "x", 20) + ".a20", map[string]any{"x": 1.0}, ""},
		// A string's items shared by a result: 4 KiB, 2^10 times, in 2k items.
		{"a result of shared strings", "=" + doubling("a", "s", 9) + ".a9", map[string]any{"s": s4k}, LimitBytes},
		// Work per iteration uncharged: 1 MiB scanned 4,000 times.
		{"a loop over a large string", "=for i in 1..4000 return string length(s)", map[string]any{"s": s1m}, LimitSteps},
		{"a loop comparing large strings", "=for i in 1..4000 return s = t", map[string]any{"s": s1m, "t": s1m + ""}, LimitSteps},
		{"min of large strings", "=min(for i in 1..4000 return s)", map[string]any{"s": s1m}, LimitSteps},
		{"distinct values of large strings", "=distinct values(for i in 1..4000 return s)", map[string]any{"s": s1m}, LimitSteps},
		// Matches listed before they are charged: 1M of them.
		{"split on the empty pattern", `=split(s, "")`, map[string]any{"s": s1m}, LimitSteps},
		{"a loop over a billion years of days", `=for d in date(s)..@"999999999-12-31" return 1`, map[string]any{"s": "-999999999-01-01"}, LimitSteps},
		{"replace every position", `=replace(s, "", "ab")`, map[string]any{"s": s1m}, LimitSteps},
		// Matching runs in time of the input times the pattern: 256 KiB
		// against 500 character classes.
		{"a long pattern over a large string", `=matches(s, p)`, map[string]any{"s": s1m[:256<<10], "p": strings.Repeat("[xy]", 500) + "z"}, LimitSteps},
	}
	// Work no step counts: the digits of a 1 MiB duration took 8s to read.
	t.Run("a duration of a million digits", func(t *testing.T) {
		e := MustCompile(`=duration(s)`)
		var err error
		_, took := measure(func() {
			_, err = e.EvalIn(map[string]any{"s": "P" + strings.Repeat("9", 1<<20) + "D"}, Env{Limits: lim})
		})
		if err == nil || !strings.Contains(err.Error(), "too large") || took > time.Second {
			t.Errorf("error %.100v after %v, want a duration too large at once", err, took)
		}
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := MustCompile(tt.src)
			var err error
			allocated, took := measure(func() { _, err = e.EvalIn(tt.vars, Env{Limits: lim}) })
			wantLimit(t, err, tt.limit, tt.src)
			// The budget, plus what the few uncharged allocations of each
			// charge (boxed numbers, slice growth) may add, plus the error.
			if allocated > 8*maxBytes {
				t.Errorf("allocated %d bytes under a budget of %d", allocated, maxBytes)
			}
			if took > 2*time.Second {
				t.Errorf("took %v to hit the limit", took)
			}
		})
	}
}

// TestTheReportedBlowupsStopAtTheDefaultLimits runs the issue's own inputs
// at the default limits.
func TestTheReportedBlowupsStopAtTheDefaultLimits(t *testing.T) {
	s40k := strings.Repeat("s", 40<<10)
	s1m := strings.Repeat("y", 1<<20)
	tests := []struct {
		src  string
		vars map[string]any
	}{
		{"=string(" + doubling("b", "s", 40) + ")", map[string]any{"s": s40k}},
		{"=" + doubling("a", "x", 40), map[string]any{"x": "x"}},
		{"=for i in 1..400000 return string length(s)", map[string]any{"s": s1m}},
	}
	for _, tt := range tests {
		t.Run(tt.src[:min(len(tt.src), 40)], func(t *testing.T) {
			e := MustCompile(tt.src)
			var err error
			allocated, took := measure(func() { _, err = e.EvalIn(tt.vars, Env{}) })
			if !IsLimit(err) {
				t.Fatalf("error = %v, want a limit", err)
			}
			if allocated > 8*DefaultMaxBytes || took > 5*time.Second {
				t.Errorf("allocated %d bytes in %v", allocated, took)
			}
		})
	}
}

// TestAResultNestedTooDeeplyForJSONIsAnError: a loop nests a list per
// iteration within the limits; stored, it would be a document no JSON
// decoder reads back.
func TestAResultNestedTooDeeplyForJSONIsAnError(t *testing.T) {
	e := MustCompile(`=(for i in 1..n return [partial[-1]])[-1]`)
	_, err := e.Eval(map[string]any{"n": 20000.0})
	if err == nil || !strings.Contains(err.Error(), "more than 1000 levels deep") {
		t.Fatalf("error = %v, want the result refused as nested too deeply", err)
	}
	v, err := e.Eval(map[string]any{"n": 999.0})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(v)
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("a result 999 deep does not read back: %v", err)
	}
}

func TestAConstantOverTheLimitsIsRefusedAtCompileNamingTheLimit(t *testing.T) {
	src := `=string(` + doubling("b", `"`+strings.Repeat("c", 1000)+`"`, 40) + `)`
	_, err := Compile(src)
	if !fault.HasCode(err, fault.IncidentExpressionLimit) || !IsLimit(err) || !strings.Contains(err.Error(), "SUTRA_FEEL_MAX_") || len(err.Error()) > 1000 {
		t.Fatalf("Compile = %.2000v, want %s naming the limit and the expression's start", err, fault.IncidentExpressionLimit)
	}
	// One that fits is a constant like any other.
	if _, err := Compile(`=string(` + doubling("b", `"c"`, 4) + `)`); err != nil {
		t.Fatal(err)
	}
}

func TestEachLimitIsTheOneConfigured(t *testing.T) {
	e := MustCompile(`=for i in 1..n return "ab" + string(i)`)
	vars := map[string]any{"n": 1000.0}
	if _, err := e.EvalIn(vars, Env{}); err != nil {
		t.Fatalf("at the defaults: %v", err)
	}
	_, err := e.EvalIn(vars, Env{Limits: Limits{MaxSteps: 1000}})
	wantLimit(t, err, LimitSteps, e.Source())
	_, err = e.EvalIn(vars, Env{Limits: Limits{MaxBytes: 10000}})
	wantLimit(t, err, LimitBytes, e.Source())
}

func TestAPassedDeadlineCutsTheEvaluationOffAndACancelStopsIt(t *testing.T) {
	e := MustCompile(`=for i in 1..100000 return i * 2`)
	past, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	_, err := e.EvalIn(nil, Env{Ctx: past})
	wantLimit(t, err, LimitDeadline, e.Source())

	stopped, stop := context.WithCancelCause(context.Background())
	cause := errors.New("stopping")
	stop(cause)
	_, err = e.EvalIn(nil, Env{Ctx: stopped})
	if IsLimit(err) || !errors.Is(err, cause) {
		t.Fatalf("cancelled: error = %v, want the cause, not a limit", err)
	}
	// A live context changes nothing.
	if _, err := e.EvalIn(nil, Env{Ctx: context.Background()}); err != nil {
		t.Fatal(err)
	}
}

// TestADeadlinePassingMidEvaluationCutsItOff: the deadline is looked at as
// steps are charged, not only when the evaluation starts.
func TestADeadlinePassingMidEvaluationCutsItOff(t *testing.T) {
	e := MustCompile(`=for i in 1..n, j in 1..1000 return substring("abcdef", 2, 3)`)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := e.EvalIn(map[string]any{"n": 1e5}, Env{Ctx: ctx, Limits: Limits{MaxSteps: 1 << 40, MaxBytes: 1 << 40}})
	wantLimit(t, err, LimitDeadline, e.Source())
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("cut off after %v", took)
	}
}

package feel

import (
	"context"
	"testing"
	"time"

	"github.com/sutra-run/worker/fault"
)

func TestUnaryTests(t *testing.T) {
	vars := map[string]any{"limit": 10.0, "names": []any{"a", "b"}}
	cases := []struct {
		src  string
		x    any
		want bool
	}{
		{"-", nil, true},
		{"-", 3.0, true},
		{"", "x", true},
		{"<5", 3.0, true},
		{"<5", 5.0, false},
		{">= 18", 18.0, true},
		{"[1..5]", 5.0, true},
		{"= 5", 5.0, true},
		{"= limit", 5.0, false},
		{"!= 5", 5.0, false},
		{`!= "a"`, nil, true},
		{"[[1..2], (4..6]]", 6.0, true},
		{"[[1..2], (4..6]]", 4.0, false},
		{"[[1..2], [limit..11]]", 10.0, true},
		{"[1, 2], 3", 2.0, true}, // a list, not intervals: 2 is in it
		{"[1..5)", 5.0, false},
		{"]1..5]", 1.0, false},
		{`"High"`, "High", true},
		{`"Medium","Low"`, "Low", true},
		{`"Medium","Low"`, "High", false},
		{`not("High")`, "High", false},
		{`not("High")`, "Low", true},
		{`not("a", "b")`, "c", true},
		{`not(<5)`, 7.0, true},
		{"< limit", 9.0, true},
		{"names", "b", true},
		{"true", true, true},
		{"false", true, false},
		{"null", nil, true},
		// A value the test cannot compare does not match, and does not fail.
		{"<5", nil, false},
		{"<5", "x", false},
		{`not(<5)`, nil, true},
		{"1, <5", nil, false},
		// "?" is the value tested, in one boolean expression.
		{"? > 5 and ? < 10", 7.0, true},
		{"? > 5 and ? < 10", 12.0, false},
		{"? < limit", 9.0, true},
		{`contains(?, "b")`, "abc", true},
		{`not(? = "a")`, "a", false},
		{`? = "what?"`, "what?", true},
		{"? > 5", nil, false},
		{"? + 1", 1.0, false},
	}
	for _, c := range cases {
		u, err := CompileUnaryTests(c.src)
		if err != nil {
			t.Errorf("CompileUnaryTests(%q): %v", c.src, err)
			continue
		}
		got, err := u.Test(c.x, vars, Env{})
		if err != nil || got != c.want {
			t.Errorf("%q on %v = %v, %v; want %v", c.src, c.x, got, err, c.want)
		}
		if u.Source() != c.src {
			t.Errorf("Source() = %q, want %q", u.Source(), c.src)
		}
	}
}

func TestUnaryTestsRefused(t *testing.T) {
	for _, src := range []string{"<", "[1..", "1,", `"a" "b"`, "not(1) 2", "x **", "? >", "?? 1"} {
		if _, err := CompileUnaryTests(src); !fault.HasCode(err, fault.BPMNExpression) {
			t.Errorf("CompileUnaryTests(%q) = %v, want %s", src, err, fault.BPMNExpression)
		}
	}
}

// A test over a large variable is bounded by the same limits as any
// expression, and by the deadline.
func TestUnaryTestsLimits(t *testing.T) {
	big := make([]any, 5000)
	for i := range big {
		big[i] = float64(i)
	}
	u, err := CompileUnaryTests("l")
	if err != nil {
		t.Fatal(err)
	}
	_, err = u.Test(-1.0, map[string]any{"l": big}, Env{Limits: Limits{MaxSteps: 100}})
	wantLimit(t, err, LimitSteps, "l")
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	_, err = u.Test(-1.0, map[string]any{"l": big}, Env{Ctx: ctx})
	wantLimit(t, err, LimitDeadline, "l")
}

// A cancelled context stops a test with an error, never a miss.
func TestUnaryTestsCancelled(t *testing.T) {
	big := make([]any, 5000)
	u, err := CompileUnaryTests("l")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := u.Test(-1.0, map[string]any{"l": big}, Env{Ctx: ctx}); err == nil || IsLimit(err) {
		t.Fatalf("error = %v, want the cancellation", err)
	}
}

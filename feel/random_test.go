package feel

import (
	"math"
	"strings"
	"testing"
)

func TestRandomNumber(t *testing.T) {
	eval := func(src, seed string) any {
		t.Helper()
		v, err := MustCompile(src).EvalIn(vars(), Env{Now: testNow, Seed: seed})
		if err != nil {
			t.Fatalf("%s with seed %q: %v", src, seed, err)
		}
		return v
	}
	one, ok := eval(`=random number()`, "i-1/2/Task_1/t3").(float64)
	if !ok || one < 0 || one >= 1 {
		t.Fatalf("random number() = %v, want a number in [0, 1)", one)
	}
	if again := eval(`=random number()`, "i-1/2/Task_1/t3"); again != one {
		t.Errorf("the same seed gave %v then %v: a step run again must compute the same", one, again)
	}
	if other := eval(`=random number()`, "i-1/3/Task_1/t3"); other == one {
		t.Errorf("another step gave the same number %v", one)
	}
	if eval(`=random number() = random number()`, "s") != false {
		t.Error("two calls in one evaluation gave the same number")
	}
	// As the connectors' test processes use it: a whole number below 100000.
	if n := eval(`=round down(random number() * 100000, 0)`, "s").(float64); n != math.Trunc(n) || n < 0 || n >= 100000 {
		t.Errorf("round down(random number() * 100000, 0) = %v", n)
	}
	// Spread over [0, 1): over 4,000 draws each quarter gets its share.
	quarters := [4]int{}
	for _, x := range eval(`=for i in 1..4000 return random number()`, "spread").([]any) {
		f := x.(float64)
		if f < 0 || f >= 1 {
			t.Fatalf("draw %v outside [0, 1)", f)
		}
		quarters[int(f*4)]++
	}
	for q, n := range quarters {
		if n < 850 || n > 1150 {
			t.Errorf("quarter %d got %d of 4000 draws: %v", q, n, quarters)
		}
	}
}

func TestRandomNumberNeedsASeed(t *testing.T) {
	e, err := Compile(`=random number() < 0.5`)
	if err != nil {
		t.Fatalf("Compile: %v (an expression with a seed is never evaluated at deploy)", err)
	}
	if !e.UsesSeed() {
		t.Error("UsesSeed is false for random number()")
	}
	if v, err := e.EvalIn(nil, Env{Now: testNow}); err == nil || !strings.Contains(err.Error(), "random number() is not available here") {
		t.Errorf("without a seed: %v, %v", v, err)
	}
}

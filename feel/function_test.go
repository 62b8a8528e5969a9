package feel

import (
	"strings"
	"testing"
)

func TestFunctionsAreCalledInOrderOrByNameInTheirOwnScope(t *testing.T) {
	pmt := NewFunction("PMT", []string{"p", "r", "n"})
	fact := NewFunction("fact", []string{"n"})
	peek := NewFunction("peek", nil)
	opts := Options{Nulls: true, Functions: map[string]*Function{"PMT": pmt, "fact": fact, "peek": peek}}
	compile := func(src string) *Expr {
		t.Helper()
		e, err := CompileWith(src, opts)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	pmt.Define(compile(`=(p*r/12)/(1-(1+r/12)**-n)`))
	fact.Define(compile(`=if n <= 1 then 1 else n * fact(n - 1)`))
	peek.Define(compile(`=leak`))
	vars := map[string]any{"leak": 1000.0, "amount": 600000.0}
	for src, want := range map[string]any{
		`=PMT(amount, 0.0375, 360)`:                          2778.69354943277,
		`=PMT(n: 360, p: amount, r: 0.0375)`:                 2778.69354943277,
		`=fact(5)`:                                           120.0,
		`={apply: function(f, x) f(x), r: apply(fact, 4)}.r`: 24.0, // a Function passed as a value
		`=sort([2, 3, 1], fact) = null`:                      true, // one parameter, not the two sort calls with
		`=fact(100)`:                                         nil,  // nested past maxCallDepth: null under Nulls
		`=PMT(r: 0.0375, p: amount) = null`:                  true,
		`=string(fact(3)) + " " + string(leak)`:              "6 1000",
		`=peek() = null`:                                     true, // the caller's variables are out of scope
		`=fact(leak) = null`:                                 true, // 1000 nested calls: null
	} {
		v, err := compile(src).Eval(vars)
		if f, ok := want.(float64); ok && err == nil {
			if g, ok := v.(float64); ok && (g-f)/f < 1e-12 && (f-g)/f < 1e-12 {
				continue
			}
		}
		if err != nil || v != want {
			t.Errorf("%s = %#v, %v; want %#v", src, v, err, want)
		}
	}
	// Without Nulls, recursion past the depth is an error naming it.
	fs := NewFunction("f", []string{"x"})
	strict := Options{Functions: map[string]*Function{"f": fs}}
	body, err := CompileWith(`=f(x + 1)`, strict)
	if err != nil {
		t.Fatal(err)
	}
	fs.Define(body)
	e, err := CompileWith(`=f(0)`, strict)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Eval(nil); err == nil || !strings.Contains(err.Error(), "nested more than") {
		t.Fatalf("unbounded recursion: %v", err)
	}
	if e.String() != `=f(0)` {
		t.Errorf("String() = %s", e.String())
	}
	// Arguments the function does not take: refused, and null under Nulls
	// as DMN has it.
	for _, src := range []string{`=PMT(1, 2)`, `=PMT(q: 1)`, `=PMT(p: 1, p: 2)`} {
		if _, err := CompileWith(src, Options{Functions: opts.Functions}); err == nil {
			t.Errorf("%s compiled", src)
		}
		if e, err := CompileWith(src, opts); err != nil {
			t.Errorf("%s: %v", src, err)
		} else if v, err := e.Eval(nil); v != nil || err != nil {
			t.Errorf("%s = %v, %v under Nulls; want null", src, v, err)
		}
	}
}

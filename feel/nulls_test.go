package feel

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
)

var nulls = Options{Nulls: true}

// Under Options.Nulls every failure TestEvalErrors expects is null instead.
func TestNullsMakeAFailedOperationNull(t *testing.T) {
	for _, src := range []string{
		`=missing > 5`, `=n <= s`, `=missing + 1`, `=s - 1`, `=-s`, `=n / zero`,
		`=big + 1`, `=n.x`, `=order.status.x`, `=n ** 0.5`, `=abs("a")`, `=substring(s, "a")`,
		`=(10 + 20) / 0`, `=not(n)`, `=for x in n return x`,
		`=1 between "a" and 2`, `=every x in xs satisfies x`, `=matches("a", "a", "p")`,
		`={a: 1, a: 2}`,
	} {
		e, err := CompileWith(src, nulls)
		if err != nil {
			t.Fatalf("CompileWith(%s): %v", src, err)
		}
		if v, err := e.Eval(vars()); err != nil || v != nil {
			t.Errorf("%s = %#v, %v; want null", src, v, err)
		}
	}
	// A single value filters as a list of it.
	for src, want := range map[string]any{`=n[item > 1]`: []any{5.0}, `=n[1]`: 5.0, `=n[item > 9]`: []any{}} {
		if v, err := compileNulls(t, src).Eval(vars()); err != nil || !reflect.DeepEqual(v, want) {
			t.Errorf("%s = %#v, %v; want %#v", src, v, err, want)
		}
	}
	// A single value passes as the list a built-in wants.
	for src, want := range map[string]any{`=count(n)`: 1.0, `=string join("a")`: "a", `=context({key: "k", value: 1})`: map[string]any{"k": 1.0}} {
		if v, err := compileNulls(t, src).Eval(vars()); err != nil || !reflect.DeepEqual(v, want) {
			t.Errorf("%s = %#v, %v; want %#v", src, v, err, want)
		}
	}
	if _, err := MustCompile(`=count(n)`).Eval(vars()); err == nil {
		t.Error("count(n) succeeded without Nulls")
	}
	// What XPath's regular expressions have and Go's lack stays refused.
	if _, err := CompileWith(`=matches("aa", "(a)\1")`, nulls); err == nil {
		t.Error(`matches with a backreference compiled`)
	}
	// A null inside absorbs the failure, not the whole expression.
	if v, err := compileNulls(t, `=[n / zero, n + 1]`).Eval(vars()); err != nil || !reflect.DeepEqual(v, []any{nil, 6.0}) {
		t.Errorf("= %#v, %v; want [null, 6]", v, err)
	}
}

func compileNulls(t *testing.T, src string) *Expr {
	t.Helper()
	e, err := CompileWith(src, nulls)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestNullsMakeAndOrNotThreeValued(t *testing.T) {
	vals := map[string]any{"T": true, "F": false, "N": nil, "S": "x"}
	tests := []struct {
		src  string
		want any
	}{
		{`=T and T`, true}, {`=T and F`, false}, {`=T and N`, nil}, {`=F and N`, false},
		{`=N and F`, false}, {`=N and T`, nil}, {`=N and N`, nil}, {`=S and F`, false},
		{`=T or F`, true}, {`=F or F`, false}, {`=F or N`, nil}, {`=T or N`, true},
		{`=N or T`, true}, {`=N or F`, nil}, {`=N or N`, nil}, {`=S or T`, true},
		{`=not(N)`, nil}, {`=not(F)`, true},
	}
	for _, tt := range tests {
		if v, err := compileNulls(t, tt.src).Eval(vals); err != nil || v != tt.want {
			t.Errorf("%s = %#v, %v; want %#v", tt.src, v, err, tt.want)
		}
	}
	// The default dialect stays strict.
	if _, err := MustCompile(`=N or T`).Eval(vals); err == nil {
		t.Error("=N or T succeeded without Options.Nulls")
	}
}

// Limits, the deadline and cancellation are not nulled: every evaluation
// stays bounded.
func TestNullsKeepLimitsAndCancellation(t *testing.T) {
	e := compileNulls(t, `=for i in 1..n return [i / 0, "ab" + string(i)]`)
	_, err := e.EvalIn(map[string]any{"n": 100000.0}, Env{Limits: Limits{MaxSteps: 1000}})
	wantLimit(t, err, LimitSteps, e.Source())
	stopped, stop := context.WithCancelCause(context.Background())
	cause := errors.New("stopping")
	stop(cause)
	if _, err := e.EvalIn(map[string]any{"n": 100000.0}, Env{Ctx: stopped}); !errors.Is(err, cause) {
		t.Fatalf("cancelled: error = %v, want the cause", err)
	}
	// A constant over the limits is still refused at compile.
	if _, err := CompileWith(`=for i in 1..100000000 return i / 0`, nulls); !IsLimit(err) {
		t.Fatalf("CompileWith = %v, want a limit", err)
	}
}

func TestNullsInUnaryTests(t *testing.T) {
	u, err := CompileUnaryTestsWith(`? > 1 or ? = null`, nulls)
	if err != nil {
		t.Fatal(err)
	}
	for x, want := range map[any]bool{nil: true, 2.0: true, 0.0: false, "a": false} {
		if got, err := u.Test(x, nil, Env{}); err != nil || got != want {
			t.Errorf("%#v: %v, %v; want %v", x, got, err, want)
		}
	}
}

// A temporal literal the spec says is invalid is null under Nulls.
func TestNullsMakeAnInvalidTemporalLiteralNull(t *testing.T) {
	for _, src := range []string{`=date("2017-13-01")`, `=@"10:61:00"`, `=duration("P1Q")`, `=date and time("x")`, `=time("13:20:00@xyz/abc")`, `=date("02021-01-01")`} {
		if v, err := compileNulls(t, src).Eval(nil); err != nil || v != nil {
			t.Errorf("%s = %#v, %v; want null", src, v, err)
		}
		if _, err := Compile(src); err == nil {
			t.Errorf("%s compiled without Nulls", src)
		}
	}
}

// Under Nulls functions are values: a name bound to one, or the expression
// giving it, calls it.
func TestNullsFunctionValues(t *testing.T) {
	for src, want := range map[string]any{
		`={f: function(x) x * 2, r: f(3)}.r`:                                       6.0,
		`=(function(a, b) a - b)(b: 1, a: 5)`:                                      4.0,
		`=-(function(a) a)(10)`:                                                    -10.0,
		`={fact: function(n) if n <= 1 then 1 else n * fact(n - 1), r: fact(5)}.r`: 120.0,
		`={loop: function(n) loop(n + 1), r: loop(0)}.r`:                           nil, // nested past maxCallDepth
		`=(function(a) a)(1, 2)`:                                                   nil,
		`=(1)(2)`:                                                                  nil,
		`=list replace([2, 4, 7], function(item, newItem) item < newItem, 5)`:      []any{5.0, 5.0, 7.0},
		`=(function(x: number) x + n)(1)`:                                          6.0,
		`=(function() 1) = (function() 1)`:                                         false,
		`=(function() 1) instance of function`:                                     true,
	} {
		if v, err := compileNulls(t, src).Eval(vars()); err != nil || !reflect.DeepEqual(v, want) {
			t.Errorf("%s = %#v, %v; want %#v", src, v, err, want)
		}
	}
	if v, err := compileNulls(t, `=function(x) x + n`).Eval(vars()); err == nil {
		t.Errorf("a function result has no JSON form, but evaluated to %v", v)
	}
	e := compileNulls(t, `={f: function(a) a + 1}.f(1)`)
	if e.String() != `={f: function(a) a + 1}.f(1)` {
		t.Errorf("String() = %s", e.String())
	}
	// The default dialect keeps refusing them.
	if _, err := Compile(`=(function(a) a)(1)`); err == nil {
		t.Error("a function value compiled without Nulls")
	}
}

// Under Nulls a unary comparison in parentheses is a range (DMN 1.5):
// equal only to the same comparison, not to the interval it spans.
func TestNullsComparisonRanges(t *testing.T) {
	for src, want := range map[string]any{
		`=(< 10) = (< 10)`:       true,
		`=(< 10) = (null..10)`:   false,
		`=(= 10) = [10..10]`:     false,
		`=(!= 10) = (!= 10)`:     true,
		`=(!= 10) = (= 10)`:      false,
		`=9 in (< 10)`:           true,
		`=10 in (< 10)`:          false,
		`=10 in (<= n + 5)`:      true,
		`=3 in (!= 3)`:           false,
		`=4 in (!= 3)`:           true,
		`=(>= 10).start`:         10.0,
		`=(>= 10).end`:           nil,
		`=(> 10).start included`: false,
		`=(< null)`:              nil,
		`=range("<10") = (< 10)`: true,
		`=string((!= 3))`:        "!= 3",
	} {
		if v, err := compileNulls(t, src).Eval(vars()); err != nil || !reflect.DeepEqual(v, want) {
			t.Errorf("%s = %#v, %v; want %#v", src, v, err, want)
		}
	}
	if _, err := Compile(`=(< 10)`); err == nil {
		t.Error("a comparison range compiled without Nulls")
	}
}

// Function types conform as DMN 1.4 has it: a function takes what the
// type's parameters are (contravariance) and gives what its result is, as
// far as its body tells. Options.Types names types by their FEEL text.
func TestFunctionAndNamedTypes(t *testing.T) {
	opts := Options{Nulls: true, Types: map[string]string{
		"tFn":      "function<string, number> -> string",
		"tFns":     "list<tFn>",
		"tPerson":  "context<name: string, `last name`: string>",
		"tLoop":    "list<tLoop>",
		"tNumbers": "list<number>",
	}}
	for src, want := range map[string]any{
		`=(function() "foo") instance of function<> -> Any`:                                                                           true,
		`=(function() "foo") instance of function<> -> string`:                                                                        true,
		`=(function() 123) instance of function<> -> string`:                                                                          false,
		`=(function(a) a) instance of function<> -> Any`:                                                                              false,
		`=(function(a: string, b: number) "x") instance of tFn`:                                                                       true,
		`=(function(a: string, b: string) "x") instance of tFn`:                                                                       false,
		`=(function(a, b) "x") instance of tFn`:                                                                                       true,
		`=(function(a: context<a: string>) {b: "b", c: 1}) instance of function<context<a: string, b: string>> -> context<b: string>`: true,
		`=(function(a: context<a: string, b: string>) "x") instance of function<context<a: string>> -> string`:                        false,
		`=[(function(a: string, b: number) "x"), "foo"] instance of tFns`:                                                             false,
		`=5 instance of function<> -> Any`:                                                                                            false,
		`={name: "a", last name: "b"} instance of tPerson`:                                                                            true,
		`={name: "a"} instance of tPerson`:                                                                                            false,
		`=[1, 2] instance of tNumbers`:                                                                                                true,
		`=[1, "2"] instance of tNumbers`:                                                                                              false,
	} {
		e, err := CompileWith(src, opts)
		if err != nil {
			t.Errorf("%s: %v", src, err)
			continue
		}
		if v, err := e.Eval(nil); err != nil || v != want {
			t.Errorf("%s = %#v, %v; want %#v", src, v, err, want)
		}
	}
	for src, why := range map[string]string{
		`=[] instance of tLoop`:                                "expands into more than 64 named types",
		`=[] instance of tOther`:                               "expected a type after instance of",
		`=(function(a) a) instance of function<string> string`: "expected -> and the result type",
	} {
		if _, err := CompileWith(src, opts); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("%s: %v; want a refusal containing %q", src, err, why)
		}
	}
}

// Under Nulls a name may hold a function: a call of a name no built-in or
// Function has calls what the variable holds (null when nothing), and
// sort takes any expression giving its precedes function.
func TestNullsCallNamesHoldingFunctions(t *testing.T) {
	for src, want := range map[string]any{
		`={f: function(a) a * 2, r: f(n)}.r`: 10.0,
		`=nosuch(1)`:                         nil,
		`={desc: function(a, b) a > b, r: sort([1, 3, 2], desc)}.r`: []any{3.0, 2.0, 1.0},
		`={one: function(a) true, r: sort([1, 3, 2], one)}.r`:       nil,
		`=sort([1, 3, 2], n)`: nil,
	} {
		e, err := CompileWith(src, nulls)
		if err != nil {
			t.Errorf("%s: %v", src, err)
			continue
		}
		if v, err := e.Eval(vars()); err != nil || !reflect.DeepEqual(v, want) {
			t.Errorf("%s = %#v, %v; want %#v", src, v, err, want)
		}
	}
	// Words running into ( name no variable: still refused.
	if _, err := CompileWith(`=no such function(1)`, nulls); err == nil {
		t.Error("an unknown function of several words compiled under Nulls")
	}
	if _, err := Compile(`=nosuch(1)`); err == nil {
		t.Error("an unknown function compiled without Nulls")
	}
	if _, err := CompileWith(`=exp(1)`, nulls); err == nil {
		t.Error("exp, refused on purpose, compiled under Nulls")
	}
}

// Under Nulls values of different types are neither equal nor unequal:
// = and != are null; null still equals only null.
func TestNullsEqualityAcrossTypes(t *testing.T) {
	for src, want := range map[string]any{
		`=true = 1`:                            nil,
		`=[] != 0`:                             nil,
		`=duration("P1Y") = duration("P365D")`: nil,
		`=null = 1`:                            false,
		`=null != 1`:                           true,
		`=null = null`:                         true,
		`=1 = 1.0`:                             true,
		`=[1, "a"] = [1, "a"]`:                 true,
		`=1 in ["1", 1]`:                       true,
	} {
		if v, err := compileNulls(t, src).Eval(nil); err != nil || !reflect.DeepEqual(v, want) {
			t.Errorf("%s = %#v, %v; want %#v", src, v, err, want)
		}
	}
	if v, err := MustCompile(`=true = n`).Eval(vars()); err != nil || v != false {
		t.Errorf("true = n without Nulls = %#v, %v; want false", v, err)
	}
}

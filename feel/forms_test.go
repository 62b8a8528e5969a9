package feel

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sutra-run/worker/fault"
)

// testNow is the time the tables evaluate at.
var testNow = time.Date(2024, 1, 31, 10, 0, 0, 0, time.UTC)

// evalCase is an expression that compiles and evaluates over vars() at
// testNow to want, or fails evaluation with an error containing err.
type evalCase struct {
	src  string
	want any
	err  string
}

// checkEval runs cases, and checks for each that the result is JSON and
// that the canonical form evaluates the same.
func checkEval(t *testing.T, cases []evalCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.src, func(t *testing.T) {
			e, err := Compile(tt.src)
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			got, evalErr := e.EvalAt(vars(), testNow)
			if tt.err != "" {
				if evalErr == nil || !strings.Contains(evalErr.Error(), tt.err) || strings.Count(evalErr.Error(), strconv.Quote(tt.src)) != 1 {
					t.Fatalf("EvalAt = %#v, %v; want an error naming the expression once and containing %q", got, evalErr, tt.err)
				}
				if fault.Code(evalErr) != "" {
					t.Fatalf("run-time error carries code %s; the engine assigns the incident code", fault.Code(evalErr))
				}
			} else {
				if evalErr != nil {
					t.Fatalf("EvalAt: %v", evalErr)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Fatalf("EvalAt = %#v, want %#v", got, tt.want)
				}
				if _, err := json.Marshal(got); err != nil || !jsonOnly(got) {
					t.Fatalf("EvalAt = %#v is not JSON-shaped (%v)", got, err)
				}
			}
			canon, err := Compile(e.String())
			if err != nil {
				t.Fatalf("canonical %s: %v", e.String(), err)
			}
			again, errAgain := canon.EvalAt(vars(), testNow)
			if (evalErr == nil) != (errAgain == nil) || !reflect.DeepEqual(got, again) {
				t.Fatalf("canonical %s = %#v, %v; want %#v", e.String(), again, errAgain, got)
			}
		})
	}
}

// refusedCase is an expression Compile refuses with a message containing
// msg; pos > 0 is the position the message must end with, pos < 0 means it
// must name none.
type refusedCase struct {
	src string
	msg string
	pos int
}

func checkRefused(t *testing.T, cases []refusedCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.src, func(t *testing.T) {
			e, err := Compile(tt.src)
			if err == nil {
				t.Fatalf("Compile succeeded (%s), want refusal %q", e.String(), tt.msg)
			}
			msg := err.Error()
			if !fault.HasCode(err, fault.BPMNExpression) || strings.Count(msg, fault.BPMNExpression) != 1 {
				t.Fatalf("error %q: want the code %s exactly once", msg, fault.BPMNExpression)
			}
			if !strings.Contains(msg, tt.msg) {
				t.Fatalf("error %q does not mention %q", msg, tt.msg)
			}
			if strings.Count(msg, strconv.Quote(tt.src)) != 1 {
				t.Fatalf("error %q does not quote the expression exactly once", msg)
			}
			switch {
			case tt.pos > 0 && !strings.HasSuffix(msg, " at position "+strconv.Itoa(tt.pos)):
				t.Fatalf("error %q does not end with position %d", msg, tt.pos)
			case tt.pos < 0 && strings.Contains(msg, " at position "):
				t.Fatalf("error %q names a position; it should not", msg)
			}
		})
	}
}

func TestIfThenElse(t *testing.T) {
	checkEval(t, []evalCase{
		{src: `=if n > 3 then "big" else "small"`, want: "big"},
		{src: `=if n > 9 then "big" else "small"`, want: "small"},
		{src: `=if t then 1 else 2`, want: 1.0},
		// feel-scala: a condition that is not true (null, a number...) takes else.
		{src: `=if missing then 1 else 2`, want: 2.0},
		{src: `=if nul then 1 else 2`, want: 2.0},
		{src: `=if n then 1 else 2`, want: 2.0},
		{src: `=if s = "paid" then if n > 1 then "a" else "b" else "c"`, want: "a"},
		{src: `=if f then 1 else if t then 2 else 3`, want: 2.0},
		{src: `=(if t then 1 else 2) + 10`, want: 11.0},
		{src: `=if t then 1 else 2 + 10`, want: 1.0},
		{src: `=if f then 1 else 2 + 10`, want: 12.0},
		{src: `=if t then null else missing > 1`, want: nil},
		{src: `=[if t then "x" else "y"]`, want: []any{"x"}},
		// only the branch taken is evaluated
		{src: `=if missing = null then 0 else missing * 2`, want: 0.0},
		{src: `=if missing > 1 then 1 else 2`, err: "cannot compare null with a number using >"},
		{src: `=if f then 1 else missing + 1`, err: "cannot apply + to null and a number"},
	})
}

func TestListsAndContexts(t *testing.T) {
	checkEval(t, []evalCase{
		{src: `=[]`, want: []any{}},
		{src: `=[1, "a", true, null, n]`, want: []any{1.0, "a", true, nil, 5.0}},
		{src: `=[[1, 2], [], [[3]]]`, want: []any{[]any{1.0, 2.0}, []any{}, []any{[]any{3.0}}}},
		{src: `=[1, missing]`, want: []any{1.0, nil}},
		{src: `={}`, want: map[string]any{}},
		{src: `={a: 1, "b c": n, d: {e: 2}}`, want: map[string]any{"a": 1.0, "b c": 5.0, "d": map[string]any{"e": 2.0}}},
		{src: `={a: 1, "b c": n, d: {e: 2}}.d.e`, want: 2.0},
		{src: `={a: 1, "b c": n}.a`, want: 1.0},
		{src: `={a: 1}.missing`, want: nil},
		{src: `={a: [1, {b: "x"}]}.a`, want: []any{1.0, map[string]any{"b": "x"}}},
		// keys may have spaces and symbols, as in feel-scala
		{src: `={first name: "Zoé", order-id: 7, "if": true}`, want: map[string]any{"first name": "Zoé", "order-id": 7.0, "if": true}},
		// an entry sees the entries before it
		{src: `={a: 1, b: a + 1, c: {d: b * 2}}`, want: map[string]any{"a": 1.0, "b": 2.0, "c": map[string]any{"d": 4.0}}},
		{src: `={n: 1, m: n}.m`, want: 1.0},
		{src: `={m: n, n: 1}.m`, want: 5.0},
		{src: `=[{a: 1}, {a: 2}] = [{a: 1}, {a: 2.0}]`, want: true},
		{src: `={a: 1, b: 2} = {b: 2, a: 1}`, want: true},
		{src: `={a: 1} = {a: 1, b: null}`, want: false},
		{src: `=order.customer`, want: map[string]any{"id": "c-1"}},
		{src: `=(order).customer.id`, want: "c-1"},
		{src: `={a: missing + 1}`, err: "cannot apply + to null and a number"},
	})
}

func TestIndexFilterProjection(t *testing.T) {
	checkEval(t, []evalCase{
		{src: `=xs[1]`, want: 1.0},
		{src: `=xs[4]`, want: 7.0},
		{src: `=xs[-1]`, want: 7.0},
		{src: `=xs[-4]`, want: 1.0},
		{src: `=xs[0]`, want: nil},
		{src: `=xs[5]`, want: nil},
		{src: `=xs[-5]`, want: nil},
		{src: `=xs[i - 5]`, want: 2.0},
		{src: `=[][1]`, want: nil},
		{src: `=missing[1]`, want: nil},
		{src: `=missing[item > 1]`, want: nil},
		{src: `=[[1, 2], [3]][1][2]`, want: 2.0},
		{src: `=xs[item > 2]`, want: []any{3.0, 7.0}},
		{src: `=xs[item > 100]`, want: []any{}},
		{src: `=[][item > 1]`, want: []any{}},
		{src: `=xs[item > 1][1]`, want: 2.0},
		{src: `=xs[item > 1 and item < 7]`, want: []any{2.0, 3.0}},
		{src: `=list2[item = "a"]`, want: []any{"a"}},
		// a context item's entries are names inside the filter
		{src: `=orders[total > 100]`, want: []any{map[string]any{"id": "b", "total": 200.0}}},
		{src: `=orders[item.total > 100].id`, want: []any{"b"}},
		{src: `=orders[id = "a"][1].total`, want: 10.0},
		// the item's entries shadow variables of the same name
		{src: `=[{n: 1}, {n: 9}][n > 5]`, want: []any{map[string]any{"n": 9.0}}},
		{src: `=[{x: 1}, {y: 2}][n = 5]`, want: []any{map[string]any{"x": 1.0}, map[string]any{"y": 2.0}}},
		// only items whose condition is true stay
		{src: `=[true, false, null, 1][item]`, want: []any{true}},
		// a number for the first item makes the filter an index (feel-scala)
		{src: `=xs[n - 3]`, want: 2.0},
		// projection: a path on a list reads every item
		{src: `=orders.id`, want: []any{"a", "b"}},
		{src: `=orders.total[item > 100]`, want: []any{200.0}},
		{src: `=[{a: 1}, {b: 2}].a`, want: []any{1.0, nil}},
		{src: `=[{a: {b: 1}}, null].a.b`, want: []any{1.0, nil}},
		{src: `=[].a`, want: []any{}},
		{src: `=xs[1.5]`, err: "a list index must be a whole number, got 1.5"},
		{src: `=xs["a"]`, want: []any{}}, // not a number, so a condition that is never true
		{src: `=n[1]`, err: "cannot filter a number; only a list has items"},
		{src: `=s[item = "p"]`, err: "cannot filter a string"},
		{src: `=list.x`, err: "cannot read .x of a number"},
		// null handling is unchanged inside filters: guard missing entries
		{src: `=[{a: 1}, {b: 2}][a < 10]`, err: "cannot compare null with a number using <"},
		{src: `=[{a: 1}, {b: 2}][a != null and a < 10]`, want: []any{map[string]any{"a": 1.0}}},
	})
}

func TestForSomeEvery(t *testing.T) {
	checkEval(t, []evalCase{
		{src: `=for x in xs return x * 2`, want: []any{2.0, 4.0, 6.0, 14.0}},
		{src: `=for x in [] return x`, want: []any{}},
		{src: `=for x in 1..3 return x`, want: []any{1.0, 2.0, 3.0}},
		{src: `=for d in @"2024-02-28"..@"2024-03-01" return string(d)`, want: []any{"2024-02-28", "2024-02-29", "2024-03-01"}},
		{src: `=for d in date("2024-01-02")..date("2024-01-01") return d`, want: []any{"2024-01-02", "2024-01-01"}},
		{src: `=for x in 3..1 return x`, want: []any{3.0, 2.0, 1.0}},
		{src: `=for x in -1..1 return x`, want: []any{-1.0, 0.0, 1.0}},
		{src: `=for x in n..n return x`, want: []any{5.0}},
		{src: `=for x in [1, 2], y in ["a", "b"] return string(x) + y`, want: []any{"1a", "1b", "2a", "2b"}},
		// a later list may use an earlier name
		{src: `=for o in [{items: [1, 2]}, {items: [3]}], i in o.items return i`, want: []any{1.0, 2.0, 3.0}},
		// partial is the results so far
		{src: `=for i in 1..5 return if i = 1 then 1 else i * partial[-1]`, want: []any{1.0, 2.0, 6.0, 24.0, 120.0}},
		{src: `=for o in orders return o.id`, want: []any{"a", "b"}},
		{src: `=for x in xs return for y in 1..x return y`, want: []any{[]any{1.0}, []any{1.0, 2.0}, []any{1.0, 2.0, 3.0}, []any{1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0}}},
		// the loop variable shadows a variable of the same name
		{src: `=for n in [1] return n`, want: []any{1.0}},
		{src: `=some x in xs satisfies x > 5`, want: true},
		{src: `=some x in xs satisfies x > 7`, want: false},
		{src: `=some x in [] satisfies x`, want: false},
		{src: `=every x in xs satisfies x > 0`, want: true},
		{src: `=every x in xs satisfies x < 7`, want: false},
		{src: `=every x in [] satisfies x`, want: true},
		{src: `=some x in [1, 2], y in [2, 3] satisfies x = y`, want: true},
		{src: `=every o in orders satisfies o.total > 5`, want: true},
		{src: `=some x in xs satisfies x > 1 and x < 3`, want: true},
		// the conditions are strict like and/or, and stop at the answer
		{src: `=some x in [1, null] satisfies x > 0`, want: true},
		{src: `=some x in [nul, 1] satisfies x > 0`, err: "cannot compare null with a number using >"},
		{src: `=every x in [1, "a"] satisfies x = n`, want: false},
		{src: `=some x in xs satisfies x`, err: "some ... satisfies needs a boolean, got a number"},
		{src: `=every x in xs satisfies null`, err: "every ... satisfies needs a boolean, got null"},
		{src: `=for x in missing return x`, err: `"x in" needs a list, got null`},
		{src: `=some x in n satisfies x`, err: `"x in" needs a list, got a number`},
		{src: `=for x in 1..n / 2 return x`, err: "a range needs whole numbers of at most 9007199254740992 in magnitude, got 1..2.5"},
		{src: `=for x in 1..s return x`, err: "a range needs two numbers, got a number and a string"},
		{src: `=for x in 1..zero + 5000000 return x`, err: "exceeded its limit SUTRA_FEEL_MAX_STEPS"},
		{src: `=for x in 1..zero + 2000, y in 1..1000 return 0`, err: "exceeded its limit SUTRA_FEEL_MAX_"},
	})
}

func TestBetweenInInstanceOf(t *testing.T) {
	checkEval(t, []evalCase{
		{src: `=n between 1 and 10`, want: true},
		{src: `=n between 5 and 5`, want: true},
		{src: `=n between 6 and 10`, want: false},
		{src: `=s between "a" and "z"`, want: true},
		{src: `=n between 1 and 10 and t`, want: true},
		{src: `=missing between 1 and 2`, err: "cannot compare null with a number using between"},
		{src: `=n in [1, 5]`, want: true},
		{src: `=n in [1, 2]`, want: false},
		{src: `=n in xs`, want: false},
		{src: `=i in xs`, want: true},
		{src: `=n in 5`, want: true},
		{src: `=n in (1, 5, 9)`, want: true},
		{src: `=n in [[1..2], [4..5]]`, want: true},
		// ranges as values
		{src: `=[1..5]`, want: "[1..5]"},
		{src: `=]1..5[`, want: "(1..5)"},
		{src: `=(1..5].start included`, want: false},
		{src: `=[1..5].end`, want: 5.0},
		{src: `={r: [1..n]}.r = [1..5]`, want: true},
		{src: `=3 in {r: (1..5]}.r`, want: true},
		{src: `=1 in {r: (1..5]}.r`, want: false},
		{src: `=for i in [1..4) return i`, want: []any{1.0, 2.0, 3.0}},
		{src: `=[[1..2], ["a".."b"]]`, want: []any{"[1..2]", `["a".."b"]`}},
		{src: `=list contains([[1..2], 7], 7)`, want: true},
		{src: `=[1..s]`, err: "cannot compare a number with a string"},
		{src: `=range("[1..3]") = [1..3]`, want: true},
		// parameterized types
		{src: `=[1..3] instance of range<number>`, want: true},
		{src: `=[1..3] instance of range<string>`, want: false},
		{src: `=[1, null] instance of list<number>`, want: true},
		{src: `=[1, "a"] instance of list<number>`, want: false},
		{src: `=[[1]] instance of list<list<number>>`, want: true},
		{src: `={a: "x", b: 1} instance of context<a: string>`, want: true},
		{src: `={a: "x"} instance of context<a: string, b: number>`, want: false},
		{src: `={a: 1} instance of context<>`, want: true},
		{src: `=2 in range("(1..3)")`, want: true},
		{src: `=range("< 3").end included`, want: false},
		{src: `=range(">= @\"2024-01-01\"").start`, want: "2024-01-01"},
		{src: `=range("[" + s + "..3]")`, err: "must be literals"},
		{src: `=range(if n > 0 then "[null..3]" else "")`, err: "must be literals other than null"},
		{src: `=range(if n > 0 then "[date(string(\"2024-01-01\"))..3]" else "")`, err: "must be literals"},
		{src: `=range(if n > 0 then "[3..1]" else "")`, err: "must not start after its end"},
		{src: `=[3..n]`, want: "[3..5]"},
		{src: `=[n..3]`, err: "must not start after its end"},
		{src: `=range(s + ", 2")`, err: "unexpected"},
		{src: `=range(due)`, err: "is not a range"},
		{src: `=range("[1.." + string join(for i in 1..n * 60 return "1000") + "]")`, err: "over 1024"},
		{src: `=n in (!= 5)`, want: false},
		{src: `=s in ("paid", "open")`, want: true},
		{src: `=n in (< 3, > 4)`, want: true},
		{src: `=n in < 10`, want: true},
		{src: `=n in >= 6`, want: false},
		{src: `=n in [1..5]`, want: true},
		{src: `=n in [1..5)`, want: false},
		{src: `=n in [1..5[`, want: false},
		{src: `=n in (5..9]`, want: false},
		{src: `=n in ]5..9]`, want: false},
		{src: `=n in (4..6)`, want: true},
		{src: `=n in ((1..2), [4..6])`, want: true},
		{src: `=n in [1..xs[4]]`, want: true},
		{src: `=nul in (1, null)`, want: true},
		{src: `=missing in [1, null]`, want: true},
		{src: `=n in (xs)`, want: false},
		{src: `=n in ((n - 1) + 1)`, want: true},
		{src: `=n in [1, 2] or t`, want: true},
		{src: `=missing in < 3`, err: "cannot compare null with a number using <"},
		{src: `=missing in [1..3]`, err: "cannot compare null with a number using in"},
		{src: `=n instance of number`, want: true},
		{src: `=i instance of number`, want: true},
		{src: `=s instance of string`, want: true},
		{src: `=t instance of boolean`, want: true},
		{src: `=list instance of list`, want: true},
		{src: `=order instance of context`, want: true},
		{src: `=n instance of string`, want: false},
		{src: `=nul instance of Any`, want: false},
		{src: `=n instance of Any`, want: true},
		{src: `=date("2024-01-31") instance of date`, want: true},
		{src: `=@"10:00:00" instance of time`, want: true},
		{src: `=@"2024-01-31T10:00:00" instance of date and time`, want: true},
		{src: `=@"P1D" instance of days and time duration`, want: true},
		{src: `=@"P1Y" instance of years and months duration`, want: true},
		{src: `=@"P1Y" instance of days and time duration`, want: false},
		// a date in a variable is a string
		{src: `=due instance of date`, want: false},
	})
}

func TestIsDefined(t *testing.T) {
	checkEval(t, []evalCase{
		{src: `=is defined(n)`, want: true},
		{src: `=is defined(missing)`, want: false},
		// a variable holding null exists (see docs/expressions.md)
		{src: `=is defined(nul)`, want: true},
		{src: `=is defined(order.total)`, want: true},
		{src: `=is defined(order.customer.id)`, want: true},
		{src: `=is defined(order.missing)`, want: false},
		{src: `=is defined(missing.a.b)`, want: false},
		{src: `=is defined(nul.a)`, want: false},
		{src: `=is defined(n.a)`, want: false},
		{src: `=is defined({a: null}.a)`, want: true},
		{src: `=is defined({}.a)`, want: false},
		{src: `=is defined(orders.id)`, want: true},
		{src: `=is defined(date("2024-01-31").year)`, want: true},
		{src: `=is defined(date("2024-01-31").hour)`, want: false},
		{src: `=for x in [1] return is defined(x)`, want: []any{true}},
		{src: `=is defined(1)`, want: true},
		{src: `=is defined(xs[9])`, want: true},
		{src: `=is defined(missing) and missing > 1`, want: false},
		{src: `=is defined(n / zero)`, err: "division by zero"},
	})
}

func TestNewFormsRefused(t *testing.T) {
	checkRefused(t, []refusedCase{
		{`=if a then b`, "expected else after if ... then ..., found end of expression", 13},
		{`=if a b else c`, `expected then after the condition of if, found name "b"`, 7},
		{`=1 + if a then 1 else 2`, "if must be in parentheses when it is an operand: (if ...)", 6},
		{`=for x in xs x`, `expected return after for ... in ..., found name "x"`, 14},
		{`=for in xs return 1`, `expected a variable name after for, found name "in"`, 6},
		{`=for x xs return 1`, `expected in after for x, found name "xs"`, 8},
		{`=some x in xs x > 1`, "expected satisfies after some ... in ...", 15},
		{`=every x in xs`, "expected satisfies after every ... in ..., found end of expression", 15},
		{`=x between 1`, "expected and after between ..., found end of expression", 13},
		{`=x in`, "unexpected end of expression", 6},
		{`=x in (1, 2`, "expected ) to close the ( at position 7, found end of expression", 12},
		{`=x in [1..2`, "expected ] or ) to close the interval starting at position 7, found end of expression", 12},
		{`=x instance of`, "expected a type after instance of", 15},
		{`=x instance of foo`, `expected a type after instance of (number, string, boolean, date, time, date and time, days and time duration, years and months duration, list, range, context, function, Any or an item definition of the DMN model), found name "foo"`, 16},
		{`=x in [1, 2] = true`, "comparisons do not chain", 14},
		{`=x between 1 and 2 between 3 and 4`, "comparisons do not chain", 20},
		{`=not x in [1]`, `ambiguous not followed by name "in"`, 2},
		{`=[1, 2`, "expected ] to close the [ at position 2, found end of expression", 7},
		{`=[1 2]`, `expected ] to close the [ at position 2, found number 2`, 5},
		{`={a: 1`, "expected } to close the { at position 2, found end of expression", 7},
		{`={a 1}`, `expected a context key followed by :, found "}"`, 6},
		{`={: 1}`, "expected a context key before :", 3},
		{`={a: 1, a: 2}`, `key "a" appears twice in the context`, 10},
		{`={"a": 1, a: 2}`, `key "a" appears twice in the context`, 12},
		{`=[1, 2, ]`, `unexpected "]"`, 9},
		{`={a: 1, }`, `expected a context key followed by :, found "}"`, 9},
		{`=upper case(s, )`, `unexpected ")"`, 16},
		{`=xs[1`, "expected ] to close the [ at position 4, found end of expression", 6},
		{`=xs[]`, `unexpected "]"`, 5},
		{`=a.b(1)`, "calling a function through a path (b(...)) is not supported", 4},
		{`=function(a, b) a`, "function definitions are only supported as the second argument of sort", 2},
		{`=if`, "unexpected end of expression", 4},
		{`=else`, `"else" is a reserved word and cannot name a variable`, 2},
		{`=in`, `"in" is a reserved word and cannot name a variable`, 2},
		{`=1..5`, `unexpected ".."`, 3},
		{`=[1..`, `unexpected end of expression`, 6},
		{`=@x`, `@ must be followed by a string (a temporal literal such as @"2024-01-31")`, 2},
		{`=@"2024-13-01"`, `invalid date "2024-13-01"`, 2},
		{`=@"25:00:00"`, `invalid time "25:00:00"`, 2},
		{`=@"2024-02-30"`, `invalid date "2024-02-30"`, 2},
		{`=@"P1W"`, `invalid duration "P1W"`, 2},
		{`=@"10:00:00@Europe/Atlantis"`, `unknown time zone "Europe/Atlantis"`, 2},
		// constant expressions are still evaluated at deploy time
		{`=[1, 2][item > "a"]`, "always fails: cannot compare a number with a string using >", 0},
		{`=for x in [1, 0] return 1 / x`, "always fails: division by zero", 0},
		{`={a: 1}.a.b`, "always fails: cannot read .b of a number", 0},
	})
}

func TestNewFormsString(t *testing.T) {
	tests := []struct{ src, want string }{
		{`=if a then b else c`, `=if a then b else c`},
		{`=(if a then 1 else 2)+3`, `=(if a then 1 else 2) + 3`},
		{`=if a then if b then 1 else 2 else 3`, `=if a then if b then 1 else 2 else 3`},
		{`=[1,2 ,[ ]]`, `=[1, 2, []]`},
		{`={a:1,"b c":2, first name : 3,"x":4}`, `={a: 1, "b c": 2, "first name": 3, x: 4}`},
		{`={"if": 1, "a.b": 2}`, `={"if": 1, "a.b": 2}`},
		{`=xs[ 1 ]`, `=xs[1]`},
		{`=xs[-1]`, `=xs[-1]`},
		{`=(xs)[item>1].a`, `=xs[item > 1].a`},
		{`=(a+b)[1]`, `=(a + b)[1]`},
		{`=(-a)[1]`, `=(-a)[1]`},
		{`=for x in xs,y in 1..3 return x`, `=for x in xs, y in 1..3 return x`},
		{`=for x in (a+b)..(c) return x`, `=for x in a + b..c return x`},
		{`=(for x in xs return x)[1]`, `=(for x in xs return x)[1]`},
		{`=some x in xs satisfies x and y`, `=some x in xs satisfies x and y`},
		{`=(some x in xs satisfies x) and y`, `=(some x in xs satisfies x) and y`},
		{`=x between 1 and 2 and y`, `=x between 1 and 2 and y`},
		{`=(x+1) between (a) and (b*2)`, `=x + 1 between a and b * 2`},
		{`=x in(1,2)`, `=x in (1, 2)`},
		{`=x in (1)`, `=x in 1`},
		{`=x in [[1..2],]3..4[]`, `=x in [[1..2], (3..4)]`},
		{`=x in (=1, !=2)`, `=x in (= 1, != 2)`},
		{`=x instance of list<context<a:number,b:range<date>>>`, `=x instance of list<context<a: number, b: range<date>>>`},
		{`=(1..2]`, `=(1..2]`},
		{`=x in ((a or b) + 1)`, `=x in ((a or b) + 1)`},
		{`=x in ]1..2[`, `=x in (1..2)`},
		{`=x in [1..2[`, `=x in [1..2)`},
		{`=x in [1,2]`, `=x in [1, 2]`},
		{`=x in <5`, `=x in < 5`},
		{`=x instance of  date  and  time`, `=x instance of date and time`},
		{`=(x instance of date) and time`, `=(x instance of date) and time`},
		{`=(date) and time(x)`, `=(date) and time(x)`},
		{`=x between date and time`, `=x between (date) and time`},
		{`=is defined( a.b )`, `=is defined(a.b)`},
		{`=a.time offset`, `=a.time offset`},
	}
	for _, tt := range tests {
		e := MustCompile(tt.src)
		if got := e.String(); got != tt.want {
			t.Errorf("Compile(%s).String() = %s, want %s", tt.src, got, tt.want)
		}
		if again := MustCompile(e.String()).String(); again != tt.want {
			t.Errorf("String is not a fixed point: %s -> %s", tt.want, again)
		}
	}
}

// TestBacktickNames covers feel-scala's escaped names: a variable, a path
// field or a context key with characters a bare name cannot have.
func TestBacktickNames(t *testing.T) {
	checkEval(t, []evalCase{
		{src: "=`order-id`", want: "o-7"},
		{src: "=`first name` + \"!\"", want: "Zoé!"},
		{src: "=`if`", want: "a keyword"},
		{src: "=`n` + 1", want: 6.0},
		{src: "=experiment.`steady-state-hypothesis`.title", want: "up"},
		{src: "=experiment.`steady-state-hypothesis`.probes[2]", want: "p2"},
		{src: "=is defined(experiment.`steady-state-hypothesis`) and not(is defined(`no such`))", want: true},
		{src: "={`a-b`: 1, c: `a-b` + 1}.c", want: 2.0},
		{src: "=[{`x y`: 1}, {`x y`: 2}][`x y` > 1][1].`x y`", want: 2.0},
		{src: "=`missing-one`", want: nil},
		{src: "=`order-id` > 1", err: "cannot compare a string with a number"},
	})
	checkRefused(t, []refusedCase{
		{"=`not`(t)", `unexpected "("`, 7},
		{"={`a` b: 1}", "a backtick-quoted context key must be the whole key", 3},
		{"=for `x` in xs return 1", "expected a variable name after for, found name `x`", 6},
		{"=a.b`c`", "unexpected name `c`", 5},
	})
	for _, tt := range []struct{ src, want string }{
		{"=`order-id`", "=`order-id`"},
		{"=`n`", "=n"},
		{"=`if` = `then`", "=`if` = `then`"},
		{"=experiment.`steady-state-hypothesis`", "=experiment.`steady-state-hypothesis`"},
		{"=a.`b`.`time offset`", "=a.b.time offset"},
		{"={`a b`: 1, `c`: 2}", `={"a b": 1, c: 2}`},
		{"=`date` and `time`", "=(date) and time"},
	} {
		e := MustCompile(tt.src)
		if got := e.String(); got != tt.want {
			t.Errorf("Compile(%s).String() = %s, want %s", tt.src, got, tt.want)
		}
		if again := MustCompile(e.String()).String(); again != tt.want {
			t.Errorf("String is not a fixed point: %s -> %s", tt.want, again)
		}
	}
}

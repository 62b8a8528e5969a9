package feel

import (
	"encoding/json"
	"errors"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sutra-run/worker/fault"
)

// fuzzLimits are small, so that the fuzzer reaches them often.
var fuzzLimits = Limits{MaxSteps: 1 << 14, MaxBytes: 1 << 20}

// FuzzFEEL checks that Compile never panics and refuses only with
// fault.BPMNExpression or, for a constant over the limits,
// fault.IncidentExpressionLimit; that a compiled expression evaluates without a
// panic, deterministically (uuid() included), to a JSON value, allocating
// and taking no more than its limits allow (it hunts blowups: work or
// memory an evaluation does without being charged for it); and that its
// canonical String compiles to an expression that prints the same and
// evaluates the same.
func FuzzFEEL(f *testing.F) {
	for _, src := range []string{
		`=order.total > 100 and status = "paid"`,
		`=not(a) or not b and c != null`,
		`=-(n + 1.5) * 2 / i - jn`,
		`=order.customer.id = "c-1"`,
		`=@"2024-03-31T02:30:00@Europe/Paris" + duration("P1M") - @"-0044-03-15T12:00:00Z"`,
		`=time("24:00:00@Etc/UTC").timezone = date and time("12021-01-01T00:00:00+01:00").time offset`,
		`=1 /* a */ + 2 // b`,
		`=matches(s, "a b\\d", "xq") and split(s, "\\s+") = replace(s, "[a-z-[aeiou]]", "$1")`,
		`=before(1, [2..3]) and overlaps before([1..5], (3..8]) and coincides(range("< 3"), range("<= 3"))`,
		`=n instance of function<string, number> -> context<a: list<number>>`,
		`=s + "\u00e9\n\"" = "paid"`,
		`=missing != null and missing > 5`,
		`=(a = b) = (c < d)`,
		`=.5 + 007`,
		`=if n > 3 then "big" else if n > 1 then "mid" else null`,
		`=(if t then 1 else 2) + 1`,
		`=[1, "a", [true, null], {k: n}]`,
		`={a: 1, "b c": n, d: {e: a + 1}}.d.e`,
		`={first name: s, x-y: 2}`,
		`=list[1] + list[-1]`,
		`=orders[total > 100].id`,
		`=orders.id`,
		`=[{a: 1}, {a: 2}][a > 1][1].a`,
		`=list2[item = "a"]`,
		`=for x in list, y in 1..3 return [x, y]`,
		`=for i in 1..5 return if i = 1 then 1 else i * partial[-1]`,
		`=some x in orders satisfies x.total > 100`,
		`=every x in [1, 2] satisfies x between 1 and 2`,
		`=n in (1..5]`,
		`=n in [1..5[`,
		`=s in ("paid", "open")`,
		`=n in (< 3, > 4, [7..9])`,
		`=n in list`,
		`=n instance of number and s instance of string`,
		`=(x instance of date) and time`,
		`=is defined(order.customer) and not(is defined(missing.x))`,
		`=string length(s) + count(list)`,
		`=upper case(substring(s, 2, 2)) + lower case("X")`,
		`=substring before(s, "i") + substring after(s, "a")`,
		`=contains(s, "ai") and starts with(s, "p") and ends with(s, "d")`,
		`=matches(s, "^p.*d$", "i")`,
		`=replace(s, "(a)(i)", "$2$1")`,
		`=split("a,b,,c", ",")`,
		`=string join(["a", null, "b"], ", ", "[", "]")`,
		`=trim("  x  ") + string(n) + string([1, "a"])`,
		`=number("1,000.5", ",", ".") + number("2")`,
		`=list contains(list, 1) and count(list) = 2`,
		`=sum([1, 2]) + mean(1, 2) + min([3, 1]) + max(2, 5) + product([2, 3])`,
		`=append(list, 3) = concatenate(list, [3])`,
		`=distinct values([1, 1, "1"]) = union([1], [1, "1"])`,
		`=flatten([[1, [2]], 3])`,
		`=index of([1, 2, 1], 1)`,
		`=reverse(sublist([1, 2, 3], 2)) = remove(insert before([3, 2], 1, 9), 1)`,
		`=sort(orders, function(x, y) x.total > y.total)[1].id`,
		`=all([t, not(f)]) or any([f])`,
		`=abs(-1) + floor(1.5) + ceiling(1.5) + round half up(1.005, 2) + decimal(1.5, 0)`,
		`=modulo(-12, 5) + (if odd(3) and even(4) then 1 else 0)`,
		`=get value(order, "total") + count(get entries(order))`,
		`=context put(order, ["customer", "vip"], true).customer.vip`,
		`=date("2024-01-31") + duration("P1M")`,
		`=@"2024-01-31T10:00:00Z" - duration("PT1H30M")`,
		`=date and time("2024-01-31T10:00:00+01:00") < date and time("2024-01-31T10:00:00Z")`,
		`=time("10:00:00").hour + date("2024-01-31").month`,
		`=years and months duration(date("2020-01-15"), date("2024-03-14"))`,
		`=string(@"P1DT2H") + string(@"10:00:00") + string(today())`,
		`=now() > date and time("2024-01-01T00:00:00Z")`,
		`=duration("PT1H") * 2 / duration("PT30M")`,
		`=day of week(date(2024, 1, 31)) + month of year(today())`,
		`=substring(string: s, start position: 2)`,
		`=get or else(missing, "default")`,
		"=experiment.`steady-state-hypothesis`.title + `order-id`",
		"={`a b`: 1, c: `a b`}[`if` = null]",
		"=`unterminated", "=``",
		`=[uuid(), uuid()][2] != uuid()`,
		`=x == 1`, `=f(x)`, `=foo bar(x)`, `=not a = b`, `=1 < 2 < 3`, `=uuid()`,
		`="unterminated`, `=1/0`, `=a.`, `PT15M`, `=`, "=\xff", `=@"2024-13-01"`,
		`=[1..5]`, `={a: 1, a: 2}`, `=sort(list, list)`,
		// Blowups: shared parts written out, walked or compared; work per
		// iteration; matches everywhere.
		`=string({a: [s, s], b: [a, a], c: [b, b], d: [c, c]})`,
		`={a: [xs, xs], b: [a, a], c: [b, b], d: [c, c]}.d`,
		`=for i in 1..n return string length(s)`,
		`=count(distinct values(for i in 1..n return string(order)))`,
		`=split(s + s + s, "")`, `=replace(s, "", "$0")`, `=extract(s, "a*")`,
		`=duration("P" + string join(for i in 1..n return "999999999") + "D")`,
	} {
		f.Add(src)
	}
	env := vars()
	in := Env{Now: time.Date(2024, 1, 31, 10, 0, 0, 0, time.UTC), Seed: "instance/7/Task_1/t3", Limits: fuzzLimits}
	f.Fuzz(func(t *testing.T, src string) {
		e, err := Compile(src)
		if err != nil {
			code := fault.Code(err)
			if code != fault.BPMNExpression && code != fault.IncidentExpressionLimit {
				t.Fatalf("Compile(%q) error %v has code %q", src, err, code)
			}
			if n := strings.Count(err.Error(), "SUTRA."); n != 1 {
				t.Fatalf("Compile(%q) error %q names a code %d times", src, err, n)
			}
			return
		}
		var v1 any
		var err1 error
		allocated, took := measure(func() { v1, err1 = e.EvalIn(env, in) })
		// The budget, plus what the few uncharged allocations of each charge
		// (boxed numbers, slice growth) may add, plus the error's text.
		if limit := uint64(8*fuzzLimits.MaxBytes + 4*len(src) + 1<<20); allocated > limit {
			t.Fatalf("EvalIn(%q) allocated %d bytes, more than %d under its limits (%v)", src, allocated, limit, err1)
		}
		if took > time.Second {
			t.Fatalf("EvalIn(%q) took %v under its limits (%v)", src, took, err1)
		}
		// run turns a panic into an error; it must never happen.
		if re := runtime.Error(nil); errors.As(err1, &re) || err1 != nil && strings.Contains(err1.Error(), "internal error") {
			t.Fatalf("EvalIn(%q) panicked: %v", src, err1)
		}
		if err1 == nil {
			if _, err := json.Marshal(v1); err != nil {
				t.Fatalf("EvalIn(%q) = %#v, which is not JSON: %v", src, v1, err)
			}
			if !jsonOnly(v1) {
				t.Fatalf("EvalIn(%q) = %#v, which holds a non-JSON value", src, v1)
			}
		}
		if again, errAgain := e.EvalIn(env, in); (err1 == nil) != (errAgain == nil) || !reflect.DeepEqual(v1, again) {
			t.Fatalf("EvalIn(%q) is not deterministic: %#v, %v then %#v, %v", src, v1, err1, again, errAgain)
		}
		if _, err := e.EvalIn(env, Env{Limits: fuzzLimits}); !e.UsesClock() && !e.UsesSeed() && (err == nil) != (err1 == nil) {
			t.Fatalf("Eval(%q) without a clock or seed: %v; with them: %v, but the expression uses neither", src, err, err1)
		}
		if !e.UsesVariables() && !e.UsesClock() && !e.UsesSeed() {
			// A constant evaluates alike without the variables.
			if v, err := e.EvalIn(nil, Env{Limits: fuzzLimits}); (err == nil) != (err1 == nil) || !reflect.DeepEqual(v, v1) {
				t.Fatalf("%q reads no variables, but gives %#v, %v without them and %#v, %v with them", src, v, err, v1, err1)
			}
		}
		_, _ = e.EvalBoolIn(env, in)
		_, _ = e.EvalStringIn(env, in)

		canon := e.String()
		e2, err := Compile(canon)
		if err != nil {
			t.Fatalf("Compile(%q) succeeded but its canonical form %q is refused: %v", src, canon, err)
		}
		if again := e2.String(); again != canon {
			t.Fatalf("canonical form is not stable: %q -> %q -> %q", src, canon, again)
		}
		if e2.UsesClock() != e.UsesClock() || e2.UsesSeed() != e.UsesSeed() || e2.UsesVariables() != e.UsesVariables() {
			t.Fatalf("%q uses the clock, the seed, variables: %v, %v, %v, but canonical %q: %v, %v, %v", src,
				e.UsesClock(), e.UsesSeed(), e.UsesVariables(), canon, e2.UsesClock(), e2.UsesSeed(), e2.UsesVariables())
		}
		v2, err2 := e2.EvalIn(env, in)
		if (err1 == nil) != (err2 == nil) || !reflect.DeepEqual(v1, v2) {
			t.Fatalf("%q = %#v, %v but canonical %q = %#v, %v", src, v1, err1, canon, v2, err2)
		}
	})
}

// jsonOnly reports whether v holds only values encoding/json writes as
// themselves: no temporal value may leave the package.
func jsonOnly(v any) bool {
	switch x := v.(type) {
	case []any:
		for _, item := range x {
			if !jsonOnly(item) {
				return false
			}
		}
		return true
	case map[string]any:
		for _, item := range x {
			if !jsonOnly(item) {
				return false
			}
		}
		return true
	case nil, bool, string, float64, float32, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, json.Number:
		return true
	}
	return false
}

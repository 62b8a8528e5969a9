package feel

import (
	"slices"
	"strings"
	"testing"
)

func TestStringFunctions(t *testing.T) {
	checkEval(t, []evalCase{
		{src: `=string length(s)`, want: 4.0},
		{src: `=string length("")`, want: 0.0},
		{src: `=string length("😀é")`, want: 2.0}, // characters, not UTF-16 units
		{src: `=string length(missing)`, err: `string length: argument "string" must be a string, got null`},
		{src: `=string length(n)`, err: `string length: argument "string" must be a string, got a number`},
		{src: `=upper case(s)`, want: "PAID"},
		{src: `=upper case(prénom)`, want: "ZOÉ"},
		{src: `=lower case("ÀB")`, want: "àb"},
		{src: `=lower case(nul)`, err: `lower case: argument "string" must be a string, got null`},
		{src: `=substring("foobar", 3)`, want: "obar"},
		{src: `=substring("foobar", 3, 3)`, want: "oba"},
		{src: `=substring("foobar", -2, 1)`, want: "a"},
		{src: `=substring("foobar", 1, 100)`, want: "foobar"},
		{src: `=substring("foobar", 7)`, want: ""},
		{src: `=substring("foobar", 0)`, want: ""},
		{src: `=substring("😀ab", 2)`, want: "ab"},
		{src: `=substring("foobar", 3, null)`, want: "obar"},
		{src: `=substring(s, n + 3)`, err: "substring: start position 8 is outside a string of 4 characters"},
		{src: `=substring(s, -n)`, err: "substring: start position -5 is outside a string of 4 characters"},
		{src: `=substring(s, 1, -n)`, err: "substring: length -5 is negative"},
		{src: `=substring(s, 1.5)`, err: `substring: argument "start position" must be a whole number, got 1.5`},
		{src: `=substring(s, "1")`, err: `substring: argument "start position" must be a number, got a string`},
		{src: `=substring before("foobar", "bar")`, want: "foo"},
		{src: `=substring before("foobar", "xyz")`, want: ""},
		{src: `=substring before("foobar", "foo")`, want: ""},
		{src: `=substring after("foobar", "ob")`, want: "ar"},
		{src: `=substring after("foobar", "xyz")`, want: ""},
		{src: `=substring after("foobar", "")`, want: "foobar"},
		{src: `=substring after(s, n)`, err: `substring after: argument "match" must be a string, got a number`},
		{src: `=contains(s, "ai")`, want: true},
		{src: `=contains(s, "x")`, want: false},
		{src: `=starts with(s, "pa")`, want: true},
		{src: `=ends with(s, "pa")`, want: false},
		{src: `=contains(missing, "a")`, err: `contains: argument "string" must be a string, got null`},
		{src: `=matches(s, "^p.*d$")`, want: true},
		{src: `=matches(s, "ai")`, want: true}, // a match anywhere, as in XPath
		{src: `=matches("PAID", "paid", "i")`, want: true},
		{src: `=matches("a\nb", "a.b", "s")`, want: true},
		{src: `=matches("a\nb", "^b", "m")`, want: true},
		{src: `=matches("a\nb", "^b")`, want: false},
		{src: `=matches(s, s)`, want: true},
		{src: `=matches(s, s + "(")`, err: "matches: invalid regular expression \"paid(\": missing closing ): `paid(`"},
		{src: `=matches(s, "a", s)`, err: `matches: regular expression flag 'p' is not one of XPath's (s, m, i, x, q)`},
		{src: `=matches("hello world", "hello\ sworld", "x")`, want: true},
		{src: `=matches("a b", "[ ]b", "x")`, want: true},
		{src: `=matches("a.b", ".", "q") and not(matches("ab", ".", "q"))`, want: true},
		{src: `=replace("0123456789", "(\d{3})(\d{3})(\d{4})", "($1) $2-$3")`, want: "(012) 345-6789"},
		{src: `=split("John  Doe", "\s+")`, want: []any{"John", "Doe"}},
		{src: `=replace("abcb", "b", "x")`, want: "axcx"},
		{src: `=replace("abc", "(b)(c)", "$2$1")`, want: "acb"},
		{src: `=replace("abc", "b", "[$0]")`, want: "a[b]c"},
		{src: `=replace("abc", "(b)", "$10")`, want: "ab0c"}, // group 1, then 0: there is no group 10
		{src: `=replace("abc", "b", "\\$1")`, want: "a$1c"},
		{src: `=replace("ABC", "b", "x", "i")`, want: "AxC"},
		// a Modeler file's "\$": the backslash reaches the pattern (feel-scala's escapes)
		{src: `=replace("cost: 5$", "\$", " USD")`, want: "cost: 5 USD"},
		{src: `=replace("a1b22", "\d+", "#")`, want: "a#b#"},
		{src: `=replace(s, "", "-")`, want: "-p-a-i-d-"},
		{src: `=replace(s, "a", "$")`, err: "replace: $ in the replacement must be followed by a group number"},
		{src: `=replace(s, "a", "$2")`, err: "replace: the replacement refers to group 2, but the pattern has 0"},
		{src: `=replace(s, "a", "\\")`, err: `replace: the replacement ends with a lone \`},
		{src: `=split("a,b,,c,", ",")`, want: []any{"a", "b", "", "c", ""}},
		{src: `=split("a b  c", "\\s+")`, want: []any{"a", "b", "c"}},
		{src: `=split("abc", "")`, want: []any{"a", "b", "c", ""}},
		{src: `=split("", ",")`, want: []any{""}},
		{src: `=split(s, n)`, err: `split: argument "delimiter" must be a string, got a number`},
		{src: `=extract("a1b22", "[0-9]+")`, want: []any{"1", "22"}},
		{src: `=extract(s, "x")`, want: []any{}},
		{src: `=string join(["a", "b"])`, want: "ab"},
		{src: `=string join(["a", "b"], ", ")`, want: "a, b"},
		{src: `=string join(["a", null, "b"], "-")`, want: "a-b"},
		{src: `=string join([], "-")`, want: ""},
		{src: `=string join(["a", "b"], "-", "[", "]")`, want: "[a-b]"},
		{src: `=string join(["a"], null)`, want: "a"},
		{src: `=string join(list, ",")`, err: `string join: argument "list" must be a list of strings, but it holds a number`},
		{src: `=string join(s)`, err: `string join: argument "list" must be a list, got a string`},
		{src: `=trim("  a b \n\t")`, want: "a b"},
		{src: `=trim(s)`, want: "paid"},
		{src: `=is blank(" \n")`, want: true},
		{src: `=is blank(s)`, want: false},
	})
}

func TestConversionFunctions(t *testing.T) {
	checkEval(t, []evalCase{
		{src: `=string(n)`, want: "5"},
		{src: `=string(1.5)`, want: "1.5"},
		{src: `=string(i)`, want: "7"},
		{src: `=string(big)`, want: "1152921504606846976"}, // exact: no arithmetic
		{src: `=string(jn)`, want: "2.5"},
		{src: `=string(-0.0)`, want: "0"},
		{src: `=string(s)`, want: "paid"},
		{src: `=string(t)`, want: "true"},
		{src: `=string(nul)`, want: nil},
		{src: `=string(missing)`, want: nil},
		{src: `=string(list)`, want: `[1, "a"]`},
		{src: `=string({b: [null], a: "x"})`, want: `{a:"x", b:[null]}`}, // keys in order
		{src: `=string(date("2024-01-31"))`, want: "2024-01-31"},
		{src: `=string([date("2024-01-31")])`, want: "[2024-01-31]"},
		{src: `=number("1.5")`, want: 1.5},
		{src: `=number("-12")`, want: -12.0},
		{src: `=number("+.5")`, want: 0.5},
		{src: `=number("1.5e3")`, want: 1500.0},
		{src: `=number("1 000,5", " ", ",")`, want: 1000.5},
		{src: `=number("1,000.5", ",", ".")`, want: 1000.5},
		{src: `=number("1.000,5", ".", ",")`, want: 1000.5},
		{src: `=number("1,000", ",")`, want: 1000.0},
		{src: `=number("5", null, null)`, want: 5.0},
		{src: `=number(s)`, err: `number: cannot read "paid" as a number`},
		{src: `=number(" " + string(n))`, err: `number: cannot read " 5" as a number`},
		{src: `=number("1e" + string(n * 200))`, err: `number: number "1e1000" is out of range`},
		{src: `=number(s + "12345678901234567890")`, err: `cannot read "paid12345678901234567890"`},
		{src: `=number(string(big))`, err: "number: integer 1152921504606846976 is too large for exact arithmetic"},
		{src: `=number(n)`, err: `number: argument "from" must be a string, got a number`},
		{src: `=number("1", s)`, err: `number: the grouping separator must be " ", "," or "."`},
		{src: `=number(s, ",", ",")`, err: `number: the decimal separator must be "," or "." and differ from the grouping separator`},
	})
}

func TestBooleanFunctions(t *testing.T) {
	checkEval(t, []evalCase{
		{src: `=not(f)`, want: true},
		{src: `=get or else(missing, "x")`, want: "x"},
		{src: `=get or else(nul, "x")`, want: "x"},
		{src: `=get or else(s, "x")`, want: "paid"},
		{src: `=get or else(f, true)`, want: false},
		{src: `=assert(n, n > 1)`, want: 5.0},
		{src: `=assert(n, n > 9)`, err: "assert: the condition is not fulfilled"},
		{src: `=assert(n, n > 9, "n is too small")`, err: "assert: n is too small"},
		{src: `=assert(n, missing)`, err: "assert: the condition is not fulfilled"},
	})
}

func TestListFunctions(t *testing.T) {
	checkEval(t, []evalCase{
		{src: `=list contains(xs, 2)`, want: true},
		{src: `=list contains(xs, "2")`, want: false},
		{src: `=list contains([1, null], null)`, want: true},
		{src: `=list contains(list2, 1.0)`, want: true},
		{src: `=list contains(missing, 1)`, err: `list contains: argument "list" must be a list, got null`},
		{src: `=count(xs)`, want: 4.0},
		{src: `=count([])`, want: 0.0},
		{src: `=count(s)`, err: `count: argument "list" must be a list, got a string`},
		{src: `=sum(xs)`, want: 13.0},
		{src: `=sum(list: xs)`, want: 13.0},
		{src: `=count(list: [])`, want: 0.0},
		{src: `=sum(1, 2, n)`, want: 8.0},
		{src: `=sum(n)`, want: 5.0},
		{src: `=sum([])`, want: nil},
		{src: `=sum(list)`, err: "sum: expected a list of numbers, but it holds a string"},
		{src: `=sum([missing])`, err: "sum: expected a list of numbers, but it holds null"},
		{src: `=sum([big])`, err: "too large for exact arithmetic"},
		{src: `=mean(xs)`, want: 3.25},
		{src: `=mean([])`, want: nil},
		{src: `=product(xs)`, want: 42.0},
		{src: `=product([])`, want: nil},
		{src: `=median([3, 1, 2])`, want: 2.0},
		{src: `=median(3, 1, 2, 4)`, want: 2.5},
		{src: `=median([])`, want: nil},
		{src: `=stddev(2, 4, 7, 5)`, want: 2.0816659994661326},
		{src: `=stddev([n])`, err: "stddev: the sample standard deviation needs at least two numbers"},
		{src: `=mode([6, 3, 9, 6, 6])`, want: []any{6.0}},
		{src: `=mode(6, 1, 9, 6, 1)`, want: []any{1.0, 6.0}},
		{src: `=mode([])`, want: []any{}},
		{src: `=min(xs)`, want: 1.0},
		{src: `=max(xs)`, want: 7.0},
		{src: `=min(3, n, 4)`, want: 3.0},
		{src: `=max("a", "c", "b")`, want: "c"},
		{src: `=max([date("2024-01-01"), date("2023-01-01")])`, want: "2024-01-01"},
		{src: `=min([])`, want: nil},
		{src: `=min(list)`, err: "min: the items must be comparable: cannot compare a string with a number using min"},
		{src: `=max([nul])`, err: "max: the items must be comparable: cannot compare null with null using max"},
		{src: `=all([t, t])`, want: true},
		{src: `=all(t, f)`, want: false},
		{src: `=all([])`, want: true},
		{src: `=all([t, nul, f])`, want: false},
		{src: `=all([t, nul])`, err: "all: expected a list of booleans, but it holds null"},
		{src: `=any([f, t])`, want: true},
		{src: `=any(f, f)`, want: false},
		{src: `=any([])`, want: false},
		{src: `=any([n, t])`, want: true},
		{src: `=any([f, n])`, err: "any: expected a list of booleans, but it holds a number"},
		{src: `=sublist(xs, 2)`, want: []any{2.0, 3.0, 7.0}},
		{src: `=sublist(xs, 2, 2)`, want: []any{2.0, 3.0}},
		{src: `=sublist(xs, -2, 1)`, want: []any{3.0}},
		{src: `=sublist(xs, 9)`, want: []any{}},
		{src: `=sublist(xs, 2, 99)`, want: []any{2.0, 3.0, 7.0}},
		{src: `=sublist(xs, zero)`, err: "sublist: start position must not be 0 (positions count from 1)"},
		{src: `=append(xs, 9)`, want: []any{1.0, 2.0, 3.0, 7.0, 9.0}},
		{src: `=append([], 1, "a")`, want: []any{1.0, "a"}},
		{src: `=append([1], [2])`, want: []any{1.0, []any{2.0}}},
		{src: `=append(n, 1)`, err: `append: argument "list" must be a list, got a number`},
		{src: `=concatenate([1], [2, 3], [])`, want: []any{1.0, 2.0, 3.0}},
		{src: `=concatenate([1], 2)`, want: []any{1.0, 2.0}},
		{src: `=insert before(xs, 1, 0)`, want: []any{0.0, 1.0, 2.0, 3.0, 7.0}},
		{src: `=insert before(xs, -1, 5)`, want: []any{1.0, 2.0, 3.0, 5.0, 7.0}},
		{src: `=insert before([], 1, "a")`, want: []any{"a"}},
		{src: `=insert before(xs, zero, 1)`, err: "insert before: position must not be 0 (positions count from 1)"},
		{src: `=remove(xs, 2)`, want: []any{1.0, 3.0, 7.0}},
		{src: `=remove(xs, -1)`, want: []any{1.0, 2.0, 3.0}},
		{src: `=remove(xs, 9)`, want: []any{1.0, 2.0, 3.0, 7.0}},
		{src: `=remove(xs, zero)`, err: "remove: position must not be 0 (positions count from 1)"},
		{src: `=reverse(xs)`, want: []any{7.0, 3.0, 2.0, 1.0}},
		{src: `=reverse([])`, want: []any{}},
		{src: `=index of([1, 2, 1], 1)`, want: []any{1.0, 3.0}},
		{src: `=index of(xs, 9)`, want: []any{}},
		{src: `=distinct values([1, 1.0, "1", [1], [1.0], {a: 1}, {a: 1}, null, null])`, want: []any{1.0, "1", []any{1.0}, map[string]any{"a": 1.0}, nil}},
		{src: `=distinct values(list2 + [])`, err: "cannot apply + to a list and a list"},
		{src: `=duplicate values([1, 2, 1, 3, 2, 1])`, want: []any{1.0, 2.0}},
		{src: `=union([1, 2], [2, 3], [])`, want: []any{1.0, 2.0, 3.0}},
		{src: `=union(list, list2)`, want: []any{1.0, "a"}},
		{src: `=flatten([[1, [2]], [[3]], 4, []])`, want: []any{1.0, 2.0, 3.0, 4.0}},
		{src: `=flatten(n)`, err: `flatten: argument "list" must be a list, got a number`},
		{src: `=sort(xs, function(a, b) a > b)`, want: []any{7.0, 3.0, 2.0, 1.0}},
		{src: `=sort(["b", "a", "c"], function(x, y) x < y)`, want: []any{"a", "b", "c"}},
		{src: `=sort(orders, function(x, y) x.total > y.total).id`, want: []any{"b", "a"}},
		{src: `=sort(list: xs, precedes: function(a, b) a > b)[1]`, want: 7.0},
		{src: `=sort([], function(a, b) a < b)`, want: []any{}},
		// stable: equal items keep their order
		{src: `=sort([{k: 1, v: "a"}, {k: 0, v: "b"}, {k: 1, v: "c"}], function(x, y) x.k < y.k).v`, want: []any{"b", "a", "c"}},
		{src: `=sort(list, function(a, b) a < b)`, err: "sort: cannot compare a string with a number using <"},
		{src: `=sort(xs, function(a, b) a)`, err: "sort: the precedes function must return a boolean, got a number"},
		{src: `=sort(missing, function(a, b) a < b)`, err: `sort: argument "list" must be a list, got null`},
		{src: `=is empty([])`, want: true},
		{src: `=is empty(xs)`, want: false},
		{src: `=partition(xs, 3)`, want: []any{[]any{1.0, 2.0, 3.0}, []any{7.0}}},
		{src: `=partition(xs, zero)`, err: "partition: size must be greater than 0, got 0"},
	})
	// Built-ins never change the lists and contexts they are given.
	v := vars()
	for _, src := range []string{`=append(xs, 1)`, `=reverse(xs)`, `=sort(xs, function(a, b) a > b)`, `=insert before(xs, 1, 0)`, `=remove(xs, 1)`, `=context put(order, "total", 0)`} {
		if _, err := MustCompile(src).Eval(v); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(v["xs"].([]any), []any{1.0, 2.0, 3.0, 7.0}) || v["order"].(map[string]any)["total"] != 150.0 {
		t.Fatalf("a built-in changed its argument: xs = %v, order = %v", v["xs"], v["order"])
	}
}

func TestNumericFunctions(t *testing.T) {
	checkEval(t, []evalCase{
		{src: `=abs(-n)`, want: 5.0},
		{src: `=abs(n)`, want: 5.0},
		{src: `=abs(s)`, err: `abs: argument "n" must be a number or a duration, got a string`},
		{src: `=floor(1.5)`, want: 1.0},
		{src: `=floor(-1.5)`, want: -2.0},
		{src: `=floor(1.567, 2)`, want: 1.56},
		{src: `=ceiling(1.2)`, want: 2.0},
		{src: `=ceiling(-1.5)`, want: -1.0},
		{src: `=ceiling(1.561, 2)`, want: 1.57},
		{src: `=round up(-1.21, 1)`, want: -1.3},
		{src: `=round down(1.29, 1)`, want: 1.2},
		{src: `=round half up(2.5, 0)`, want: 3.0},
		{src: `=round half up(-2.5, 0)`, want: -3.0},
		// on the decimal written, not the nearest binary fraction (1.00499...)
		{src: `=round half up(1.005, 2)`, want: 1.01},
		{src: `=round half down(2.5, 0)`, want: 2.0},
		{src: `=round half down(2.51, 0)`, want: 3.0},
		{src: `=decimal(2.5, 0)`, want: 2.0},
		{src: `=decimal(3.5, 0)`, want: 4.0},
		{src: `=decimal(1 / 3, 2)`, want: 0.33},
		{src: `=decimal(1234.5, -2)`, want: 1200.0},
		{src: `=decimal(n, 400)`, want: 5.0},
		{src: `=decimal(n, -400)`, want: 0.0},
		{src: `=round up(n, -400)`, err: "round up: the result overflows"},
		{src: `=decimal(n, 1.5)`, err: `decimal: argument "scale" must be a whole number, got 1.5`},
		{src: `=decimal(s, 1)`, err: `decimal: argument "n" must be a number, got a string`},
		{src: `=modulo(12, 5)`, want: 2.0},
		{src: `=modulo(-12, 5)`, want: 3.0},
		{src: `=modulo(12, -5)`, want: -3.0},
		{src: `=modulo(10.5, 3)`, want: 1.5},
		{src: `=modulo(n, zero)`, err: "modulo: division by zero"},
		{src: `=sqrt(16)`, want: 4.0},
		{src: `=sqrt(-n)`, want: nil},
		{src: `=odd(n)`, want: true},
		{src: `=odd(-3)`, want: true},
		{src: `=odd(2.5)`, want: false},
		{src: `=even(-2)`, want: true},
		{src: `=even(n)`, want: false},
		{src: `=even(missing)`, err: `even: argument "number" must be a number, got null`},
	})
}

func TestContextFunctions(t *testing.T) {
	checkEval(t, []evalCase{
		{src: `=get value(order, "total")`, want: 150.0},
		{src: `=get value(order, "missing")`, want: nil},
		{src: `=get value(order, ["customer", "id"])`, want: "c-1"},
		{src: `=get value(order, ["total", "x"])`, want: nil},
		{src: `=get value(order, [])`, want: nil},
		{src: `=get value(context: order, key: "status")`, want: "paid"},
		{src: `=get value(missing, "a")`, err: `get value: argument "context" must be a context, got null`},
		{src: `=get value(order, n)`, err: `get value: argument "key" must be a string or a list of strings, got a number`},
		{src: `=get entries({b: 1, a: 2})`, want: []any{map[string]any{"key": "a", "value": 2.0}, map[string]any{"key": "b", "value": 1.0}}},
		{src: `=get entries({})`, want: []any{}},
		{src: `=get entries(list)`, err: `get entries: argument "context" must be a context, got a list`},
		{src: `=context put({a: 1}, "b", 2)`, want: map[string]any{"a": 1.0, "b": 2.0}},
		{src: `=context put({a: 1}, "a", null)`, want: map[string]any{"a": nil}},
		{src: `=context put({a: {b: 1}}, ["a", "c"], 2)`, want: map[string]any{"a": map[string]any{"b": 1.0, "c": 2.0}}},
		{src: `=context put({}, ["a", "b"], 1)`, want: map[string]any{"a": map[string]any{"b": 1.0}}},
		{src: `=context put({}, [], 1)`, want: nil},
		{src: `=context put({}, [n], 1)`, err: `context put: argument "key" must be a string or a list of strings, but it holds a number`},
		{src: `=context merge([{a: 1}, {a: 2, b: 3}])`, want: map[string]any{"a": 2.0, "b": 3.0}},
		{src: `=context merge({a: 1}, {b: 2})`, want: map[string]any{"a": 1.0, "b": 2.0}},
		{src: `=context merge([{a: 1}, n])`, err: "context merge: expected a list of contexts, but it holds a number"},
		{src: `=context([{key: "a", value: 1}, {key: "b", value: null}])`, want: map[string]any{"a": 1.0, "b": nil}},
		{src: `=context([{key: s}])`, err: `context: expected a list of contexts with a string "key" and a "value"`},
	})
}

func TestFunctionsRefused(t *testing.T) {
	checkRefused(t, []refusedCase{
		{`=foo(x)`, `function "foo" is not supported`, -1},
		{`=foo bar(x)`, `function "foo bar" is not supported`, -1},
		{`=a + foo bar baz(x) * 2`, `function "foo bar baz" is not supported`, -1},
		{`=string lenght(s)`, `function "string lenght" is not supported`, -1},
		{`=log(n)`, `function "log" is not supported: its floating-point result may differ between platforms`, -1},
		{`=to json(x)`, `function "to json" is not supported`, -1},
		{`=before(1)`, `function "before": takes 2 arguments, got 1`, -1},
		{`=upper case()`, `function "upper case": takes 1 argument, got 0`, -1},
		{`=upper case(a, b)`, `function "upper case": takes 1 argument, got 2`, -1},
		{`=substring(a)`, `function "substring": takes 2 or 3 arguments, got 1`, -1},
		{`=string join()`, `function "string join": takes 1, 2 or 4 arguments, got 0`, -1},
		{`=sum()`, `function "sum": takes at least 1 argument, got 0`, -1},
		{`=not(a, b)`, `function "not": takes 1 argument, got 2`, -1},
		{`=not()`, `function "not": takes 1 argument, got 0`, -1},
		{`=now(1)`, `function "now": takes 0 arguments, got 1`, -1},
		{`=substring(string: a, foo: 1)`, `function "substring": no form of it has the parameters string, foo`, -1},
		{`=substring(string: a, string: b)`, `function "substring": argument "string" is given twice`, -1},
		{`=append(list: [1], items: 2)`, `function "append": named arguments are not supported for it but for a single list; pass the arguments in order`, -1},
		{`=sum(items: [1])`, `function "sum": named arguments are not supported for it but for a single list`, -1},
		{`=substring("a", start position: 1)`, "arguments must be all named or all positional", 17},
		{`=upper case(a`, "expected ) to close the ( at position 12, found end of expression", 14},
		{`=sort(xs)`, "sort takes a list and a precedes function: sort(xs, function(a, b) a < b)", 2},
		{`=sort(xs, xs)`, `sort needs a function(a, b) as its precedes argument, found name "xs"`, 11},
		{`=sort(xs, function(a) a)`, "the precedes function of sort takes 2 parameters, not 1", 11},
		{`=sort(xs, function(a, a) a)`, `expected a parameter name, found name "a"`, 23},
		{`=sort(xs, function(a, b) a < b, 1)`, "sort takes a list and a precedes function", 33},
		{`=matches(s, "(")`, "matches: invalid regular expression \"(\": missing closing ): `(`", 2},
		{`=matches(s, "(?<=a)b")`, `matches: invalid regular expression "(?<=a)b"`, 2},
		{`=matches(s, "[a-z-[aeiou]]")`, `class subtraction (-[...]) is not supported`, 2},
		{`=matches(s, "\\p{IsBasicLatin}")`, `matches: invalid regular expression`, 2},
		{`=replace(s, "a", "b", "y")`, "replace: regular expression flag 'y' is not one of XPath's (s, m, i, x, q)", 2},
		{`=split(s, "[")`, "split: invalid regular expression", 2},
		{`=date("2024-02-30")`, `invalid date "2024-02-30" (want YYYY-MM-DD)`, 2},
		{`=time("24:00:01")`, `invalid time "24:00:01"`, 2},
		{`=time("24:00:00.01")`, `invalid time "24:00:00.01"`, 2},
		{`=time("24:01")`, `invalid time "24:01"`, 2},
		{`=date and time("2024-01-31T10:00:00+19:00")`, `invalid UTC offset "+19:00"`, 2},
		{`=duration("P1Y2D")`, `invalid duration "P1Y2D" (want PnYnM or PnDTnHnMnS)`, 2},
		{`=duration("PT1.5M")`, `invalid duration "PT1.5M"`, 2},
		{`=upper case(5)`, `always fails: upper case: argument "string" must be a string, got a number`, 0},
	})
}

// TestFunctionNames checks that every built-in named in docs/expressions.md
// exists and that the refused ones are refused, so the two stay in step.
func TestFunctionNames(t *testing.T) {
	for name, b := range builtins {
		if strings.Count(name, " ")+1 > maxFuncWords {
			t.Errorf("%q has more words than maxFuncWords", name)
		}
		if b.fn == nil && name != "not" && name != "is defined" && name != "sort" {
			t.Errorf("%q has no implementation", name)
		}
	}
	for name := range unsupportedFuncs {
		if builtins[name] != nil {
			t.Errorf("%q is both supported and refused", name)
		}
	}
}

// DMN 1.5's parameter names: get value(m, key), get entries(m), context
// put(context, keys, value).
func TestDMN15ParameterNames(t *testing.T) {
	checkEval(t, []evalCase{
		{src: `=get value(key: "a", m: {a: "foo"})`, want: "foo"},
		{src: `=get entries(m: {a: 1})`, want: []any{map[string]any{"key": "a", "value": 1.0}}},
		{src: `=context put(context: {x: 1, y: {a: 0}}, keys: ["y", "a"], value: 2)`, want: map[string]any{"x": 1.0, "y": map[string]any{"a": 2.0}}},
	})
}

// The range functions follow DMN 1.4's table, points and ranges mixed, an
// unbounded end beyond every point.
func TestRangeFunctions(t *testing.T) {
	checkEval(t, []evalCase{
		{src: `=[before(1, 10), before(10, 1), before(1, [2..5]), before(1, (1..5]), before(1, [1..5])]`, want: []any{true, false, true, true, false}},
		{src: `=[before([1..5], 10), before([1..5), 5), before([1..5], [5..8]), before([1..5), [5..8])]`, want: []any{true, true, false, true}},
		{src: `=[after(10, 1), after([5..8], [1..5)), after(12, [1..10]), after(range("< 5"), 1)]`, want: []any{true, true, true, false}},
		{src: `=[meets([1..5], [5..10]), meets([1..5), [5..10]), met by([5..10], [1..5])]`, want: []any{true, false, true}},
		{src: `=[overlaps([1..5], [3..8]), overlaps([1..5], [6..8]), overlaps([1..5], (5..8])]`, want: []any{true, false, false}},
		{src: `=[overlaps before([1..5], [3..8]), overlaps before([3..8], [1..5]), overlaps after([3..8], [1..5])]`, want: []any{true, false, true}},
		{src: `=[finishes(10, [1..10]), finishes(10, [1..10)), finishes([5..10], [1..10]), finished by([1..10], [5..10])]`, want: []any{true, false, true, true}},
		{src: `=[includes([1..10], 5), includes([1..10], 12), includes([1..10], [4..6]), includes(range(">= 1"), [4..6]), during(5, [1..10])]`, want: []any{true, false, true, true, true}},
		{src: `=[starts(1, [1..10]), starts(1, (1..10]), starts([1..5], [1..10]), started by([1..10], [1..5])]`, want: []any{true, false, true, true}},
		{src: `=[coincides(5, 5), coincides(3, 4), coincides([1..5], [1..5]), coincides([1..5], (1..5])]`, want: []any{true, false, true, false}},
		{src: `=before(date("2024-01-01"), [date("2024-02-01")..date("2024-03-01")])`, want: true},
		{src: `=before(n, "a")`, err: `before: cannot compare a number with a string using before`},
		{src: `=before(n, [1..2]) or before(null, 1)`, err: `a range function needs points or ranges, got null`},
	})
}

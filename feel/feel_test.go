package feel

import (
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sutra-run/worker/fault"
)

// vars is the environment the semantics tests read.
func vars() map[string]any {
	return map[string]any{
		"n":      5.0,
		"zero":   0.0,
		"i":      7, // a Go int, as a caller building variables in code would pass
		"big":    int64(1) << 60,
		"jn":     json.Number("2.5"),
		"s":      "paid",
		"t":      true,
		"f":      false,
		"nul":    nil,
		"list":   []any{1.0, "a"},
		"list2":  []any{1, "a"},
		"order":  map[string]any{"total": 150.0, "status": "paid", "customer": map[string]any{"id": "c-1"}},
		"order2": map[string]any{"total": 150, "status": "paid", "customer": map[string]any{"id": "c-1"}},
		"nil":    "a variable named like an expr keyword",
		"len":    3.0,
		"prénom": "Zoé",
		"_x1":    1.0,
		"orders": []any{map[string]any{"id": "a", "total": 10.0}, map[string]any{"id": "b", "total": 200.0}},
		"xs":     []any{1.0, 2.0, 3.0, 7.0},
		"due":    "2024-01-31", // dates are strings in JSON variables
		"at":     "2024-01-31T10:00:00+01:00",
		// Names only backticks can reach.
		"order-id":   "o-7",
		"first name": "Zoé",
		"if":         "a keyword",
		"experiment": map[string]any{"steady-state-hypothesis": map[string]any{"title": "up", "probes": []any{"p1", "p2"}}},
	}
}

func TestEval(t *testing.T) {
	tests := []struct {
		src  string
		want any
	}{
		// literals
		{`=1`, 1.0},
		{`=1.25`, 1.25},
		{`=.5`, 0.5},
		{`=007`, 7.0},
		{`="a\"b\\c\n\t\r\'"`, "a\"b\\c\n\t\r'"},
		{`="\b\f"`, "\b\f"},
		// another backslash stays, as in feel-scala: regex patterns need it
		{`="\$ \d+ \."`, `\$ \d+ \.`},
		{`="\\d"`, `\d`},
		{`="\u00e9\ud83d\ude00"`, "é😀"},
		{`="\U01F40E"`, "🐎"},
		{`={🐎: "bar"}.🐎`, "bar"}, // a name may use characters beyond the BMP
		{`="\d\s\."`, `\d\s\.`},  // other escapes stay, for regular expressions
		{`="\u0000\u007f\u2028\udb40\udc01"`, "\x00\x7f\u2028\U000e0001"},
		{`="="`, "="},
		{"=1 + /* 1 + */ 1 // and more\n + 1", 3.0}, // comments, as in feel-scala
		{`="a // b /* c"`, "a // b /* c"},
		{`="and or not ( ) == &&"`, "and or not ( ) == &&"},
		{`=true`, true},
		{`=false`, false},
		{`=null`, nil},
		{`=1.23e4`, 12300.0},
		{`=5E-1`, 0.5},
		{`=2e+2`, 200.0},
		// exponentiation: whole exponents, tighter than * and looser than -
		{`=2 ** 10`, 1024.0},
		{`=n ** -1`, 0.2},
		{`=n ** 0`, 1.0},
		{`=-2 ** 2`, 4.0},
		{`=2 ** 3 ** 2`, 64.0},
		{`=3 * 2 ** 2`, 12.0},
		{`=0.5 ** 3`, 0.125},
		{`=(1 + 0.01) ** 12`, 1.1268250301319698},
		// variables and paths
		{`=n`, 5.0},
		{`=s`, "paid"},
		{`=missing`, nil},
		{`=order.total`, 150.0},
		{`=order.customer.id`, "c-1"},
		{`=order.missing`, nil},
		{`=order.missing.deeper`, nil},
		{`=missing.a.b`, nil},
		{`=nul.a`, nil},
		{`=nil`, "a variable named like an expr keyword"},
		{`=len`, 3.0},
		{`=prénom`, "Zoé"},
		{`=_x1 + 1`, 2.0},
		{`=list`, []any{1.0, "a"}},
		// arithmetic
		{`=1 + 2 * 3`, 7.0},
		{`=(1 + 2) * 3`, 9.0},
		{`=10 - 4 - 3`, 3.0},
		{`=10 - (4 - 3)`, 9.0},
		{`=7 / 2`, 3.5},
		{`=12 / 2 / 3`, 2.0},
		{`=-n`, -5.0},
		{`=- -n`, 5.0},
		{`=-(1 + 2)`, -3.0},
		{`=2 * -3`, -6.0},
		{`=-0`, 0.0},
		{`=zero * -1`, 0.0},
		{`=i + 1`, 8.0},
		{`=jn * 2`, 5.0},
		{`=n+n`, 10.0},
		{`="a" + "b"`, "ab"},
		{`=s + "!"`, "paid!"},
		// equality
		{`=n = 5`, true},
		{`=n = 5.0`, true},
		{`=i = 7`, true},
		{`=jn = 2.5`, true},
		{`=n != 5`, false},
		{`=s = "paid"`, true},
		{`=s != "paid"`, false},
		{`=t = true`, true},
		{`=missing = null`, true},
		{`=nul = null`, true},
		{`=null = null`, true},
		{`=n = null`, false},
		{`=missing != null`, false},
		{`=n != null`, true},
		{`=order.missing = null`, true},
		{`=n = "5"`, false},
		{`=n != "5"`, true},
		{`=t = 1`, false},
		{`=list = list2`, true},
		{`=order = order2`, true},
		{`=order = list`, false},
		// ordering
		{`=n > 4`, true},
		{`=n >= 5`, true},
		{`=n < 5`, false},
		{`=n <= 5`, true},
		{`=order.total > 100`, true},
		{`=s < "zebra"`, true},
		{`="b" > "a"`, true},
		{`=i > n`, true},
		// logic
		{`=t and f`, false},
		{`=t or f`, true},
		{`=not(t)`, false},
		{`=not t`, false},
		{`=not not t`, true},
		{`=not(f) and t`, true},
		{`=not f and t`, true},
		{`=not t or t`, true},
		{`=not(n = 5)`, false},
		{`=not (n = 5)`, false},
		{`=not(t) = false`, true},
		{`=f or t and f`, false},
		{`=(f or t) and f`, false},
		{`=order.total > 100 and order.status = "paid"`, true},
		// short-circuit: the right side would fail, but is never evaluated
		{`=missing != null and missing > 5`, false},
		{`=missing = null or missing > 5`, true},
		{`=f and missing`, false},
		{`=t or missing`, true},
		// whitespace and layout
		{"=  n\n\t>\r\n4  ", true},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			e, err := Compile(tt.src)
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			got, err := e.Eval(vars())
			if err != nil {
				t.Fatalf("Eval: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Eval = %#v, want %#v", got, tt.want)
			}
			if f, ok := got.(float64); ok && math.Signbit(f) != math.Signbit(tt.want.(float64)) {
				t.Fatalf("Eval = %v, want %v (sign of zero)", got, tt.want)
			}
		})
	}
}

func TestEvalErrors(t *testing.T) {
	tests := []struct{ src, msg string }{
		{`=missing > 5`, "cannot compare null with a number using >"},
		{`=nul < 1`, "cannot compare null with a number using <"},
		{`=n <= s`, "cannot compare a number with a string using <="},
		{`=t >= f`, "cannot compare a boolean with a boolean using >="},
		{`=list < list`, "cannot compare a list with a list using <"},
		{`=missing + 1`, "cannot apply + to null and a number"},
		{`=s - 1`, "cannot apply - to a string and a number"},
		{`=s + 1`, "cannot apply + to a string and a number"},
		{`=-s`, "cannot negate a string"},
		{`=n / zero`, "division by zero"},
		{`=n / (n - 5)`, "division by zero"},
		{`=big + 1`, "integer 1152921504606846976 is too large for exact arithmetic"},
		{`=big = 1`, "too large for exact arithmetic"},
		{`=missing and t`, "and needs a boolean operand, got null"},
		{`=t and n`, "and needs a boolean operand, got a number"},
		{`=f or s`, "or needs a boolean operand, got a string"},
		{`=not(missing)`, "not needs a boolean operand, got null"},
		{`=not n`, "not needs a boolean operand, got a number"},
		{`=n.x`, "cannot read .x of a number"},
		{`=list.x`, "cannot read .x of a number"}, // a path on a list reads each item
		{`=order.status.x`, "cannot read .x of a string"},
		{`=n ** 0.5`, "the exponent must be a whole number, got 0.5"},
		{`=zero ** -1`, "division by zero"},
		{`=n ** 1000`, "result of ** overflows"},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			e, err := Compile(tt.src)
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			v, err := e.Eval(vars())
			if err == nil {
				t.Fatalf("Eval = %#v, want error %q", v, tt.msg)
			}
			if !strings.Contains(err.Error(), tt.msg) || !strings.Contains(err.Error(), tt.src) {
				t.Fatalf("Eval error %q, want it to name %q and %q", err, tt.src, tt.msg)
			}
			if fault.Code(err) != "" {
				t.Fatalf("run-time error carries code %s; the engine assigns the incident code", fault.Code(err))
			}
		})
	}
}

func TestEvalOverflow(t *testing.T) {
	e := MustCompile(`=x * x`)
	if v, err := e.Eval(map[string]any{"x": 1e200}); err == nil {
		t.Fatalf("Eval = %v, want overflow error", v)
	}
	if v, err := e.Eval(map[string]any{"x": math.NaN()}); err == nil {
		t.Fatalf("Eval = %v, want error for NaN input", v)
	}
	if v, err := e.Eval(map[string]any{"x": struct{}{}}); err == nil || !strings.Contains(err.Error(), "Go type struct {}") {
		t.Fatalf("Eval = %v, %v; want unsupported type error", v, err)
	}
}

func TestCompileRefused(t *testing.T) {
	tests := []struct {
		src string
		msg string // part of the message
		pos int    // 1-based character position the message names
	}{
		{`=`, "empty expression", 2},
		{`=   `, "empty expression", 5},
		// other languages' operators
		{`=a == 1`, "== is not FEEL; use = for equality", 4},
		{`=a && b`, "&& is not FEEL; use and", 4},
		{`=a || b`, "|| is not FEEL; use or", 4},
		{`=!a`, "! is not FEEL; use not(...)", 2},
		{`=a ? b : c`, "?, ?: and ?? are not supported", 4},
		{`=a ?: b`, "?, ?: and ?? are not supported", 4},
		{`=a ?? b`, "?, ?: and ?? are not supported", 4},
		{`=a % 2`, "the % operator is not supported", 4},
		{`=a ^ 2`, "the ^ operator is not supported", 4},
		{"=`a b", "unterminated backtick-quoted name", 2},
		{"=a + ``", "empty backtick-quoted name", 6},
		{`='a'`, "single-quoted strings are not supported", 2},
		{`=a /* note`, "unterminated comment", 4},
		{`=$a`, "$ is not supported", 2},
		{`=a # b`, "# is not supported", 4},
		{`=a ~ b`, "~ is not supported", 4},
		{`=a; b`, "; is not supported", 3},
		{`=a \ b`, `\ outside a string is not supported`, 4},
		{`=a <> b`, `unexpected ">"`, 5},
		{"=a \u00a7 b", "unexpected character", 4},
		// FEEL forms outside the subset
		{`=order.items(1)`, "calling a function through a path (items(...)) is not supported", 8},
		{`=function(x) x + 1`, "function definitions are only supported as the second argument of sort", 2},
		{`=1..5`, `unexpected ".."`, 3},
		{`=1e`, `malformed number "1e"`, 2},
		{`=1e+x`, `malformed number "1e"`, 2},
		{`=1_000`, `malformed number "1_"`, 2},
		{`=1abc`, `malformed number "1a"`, 2},
		{`=1` + strings.Repeat("0", 400), "out of range", 2},
		// strings
		{`="abc`, "unterminated string", 2},
		{`="abc\`, "unterminated string", 2},
		{`="\U01F40"`, "invalid unicode escape", 3},
		{`="\U110000"`, "invalid unicode escape", 3},
		{`="\u12"`, "invalid unicode escape", 3},
		{`="\ud800"`, "invalid unicode escape", 3},
		{`="\udc00"`, "invalid unicode escape", 3},
		{`="\ud800\u0041"`, "invalid unicode escape", 3},
		{"=\"\xff\"", "invalid UTF-8", 3},
		// structure
		{`=(a`, "expected ) to close the ( at position 2, found end of expression", 4},
		{`=a)`, `unexpected ")"`, 3},
		{`=()`, `unexpected ")"`, 3},
		{`=a b`, `unexpected name "b"`, 4},
		{`=a +`, "unexpected end of expression", 5},
		{`=a and`, "unexpected end of expression", 7},
		{`=and a`, "and needs an operand on each side", 2},
		{`=a or or b`, "or needs an operand on each side", 7},
		{`=* a`, `unexpected "*"`, 2},
		{`=1 < 2 < 3`, "comparisons do not chain", 8},
		{`=a = b = c`, "comparisons do not chain", 8},
		{`=not a = b`, `ambiguous not followed by "="`, 2},
		{`=not a + 1`, `ambiguous not followed by "+"`, 2},
		{`=not not(a) = b`, `ambiguous not followed by "="`, 2},
		{`=a = not b`, "not without parentheses is only supported at the start", 6},
		{`=-not a`, "not without parentheses is only supported at the start", 3},
		{`=not`, "unexpected end of expression", 5},
		// paths
		{`=a.`, "expected a field name after ., found end of expression", 3},
		{`=a.1`, "unexpected number .1", 3},
		{`=a.b.`, "expected a field name after .", 5},
		{`=a."b"`, "expected a field name after ., found string", 3},
		{`=a.null`, "expected a field name after .", 3},
		{`=a.if`, "expected a field name after .", 3},
		{`=1. `, "expected a field name after ., found end of expression", 3},
		// reserved words cannot name variables
		{`=then`, `"then" is a reserved word and cannot name a variable`, 2},
		{`=of = 1`, `"of" is a reserved word and cannot name a variable`, 2},
		// constant expressions that always fail
		{`=1 / 0`, "always fails: division by zero", 0},
		{`="s".length`, "always fails: cannot read .length of a string", 0},
		{`="a" < 1`, "always fails: cannot compare a string with a number using <", 0},
		{`=null > 1`, "always fails: cannot compare null with a number", 0},
		{`=not(1)`, "always fails: not needs a boolean operand, got a number", 0},
		{`=true and 1`, "always fails: and needs a boolean operand, got a number", 0},
		{`=` + strings.Repeat("9", 308) + ` * 10`, "always fails: result of * overflows", 0},
		// limits
		{`=` + strings.Repeat("(", maxDepth+1) + "1" + strings.Repeat(")", maxDepth+1), "nested too deeply", maxDepth + 2},
		{`=` + strings.Repeat("-", maxDepth+1) + "1", "nested too deeply", maxDepth + 2},
		{`=` + strings.Repeat("not ", maxDepth+1) + "a", "nested too deeply", 4*maxDepth + 2},
		{`=a` + strings.Repeat(" + a", maxNodes), "expression is too large", 0},
	}
	for _, tt := range tests {
		name := tt.src
		if len(name) > 40 {
			name = name[:40]
		}
		t.Run(name, func(t *testing.T) {
			e, err := Compile(tt.src)
			if err == nil {
				t.Fatalf("Compile succeeded (%s), want refusal %q", e.String(), tt.msg)
			}
			if !fault.HasCode(err, fault.BPMNExpression) {
				t.Fatalf("error %v has code %q, want %s", err, fault.Code(err), fault.BPMNExpression)
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.msg) {
				t.Fatalf("error %q does not mention %q", msg, tt.msg)
			}
			if tt.pos > 0 && !strings.HasSuffix(msg, " at position "+strconv.Itoa(tt.pos)) {
				t.Fatalf("error %q does not end with position %d", msg, tt.pos)
			}
			if !strings.Contains(msg, strconv.Quote(tt.src)) {
				t.Fatalf("error %q does not quote the expression", msg)
			}
		})
	}
}

func TestUsesVariables(t *testing.T) {
	for src, want := range map[string]bool{
		`="order-" + "placed"`:                   false,
		`={a: 1, b: a + 1}.b`:                    false,
		`=for x in [1, 2] return count(partial)`: false,
		`=[1, 2][item > 1]`:                      false,
		`=upper case(name)`:                      true,
		`=[{x: 1}][x > 0]`:                       true, // x may be an item's entry or a variable
		"=`order-id`":                            true,
		"static":                                 false,
	} {
		if got := MustCompile(src).UsesVariables(); got != want {
			t.Errorf("Compile(%s).UsesVariables() = %v, want %v", src, got, want)
		}
	}
}

func TestStatic(t *testing.T) {
	for _, src := range []string{"", "PT15M", "order-42", " =x", "true", "5"} {
		e, err := Compile(src)
		if err != nil {
			t.Fatalf("Compile(%q): %v", src, err)
		}
		if !e.IsStatic() || e.Source() != src || e.String() != src {
			t.Fatalf("Compile(%q): static %v, source %q, string %q", src, e.IsStatic(), e.Source(), e.String())
		}
		if v, err := e.Eval(nil); err != nil || v != src {
			t.Fatalf("Eval = %#v, %v; want %q", v, err, src)
		}
		if v, err := e.EvalString(nil); err != nil || v != src {
			t.Fatalf("EvalString = %#v, %v; want %q", v, err, src)
		}
		if _, err := e.EvalBool(nil); err == nil {
			t.Fatalf("EvalBool(%q) succeeded; a static value is a string, never a condition", src)
		}
	}
	if MustCompile("=x").IsStatic() {
		t.Fatal(`"=x" is static`)
	}
}

func TestEvalBool(t *testing.T) {
	tests := []struct {
		src  string
		want bool
		err  string
	}{
		{src: `=n > 4`, want: true},
		{src: `=t`, want: true},
		{src: `=f`, want: false},
		{src: `=missing`, err: `"=missing" evaluated to null, not a boolean`},
		{src: `=n`, err: "evaluated to a number, not a boolean"},
		{src: `=s`, err: "evaluated to a string, not a boolean"},
		{src: `=missing < 1`, err: "cannot compare null"},
	}
	for _, tt := range tests {
		got, err := MustCompile(tt.src).EvalBool(vars())
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("EvalBool(%s) = %v, %v; want error %q", tt.src, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("EvalBool(%s) = %v, %v; want %v", tt.src, got, err, tt.want)
		}
	}
}

func TestEvalString(t *testing.T) {
	tests := []struct {
		src  string
		vars map[string]any
		want string
		err  string
	}{
		{src: `=k`, vars: map[string]any{"k": "order-1"}, want: "order-1"},
		{src: `=k`, vars: map[string]any{"k": 42.0}, want: "42"},
		{src: `=k`, vars: map[string]any{"k": 42.5}, want: "42.5"},
		{src: `=k`, vars: map[string]any{"k": -0.0}, want: "0"},
		{src: `=k`, vars: map[string]any{"k": 1e21}, want: "1000000000000000000000"},
		{src: `=k`, vars: map[string]any{"k": 0.1}, want: "0.1"},
		{src: `=k`, vars: map[string]any{"k": float32(0.1)}, want: "0.10000000149011612"},
		{src: `=k`, vars: map[string]any{"k": 42}, want: "42"},
		{src: `=k`, vars: map[string]any{"k": int64(1) << 62}, want: "4611686018427387904"},
		{src: `=k`, vars: map[string]any{"k": uint64(1) << 63}, want: "9223372036854775808"},
		{src: `=k`, vars: map[string]any{"k": uint(7)}, want: "7"},
		{src: `=k`, vars: map[string]any{"k": int32(-3)}, want: "-3"},
		{src: `=k`, vars: map[string]any{"k": json.Number("9007199254740993")}, want: "9007199254740993"},
		{src: `=k`, vars: map[string]any{"k": json.Number("42.0")}, want: "42"},
		{src: `=k`, vars: map[string]any{"k": true}, want: "true"},
		{src: `=k + 1`, vars: map[string]any{"k": 41.0}, want: "42"},
		{src: `=a.b`, vars: map[string]any{"a": map[string]any{"b": "x"}}, want: "x"},
		{src: `=k`, vars: map[string]any{}, err: "evaluated to null"},
		{src: `=k`, vars: map[string]any{"k": []any{"a"}}, err: "evaluated to a list, not a string, number or boolean"},
		{src: `=k`, vars: map[string]any{"k": map[string]any{}}, err: "evaluated to a context"},
		{src: `=k`, vars: map[string]any{"k": json.Number("123456789012345678901234")}, err: "too large for exact arithmetic"},
		{src: `=k`, vars: map[string]any{"k": math.Inf(1)}, err: "not a finite number"},
	}
	for _, tt := range tests {
		got, err := MustCompile(tt.src).EvalString(tt.vars)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("EvalString(%s, %v) = %q, %v; want error %q", tt.src, tt.vars, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("EvalString(%s, %v) = %q, %v; want %q", tt.src, tt.vars, got, err, tt.want)
		}
	}
}

func TestString(t *testing.T) {
	tests := []struct{ src, want string }{
		{`=a`, `=a`},
		{`=  a.b .c`, `=a.b.c`},
		{`=1.50`, `=1.5`},
		{`=007`, `=7`},
		{`=.5`, `=0.5`},
		{`=1+2*3`, `=1 + 2 * 3`},
		{`=(1+2)*3`, `=(1 + 2) * 3`},
		{`=((a))`, `=a`},
		{`=a-(b-c)`, `=a - (b - c)`},
		{`=(a-b)-c`, `=a - b - c`},
		{`=a/(b*c)`, `=a / (b * c)`},
		{`=-(-a)`, `=- -a`},
		{`=- -a`, `=- -a`},
		{`=-(a*b)`, `=-(a * b)`},
		{`=-a*b`, `=-a * b`},
		{`=-a**2`, `=-a ** 2`},
		{`=-(a**2)`, `=-(a ** 2)`},
		{`=a**b**c`, `=a ** b ** c`},
		{`=a**(b**c)`, `=a ** (b ** c)`},
		{`=a*b**c`, `=a * b ** c`},
		{`=(a*b)**c`, `=(a * b) ** c`},
		{`=a and (b or c)`, `=a and (b or c)`},
		{`=(a and b) or c`, `=a and b or c`},
		{`=a and (b and c)`, `=a and (b and c)`},
		{`=not a`, `=not(a)`},
		{`=not not a`, `=not(not(a))`},
		{`=not (a=b)`, `=not(a = b)`},
		{`=(a = b) = c`, `=(a = b) = c`},
		{`=a = (b = c)`, `=a = (b = c)`},
		{`=(a < b) = true`, `=(a < b) = true`},
		{`=a + b < c * d`, `=a + b < c * d`},
		{`="\u00e9\"\\\n\r\t\'"`, `="é\"\\\n\r\t'"`},
		{"=\"\u0001\u007f\"", `="\u0001\u007f"`},
		{`="\$"`, `="\\$"`},
		{`=null != false`, `=null != false`},
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

// TestConcurrentEval runs one Expr from many goroutines; with -race it
// checks that the pooled virtual machines are never shared.
func TestConcurrentEval(t *testing.T) {
	e := MustCompile(`=order.total > limit and order.status = "paid"`)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				limit := float64(g*200 + i)
				vars := map[string]any{"order": map[string]any{"total": 800.0, "status": "paid"}, "limit": limit}
				got, err := e.EvalBool(vars)
				if err != nil || got != (800 > limit) {
					t.Errorf("EvalBool with limit %v = %v, %v", limit, got, err)
					return
				}
			}
		})
	}
	wg.Wait()

	// The new forms share compiled state too: a regular expression compiled
	// at deploy time, and the scopes of filters, loops and sort.
	e = MustCompile(`=for o in sort(orders[matches(id, "^[a-z]$")], function(a, b) a.total > b.total) ` +
		`return {id: upper case(o.id), due: date(day) + duration("P" + string(o.n) + "D"), at: now()}`)
	var wg2 sync.WaitGroup
	for g := range 8 {
		wg2.Go(func() {
			for i := range 100 {
				vars := map[string]any{"day": "2024-01-31", "orders": []any{
					map[string]any{"id": "a", "total": 1.0, "n": float64(g)},
					map[string]any{"id": "b", "total": 2.0, "n": float64(i)},
				}}
				got, err := e.EvalAt(vars, testNow)
				want := []any{
					map[string]any{"id": "B", "due": time.Date(2024, 1, 31+i, 0, 0, 0, 0, time.UTC).Format(time.DateOnly), "at": "2024-01-31T10:00:00Z"},
					map[string]any{"id": "A", "due": time.Date(2024, 1, 31+g, 0, 0, 0, 0, time.UTC).Format(time.DateOnly), "at": "2024-01-31T10:00:00Z"},
				}
				if err != nil || !reflect.DeepEqual(got, want) {
					t.Errorf("EvalAt = %v, %v; want %v", got, err, want)
					return
				}
			}
		})
	}
	wg2.Wait()
}

// gatewayCondition is a typical exclusive-gateway condition.
const gatewayCondition = `=order.total > 100 and order.status = "paid" and not(order.flagged)`

func gatewayVars() map[string]any {
	return map[string]any{"order": map[string]any{"total": 150.0, "status": "paid", "flagged": false}}
}

// TestEvalAllocs keeps evaluation within the engine's budget of under 50
// allocations per step, leaving most of it to the engine.
func TestEvalAllocs(t *testing.T) {
	e, vars := MustCompile(gatewayCondition), gatewayVars()
	allocs := testing.AllocsPerRun(100, func() {
		if ok, err := e.EvalBool(vars); err != nil || !ok {
			t.Fatalf("EvalBool = %v, %v", ok, err)
		}
	})
	if allocs > 5 {
		t.Fatalf("EvalBool allocates %v times, want at most 5", allocs)
	}
}

func BenchmarkEvalBool(b *testing.B) {
	e, vars := MustCompile(gatewayCondition), gatewayVars()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.EvalBool(vars); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEvalSimple is the simplest gateway condition: one comparison.
func BenchmarkEvalSimple(b *testing.B) {
	e, vars := MustCompile(`=amount > 100`), map[string]any{"amount": 150.0}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.EvalBool(vars); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCompile(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile(gatewayCondition); err != nil {
			b.Fatal(err)
		}
	}
}

// Package feel compiles the subset of FEEL that Camunda Modeler writes for
// Zeebe (strings beginning with "="), with the semantics of Camunda's FEEL
// engine (feel-scala) except where noted in docs/expressions.md.
//
// A FEEL source is tokenized and parsed here into a tree whose nodes
// evaluate themselves (ast.go); built-in functions are in builtins.go,
// dates, times and durations in temporal.go. Anything outside the subset is
// refused by Compile with fault.BPMNExpression: a refused expression fails
// the deploy, while a mis-evaluated one would silently take the wrong branch.
//
// Semantics in brief (docs/expressions.md is the user-facing reference):
//   - a missing variable is null, and a path through null is null;
//   - "=" and "!=" always answer for JSON values: null equals only null,
//     values of different types are unequal;
//   - ordering (< <= > >=) works on two numbers, two strings or two
//     temporal values of one kind; anything else, null included, is an
//     evaluation error;
//   - and/or/not need booleans; and/or short-circuit left to right, so
//     "x != null and x > 5" is safe when x is missing; if-then-else takes
//     the else branch for any condition but true, as in feel-scala;
//   - numbers are float64; division by zero and overflow are errors;
//   - a built-in given an argument of the wrong type (null included) is an
//     evaluation error;
//   - results are JSON values: a date, time or duration comes out as its
//     ISO 8601 string.
package feel

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sutra-run/worker/fault"
)

// Expr is a compiled expression, immutable and safe for concurrent use.
type Expr struct {
	src   string
	root  node // nil for a static value
	vars  bool // reads a variable (or may: see parser.free)
	clock bool // calls now() or today()
	// key is the canonical text uuid() derives ids from, set when the
	// expression calls uuid(): reformatting the source changes no id.
	key  string
	opts Options
}

// Options select the dialect an expression is compiled and evaluated in.
// The zero value is the default: Camunda 8's FEEL as the package comment
// describes it, strict about null.
type Options struct {
	// Nulls gives DMN's null semantics, as decisions need them: an
	// operation that cannot apply to its operands' values (arithmetic or
	// ordering with null or mismatched types, division by zero, overflow,
	// a built-in given arguments it does not take, a path into a number)
	// is null rather than an evaluation error; and, or and not are
	// three-valued (false and null is false, true and null is null). Work
	// cut off by a limit, the deadline or cancellation is still an error.
	Nulls bool
	// Functions are the functions the expression may call besides the
	// built-ins, by name; a name here hides a built-in's.
	Functions map[string]*Function
	// Types are the types instance of may name besides the built-in
	// ones, each as FEEL type text that may name others
	// ("list<tItem>"): a DMN model's item definitions.
	Types map[string]string
}

// Env is what an evaluation reads besides the variables.
type Env struct {
	// Now is the time now() and today() read (in UTC); zero makes them
	// evaluation errors.
	Now time.Time
	// Seed is what uuid() and random number() derive their values from,
	// with the expression and the call's position in the evaluation. The
	// caller makes it unique per occasion (the engine: per step, element and
	// token) and the same when that occasion is evaluated again; "" makes
	// them evaluation errors.
	Seed string
	// Limits bound the evaluation's work and memory (zero: the defaults).
	Limits Limits
	// Ctx, when set, cuts the evaluation off: past its deadline with a
	// *LimitError (LimitDeadline), cancelled with an error wrapping its
	// cause. It is looked at every so many steps (limits.go).
	Ctx context.Context
}

// Compile compiles src. src starting with "=" is an expression; otherwise it
// is a static string literal.
func Compile(src string) (*Expr, error) { return CompileWith(src, Options{}) }

// CompileWith is Compile in the dialect opts selects.
func CompileWith(src string, opts Options) (*Expr, error) {
	if !strings.HasPrefix(src, "=") {
		return &Expr{src: src, opts: opts}, nil
	}
	p, root, err := parse(src, opts)
	if err != nil {
		return nil, err
	}
	e := &Expr{src: src, root: root, vars: p.free > 0, clock: p.clock, opts: opts}
	if p.seed {
		e.key = e.String()
	}
	if p.free == 0 && !p.clock && !p.seed {
		// Without variables, the clock or a seed the result can never
		// change, so an error now (1 / 0, "a" < 1, or under Options.Nulls
		// one no null absorbs) is an error at every evaluation: refuse at
		// deploy. So is a constant over the default
		// limits, which would otherwise be built at each evaluation.
		// Under Nulls a constant may be a function (a business knowledge
		// model's body returning one), which has no JSON form but is a
		// value to its caller.
		if _, err := e.run(nil, Env{}, !opts.Nulls); err != nil {
			if IsLimit(err) {
				return nil, fault.Wrap(fault.IncidentExpressionLimit, err, "expression %s", e.quoted())
			}
			return nil, fault.New(fault.BPMNExpression, "expression %q always fails: %v", src, err)
		}
	}
	return e, nil
}

// MustCompile is Compile that panics on error, for tests and examples.
func MustCompile(src string) *Expr {
	e, err := Compile(src)
	if err != nil {
		panic(err)
	}
	return e
}

// Source returns the text Compile was given.
func (e *Expr) Source() string { return e.src }

// maxQuoted bounds the characters of the source an evaluation error quotes:
// it becomes an incident's message, and an expression may be long.
const maxQuoted = 200

// quoted is the source in quotes for an error, cut after maxQuoted
// characters.
func (e *Expr) quoted() string { return quoteSource(e.src) }

// quoteSource is src in quotes for an error, cut after maxQuoted
// characters.
func quoteSource(src string) string {
	if utf8.RuneCountInString(src) <= maxQuoted {
		return strconv.Quote(src)
	}
	return strconv.Quote(string([]rune(src)[:maxQuoted])) + "…"
}

// IsStatic reports whether the source is a literal string rather than an
// expression.
func (e *Expr) IsStatic() bool { return e.root == nil }

// UsesVariables reports whether the expression may read a variable. One
// that reads no variable, no clock and no seed is a constant: a caller may
// evaluate it once, with Eval(nil).
func (e *Expr) UsesVariables() bool { return e.vars }

// UsesClock reports whether the expression calls now() or today(), so that
// its result depends on Env.Now.
func (e *Expr) UsesClock() bool { return e.clock }

// UsesSeed reports whether the expression calls uuid() or random number(),
// so that its result depends on Env.Seed: a caller may build the seed only
// then.
func (e *Expr) UsesSeed() bool { return e.key != "" }

// String returns the canonical text: the static value unchanged, or "="
// followed by the expression with normalised spacing, numbers and string
// escapes, positional arguments and only the parentheses it needs.
// Compile(e.String()) evaluates exactly as e does.
func (e *Expr) String() string {
	if e.root == nil {
		return e.src
	}
	var b strings.Builder
	b.WriteString("=")
	e.root.feel(&b)
	return b.String()
}

// EvalIn evaluates the expression over vars (JSON-shaped values; see the
// package documentation) in env. A static value evaluates to its string.
// The result is JSON-shaped; a list or context from vars is returned as it
// is, not copied.
func (e *Expr) EvalIn(vars map[string]any, env Env) (any, error) {
	if e.root == nil {
		return e.src, nil
	}
	v, err := e.run(vars, env, true)
	if err != nil {
		return nil, fmt.Errorf("feel: evaluating %s: %w", e.quoted(), err)
	}
	return v, nil
}

// Eval is EvalIn with an empty Env: now(), today() and uuid() are
// evaluation errors.
func (e *Expr) Eval(vars map[string]any) (any, error) { return e.EvalIn(vars, Env{}) }

// EvalAt is EvalIn at the time now, without a seed.
func (e *Expr) EvalAt(vars map[string]any, now time.Time) (any, error) {
	return e.EvalIn(vars, Env{Now: now})
}

// EvalValue is EvalIn without shaping the result as JSON: a date, time or
// duration in it stays a FEEL value, which an expression given it in its
// variables reads as such rather than as its ISO 8601 string (DMN passes
// decision results on so). JSON shapes it for output.
func (e *Expr) EvalValue(vars map[string]any, env Env) (any, error) {
	if e.root == nil {
		return e.src, nil
	}
	v, err := e.run(vars, env, false)
	if err != nil {
		return nil, fmt.Errorf("feel: evaluating %s: %w", e.quoted(), err)
	}
	return v, nil
}

// ErrFunctionResult is JSON's error for a value that is or holds a
// function (DMN's FEEL), which has no JSON form.
var ErrFunctionResult = errors.New("a function has no JSON form")

// JSON shapes a value EvalValue returned as JSON, as EvalIn does, within
// env's limits: dates, times and durations become ISO 8601 strings.
func JSON(v any, env Env) (any, error) {
	return jsonShape(newEvalCtx(nil, env), v)
}

// run evaluates the tree and, when json is set, shapes its result as JSON.
// A panic would be a bug here; it becomes an error (wrapping a
// runtime.Error when it is one) rather than crashing the step.
func (e *Expr) run(vars map[string]any, env Env, json bool) (v any, err error) {
	defer func() {
		if r := recover(); r != nil {
			if re, ok := r.(runtime.Error); ok {
				err = fmt.Errorf("internal error: %w", re)
			} else {
				err = fmt.Errorf("internal error: %v", r)
			}
		}
	}()
	c := newEvalCtx(vars, env)
	c.nulls = e.opts.Nulls
	if e.key != "" {
		// Only then: every evaluation pays for a larger context otherwise.
		c.ids = &idSource{seed: env.Seed, key: e.key}
	}
	if v, err = e.root.eval(c, nil); err != nil || !json {
		return v, err
	}
	return jsonShape(c, v)
}

// EvalBoolIn evaluates a condition in env; a result other than true or
// false (null included) is an error.
func (e *Expr) EvalBoolIn(vars map[string]any, env Env) (bool, error) {
	v, err := e.EvalIn(vars, env)
	if err != nil {
		return false, err
	}
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("feel: %s evaluated to %s, not a boolean", e.quoted(), describe(v))
	}
	return b, nil
}

// EvalBool is EvalBoolIn with an empty Env.
func (e *Expr) EvalBool(vars map[string]any) (bool, error) { return e.EvalBoolIn(vars, Env{}) }

// EvalBoolAt is EvalBoolIn at the time now, without a seed.
func (e *Expr) EvalBoolAt(vars map[string]any, now time.Time) (bool, error) {
	return e.EvalBoolIn(vars, Env{Now: now})
}

// EvalStringIn evaluates a correlation key (or another value used as text)
// in env: strings as they are (a date or duration as its ISO 8601 string),
// numbers in canonical decimal form (42.0 is "42"), booleans as
// "true"/"false". Null and other types are errors, since a key of "" or
// "<nil>" would correlate unrelated instances.
func (e *Expr) EvalStringIn(vars map[string]any, env Env) (string, error) {
	v, err := e.EvalIn(vars, env)
	if err != nil {
		return "", err
	}
	switch x := v.(type) {
	case string:
		return x, nil
	case bool:
		if x {
			return "true", nil
		}
		return "false", nil
	}
	// Integers are formatted exactly, beyond float64's exact range too: a
	// key involves no arithmetic.
	s, ok, err := formatNumber(v)
	if err != nil {
		return "", fmt.Errorf("feel: evaluating %s: %w", e.quoted(), err)
	}
	if !ok {
		return "", fmt.Errorf("feel: %s evaluated to %s, not a string, number or boolean", e.quoted(), describe(v))
	}
	return s, nil
}

// EvalString is EvalStringIn with an empty Env.
func (e *Expr) EvalString(vars map[string]any) (string, error) {
	return e.EvalStringIn(vars, Env{})
}

// EvalStringAt is EvalStringIn at the time now, without a seed.
func (e *Expr) EvalStringAt(vars map[string]any, now time.Time) (string, error) {
	return e.EvalStringIn(vars, Env{Now: now})
}

// refuse reports a compile-time refusal at byte offset pos of src.
func refuse(src string, pos int, format string, args ...any) error {
	return fault.New(fault.BPMNExpression, "expression %q: %s at position %d", src, fmt.Sprintf(format, args...), column(src, pos))
}

// column turns a byte offset into the 1-based character position users
// count in the modeler (the leading "=" is position 1).
func column(src string, pos int) int { return utf8.RuneCountInString(src[:pos]) + 1 }

// refuseFunc refuses a call of a function outside the subset. The message
// has no position: the function, not the syntax, is the problem.
func refuseFunc(src, name string) error {
	msg := fmt.Sprintf("function %q is not supported", name)
	if why := unsupportedFuncs[name]; why != "" {
		msg += ": " + why
	}
	return fault.New(fault.BPMNExpression, "expression %q: %s", src, msg)
}

// refuseCall refuses a call of a supported function with the wrong arguments.
func refuseCall(src string, fn *builtin, format string, args ...any) error {
	return fault.New(fault.BPMNExpression, "expression %q: function %q: %s", src, fn.name, fmt.Sprintf(format, args...))
}

func refuseArity(src string, fn *builtin, n int) error {
	var counts []string
	for _, sig := range fn.sigs {
		counts = append(counts, fmt.Sprint(len(sig)))
	}
	want := counts[len(counts)-1]
	if len(counts) > 1 {
		want = strings.Join(counts[:len(counts)-1], ", ") + " or " + want
	}
	if fn.variadic {
		want = "at least " + want
	}
	plural := "s"
	if counts[len(counts)-1] == "1" {
		plural = ""
	}
	return refuseCall(src, fn, "takes %s argument%s, got %d", want, plural, n)
}

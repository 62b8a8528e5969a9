// Package feel compiles the subset of FEEL that Camunda Modeler writes for
// Zeebe (strings beginning with "="), on top of github.com/expr-lang/expr.
//
// A FEEL source is tokenized and parsed here, then translated into expr
// source in which every FEEL operator is a call to a helper (eval.go). expr
// supplies the compiler and the virtual machine; the helpers supply FEEL's
// semantics, so nothing depends on how expr treats nil, mixed types or
// integer overflow. Anything outside the subset is refused by Compile with
// fault.BPMNExpression: a refused expression fails the deploy, while a
// mis-evaluated one would silently take the wrong branch.
//
// Semantics in brief (docs/expressions.md is the user-facing reference):
//   - a missing variable is null, and a path through null is null;
//   - "=" and "!=" always answer for JSON values: null equals only null,
//     values of different types are unequal;
//   - ordering (< <= > >=) works on two numbers or two strings; anything
//     else, null included, is an evaluation error;
//   - and/or/not need booleans; and/or short-circuit left to right, so
//     "x != null and x > 5" is safe when x is missing;
//   - numbers are float64; division by zero and overflow are errors.
package feel

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/vm"

	"github.com/sutra-run/worker/fault"
)

// Expr is a compiled expression, safe for concurrent use.
type Expr struct {
	src     string
	root    node        // nil for a static value
	program *vm.Program // nil for a static value
}

// options compile every expression: no expr builtins, so nothing but the
// helpers the translation emits can ever be called.
var options = append([]expr.Option{expr.DisableAllBuiltins()}, helpers...)

// vms reuses expr virtual machines (and their stacks) across evaluations;
// a *vm.Program is shared, but a VM is not safe for concurrent use.
var vms = sync.Pool{New: func() any { return new(vm.VM) }}

// Compile compiles src. src starting with "=" is an expression; otherwise it
// is a static string literal.
func Compile(src string) (*Expr, error) {
	if !strings.HasPrefix(src, "=") {
		return &Expr{src: src}, nil
	}
	p, root, err := parse(src)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	root.expr(&b)
	program, err := expr.Compile(b.String(), options...)
	if err != nil {
		// The parser admits only what the translation supports, so this is
		// a bug here rather than in the user's expression; refusing still
		// beats deploying something that cannot run.
		return nil, fault.Wrap(fault.BPMNExpression, err, "expression %q could not be compiled", src)
	}
	e := &Expr{src: src, root: root, program: program}
	if p.names == 0 {
		// Without variables the result can never change, so an error now
		// (1 / 0, "a" < 1) is an error at every evaluation: refuse at deploy.
		if _, err := e.run(nil); err != nil {
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

// IsStatic reports whether the source is a literal string rather than an
// expression.
func (e *Expr) IsStatic() bool { return e.program == nil }

// String returns the canonical text: the static value unchanged, or "="
// followed by the expression with normalised spacing, numbers and string
// escapes and only the parentheses it needs. Compile(e.String()) evaluates
// exactly as e does.
func (e *Expr) String() string {
	if e.root == nil {
		return e.src
	}
	var b strings.Builder
	b.WriteString("=")
	e.root.feel(&b)
	return b.String()
}

// Eval evaluates the expression over vars (JSON-shaped values; see the
// package documentation). A static value evaluates to its string. A list or
// context in the result is the one in vars, not a copy.
func (e *Expr) Eval(vars map[string]any) (any, error) {
	if e.program == nil {
		return e.src, nil
	}
	v, err := e.run(vars)
	if err != nil {
		return nil, fmt.Errorf("feel: evaluating %q: %w", e.src, err)
	}
	return v, nil
}

// run evaluates a compiled expression and unwraps expr's error, whose
// message and snippet describe the translated source rather than the
// user's text.
func (e *Expr) run(vars map[string]any) (any, error) {
	m := vms.Get().(*vm.VM)
	v, err := m.Run(e.program, vars)
	vms.Put(m)
	if err == nil {
		return v, nil
	}
	var fe *file.Error
	if errors.As(err, &fe) {
		if fe.Prev != nil {
			return nil, fe.Prev
		}
		return nil, errors.New(fe.Message)
	}
	return nil, err
}

// EvalBool evaluates a condition; a result other than true or false
// (null included) is an error.
func (e *Expr) EvalBool(vars map[string]any) (bool, error) {
	v, err := e.Eval(vars)
	if err != nil {
		return false, err
	}
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("feel: %q evaluated to %s, not a boolean", e.src, describe(v))
	}
	return b, nil
}

// EvalString evaluates a correlation key: strings as they are, numbers in
// canonical decimal form (42.0 is "42"), booleans as "true"/"false". Null
// and other types are errors, since a key of "" or "<nil>" would correlate
// unrelated instances.
func (e *Expr) EvalString(vars map[string]any) (string, error) {
	v, err := e.Eval(vars)
	if err != nil {
		return "", err
	}
	switch x := v.(type) {
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	// Integers are formatted exactly, beyond float64's exact range too:
	// a key involves no arithmetic.
	case int:
		return strconv.Itoa(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case uint:
		return strconv.FormatUint(uint64(x), 10), nil
	case uint64:
		return strconv.FormatUint(x, 10), nil
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return strconv.FormatInt(i, 10), nil
		}
	}
	f, ok, err := number(v)
	if err != nil {
		return "", fmt.Errorf("feel: evaluating %q: %w", e.src, err)
	}
	if !ok {
		return "", fmt.Errorf("feel: %q evaluated to %s, not a string, number or boolean", e.src, describe(v))
	}
	return strconv.FormatFloat(noNegZero(f), 'f', -1, 64), nil
}

// refuse reports a compile-time refusal at byte offset pos of src.
func refuse(src string, pos int, format string, args ...any) error {
	return fault.New(fault.BPMNExpression, "expression %q: %s at position %d", src, fmt.Sprintf(format, args...), column(src, pos))
}

// column turns a byte offset into the 1-based character position users
// count in the modeler (the leading "=" is position 1).
func column(src string, pos int) int { return utf8.RuneCountInString(src[:pos]) + 1 }

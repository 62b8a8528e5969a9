package feel

import (
	"fmt"
	"strings"
)

// Function is a function a caller defines for the expressions it compiles
// (DMN's business knowledge models), called by name like a built-in, with
// its arguments in order or by parameter name. It is declared before its
// body is compiled, so that functions may call each other and themselves.
type Function struct {
	name   string
	params []string
	body   *Expr
}

// maxCallDepth bounds nested calls of Functions (recursion): each level
// holds Go stack, which the step budget alone would let grow far.
const maxCallDepth = 64

// NewFunction declares the function name with the parameters params;
// Define gives it its body.
func NewFunction(name string, params []string) *Function {
	return &Function{name: name, params: params}
}

// Define sets the body, an expression over the parameters (nothing else is
// in its scope). It must be called before an expression calling f is
// evaluated, and not after: f is then immutable and safe to share.
func (f *Function) Define(body *Expr) { f.body = body }

// userCall is a call of a Function; args are in parameter order.
type userCall struct {
	fn   *Function
	args []node
}

func (userCall) prec() int { return precPrimary }

func (n userCall) feel(b *strings.Builder) {
	writeName(b, n.fn.name)
	b.WriteString("(")
	writeList(b, n.args)
	b.WriteString(")")
}

func (n userCall) eval(c *evalCtx, s *scope) (any, error) { return c.orNull(n.value(c, s)) }

// value evaluates the arguments in the caller's scope, then the body in a
// scope of the parameters only, within the caller's limits.
func (n userCall) value(c *evalCtx, s *scope) (any, error) {
	if err := c.items(1 + len(n.args)); err != nil {
		return nil, err
	}
	vars := make(map[string]any, len(n.args))
	for i, a := range n.args {
		v, err := a.eval(c, s)
		if err != nil {
			return nil, err
		}
		vars[n.fn.params[i]] = v
	}
	body := n.fn.body
	switch {
	case body == nil:
		return nil, fmt.Errorf("function %q has no body", n.fn.name)
	case c.calls >= maxCallDepth:
		return nil, fmt.Errorf("function %q: calls nested more than %d deep", n.fn.name, maxCallDepth)
	case body.root == nil:
		return body.src, nil
	}
	outer := c.vars
	c.vars = vars
	c.calls++
	v, err := body.root.eval(c, nil)
	c.vars = outer
	c.calls--
	if err != nil {
		return nil, fmt.Errorf("%s: %w", n.fn.name, err)
	}
	return v, nil
}

// parseUserCall parses the arguments of a call of fn, whose "(" is next,
// arranging named arguments in parameter order (null for those not given).
func (p *parser) parseUserCall(t token, fn *Function) (node, error) {
	as, names, err := p.parseArgs()
	if err != nil {
		return nil, err
	}
	// DMN makes a call with arguments the function does not take null.
	wrong := func(format string, a ...any) (node, error) {
		if p.opts.Nulls {
			return p.add(literal{nil}, t)
		}
		return nil, refuse(p.src, t.pos, format, a...)
	}
	if names != nil {
		r := make([]node, len(fn.params))
		for i, name := range names {
			j := indexOf(fn.params, name)
			if j < 0 || r[j] != nil {
				return wrong("function %q has no parameter %q, or it is given twice", fn.name, name)
			}
			r[j] = as[i]
		}
		for j := range r {
			if r[j] == nil {
				r[j] = literal{nil}
			}
		}
		as = r
	} else if len(as) != len(fn.params) {
		return wrong("function %q takes %d arguments, got %d", fn.name, len(fn.params), len(as))
	}
	// The body may read anything its arguments bring: never a constant.
	p.free++
	return p.add(userCall{fn: fn, args: as}, t)
}

// fnRef is a Function named where a value goes (Options.Nulls): a
// function value whose body calls it.
type fnRef struct{ fn *Function }

func (fnRef) prec() int { return precPrimary }

func (n fnRef) feel(b *strings.Builder) { writeName(b, n.fn.name) }

func (n fnRef) eval(c *evalCtx, _ *scope) (any, error) {
	if err := c.spend(1); err != nil {
		return nil, err
	}
	args := make([]node, len(n.fn.params))
	for i, p := range n.fn.params {
		args[i] = name{p}
	}
	return closure{params: n.fn.params, types: make([]*feelType, len(args)), body: userCall{fn: n.fn, args: args}}, nil
}

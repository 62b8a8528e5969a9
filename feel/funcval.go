package feel

import (
	"fmt"
	"strings"
)

// Function values, as DMN's FEEL has them (Options.Nulls only):
// function(a, b) body is a value that a name bound to it, or the
// expression giving it, calls: {f: function(x) x * 2, r: f(3)}.r is 6.

// closure is a function value with the scope it was made in.
type closure struct {
	params []string
	types  []*feelType // declared parameter types, nil where none
	body   node
	scope  *scope
	vars   map[string]any
}

// lambda is function(params) body.
type lambda struct {
	params []string
	types  []*feelType
	body   node
}

// dynCall calls the function value callee gives, with args in order or,
// when names is set, by parameter name.
type dynCall struct {
	callee node
	args   []node
	names  []string
}

func (lambda) prec() int  { return precIf } // the body runs to the end
func (dynCall) prec() int { return precPrimary }

func (n lambda) feel(b *strings.Builder) {
	b.WriteString("function(")
	for i, p := range n.params {
		if i > 0 {
			b.WriteString(", ")
		}
		writeName(b, p)
		if n.types[i] != nil {
			b.WriteString(": ")
			n.types[i].write(b)
		}
	}
	b.WriteString(") ")
	n.body.feel(b)
}

func (n dynCall) feel(b *strings.Builder) {
	operand(b, n.callee, n.callee.prec() < precPrimary)
	b.WriteString("(")
	for i, a := range n.args {
		if i > 0 {
			b.WriteString(", ")
		}
		if n.names != nil {
			writeName(b, n.names[i])
			b.WriteString(": ")
		}
		a.feel(b)
	}
	b.WriteString(")")
}

func (n lambda) eval(c *evalCtx, s *scope) (any, error) {
	if err := c.spend(1); err != nil {
		return nil, err
	}
	return closure{params: n.params, types: n.types, body: n.body, scope: s, vars: c.vars}, nil
}

func (n dynCall) eval(c *evalCtx, s *scope) (any, error) { return c.orNull(n.value(c, s)) }

func (n dynCall) value(c *evalCtx, s *scope) (any, error) {
	if err := c.items(1 + len(n.args)); err != nil {
		return nil, err
	}
	f, err := n.callee.eval(c, s)
	if err != nil {
		return nil, err
	}
	cl, ok := f.(closure)
	if !ok {
		return nil, fmt.Errorf("cannot call %s; it is not a function", describe(f))
	}
	args := make([]any, len(cl.params))
	if n.names == nil && len(n.args) != len(cl.params) {
		return nil, fmt.Errorf("the function takes %d arguments, got %d", len(cl.params), len(n.args))
	}
	for i, a := range n.args {
		v, err := a.eval(c, s)
		if err != nil {
			return nil, err
		}
		j := i
		if n.names != nil {
			if j = indexOf(cl.params, n.names[i]); j < 0 {
				return nil, fmt.Errorf("the function has no parameter %q", n.names[i])
			}
		}
		args[j] = v
	}
	return cl.call(c, args)
}

// call evaluates the body with the parameters bound to args, in the
// scope and variables the function was made in, within the caller's
// limits and call depth.
func (cl closure) call(c *evalCtx, args []any) (any, error) {
	if c.calls >= maxCallDepth {
		return nil, fmt.Errorf("function calls nested more than %d deep", maxCallDepth)
	}
	s := cl.scope
	for i, p := range cl.params {
		s = &scope{up: s, name: p, val: args[i]}
	}
	outer := c.vars
	c.vars = cl.vars
	c.calls++
	v, err := cl.body.eval(c, s)
	c.vars = outer
	c.calls--
	return v, err
}

// parseFunction parses function(a, b) body as a value; "function" is read.
func (p *parser) parseFunction(t token) (node, error) {
	open := p.next()
	if open.kind != tLParen {
		return nil, refuse(p.src, open.pos, "expected ( after function, found %s", open.describe())
	}
	if err := p.enter(open); err != nil {
		return nil, err
	}
	defer p.leave()
	var params []string
	var types []*feelType
	err := p.commaList(tRParen, func() error {
		n := p.next()
		if n.kind != tName || !n.quoted && isKeyword(n.text) || indexOf(params, n.text) >= 0 {
			return refuse(p.src, n.pos, "expected a parameter name, found %s", n.describe())
		}
		var typ *feelType
		if p.peek().kind == tColon {
			// The type tells instance of what the function takes; an
			// argument is not checked against it.
			p.next()
			var err error
			if typ, err = p.parseType(); err != nil {
				return err
			}
		}
		params = append(params, n.text)
		types = append(types, typ)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := p.expectClose(open, tRParen, ")"); err != nil {
		return nil, err
	}
	p.bind(params...)
	defer p.unbind(len(params))
	body, err := p.parseExpr()
	if err != nil {
		return nil, err
	}
	return p.add(lambda{params: params, types: types, body: body}, t)
}

// parseDynCall parses the arguments of a call of the function value callee
// gives, whose "(" is next.
func (p *parser) parseDynCall(t token, callee node) (node, error) {
	as, names, err := p.parseArgs()
	if err != nil {
		return nil, err
	}
	return p.add(dynCall{callee: callee, args: as, names: names}, t)
}

// isBound reports whether name is bound by the expression around (a
// context entry, also the one being defined, a parameter, an iterator): a
// call of it calls a function value.
func (p *parser) isBound(name string) bool {
	return indexOf(p.bound, name) >= 0 || indexOf(p.defining, name) >= 0
}

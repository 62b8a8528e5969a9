package feel

import (
	"strings"

	"github.com/sutra-run/worker/fault"
)

// feelType is the type after instance of: a type name, or list<T>,
// range<T>, context<k: T, ...> and function<T, ...> -> R (DMN 1.4's
// parameterized types).
type feelType struct {
	name string    // number, Any, list, range, context, function, ...
	of   *feelType // list<T>, range<T>; a function's result
	// keys and vals are context<k: T, ...>'s entries; vals alone a
	// function's parameters.
	keys    []string
	vals    []*feelType
	generic bool // written with <...>
}

var anyType = &feelType{name: "Any"}

// maxTypeRefs bounds how many named types (Options.Types) one type
// expands, so names that refer to each other end.
const maxTypeRefs = 64

func (t *feelType) String() string {
	var b strings.Builder
	t.write(&b)
	return b.String()
}

func (t *feelType) write(b *strings.Builder) {
	b.WriteString(t.name)
	if !t.generic {
		return
	}
	b.WriteString("<")
	if t.of != nil && t.name != "function" {
		t.of.write(b)
	}
	for i, v := range t.vals {
		if i > 0 {
			b.WriteString(", ")
		}
		if t.keys != nil {
			writeName(b, t.keys[i])
			b.WriteString(": ")
		}
		v.write(b)
	}
	b.WriteString(">")
	if t.name == "function" {
		b.WriteString(" -> ")
		t.of.write(b)
	}
}

// conforms reports whether every value of type t is one of type u: list
// and range items and context entries conform, a function's parameters
// conversely (it must take what u's take) and its result likewise.
func (t *feelType) conforms(u *feelType) bool {
	switch {
	case u.name == "Any":
		return true
	case t.name != u.name:
		return false
	case !u.generic:
		return true
	}
	switch u.name {
	case "list", "range":
		return u.of == nil || t.generic && t.of != nil && t.of.conforms(u.of)
	case "context":
		for i, k := range u.keys {
			j := indexOf(t.keys, k)
			if j < 0 || !t.vals[j].conforms(u.vals[i]) {
				return false
			}
		}
		return true
	case "function":
		if !t.generic || len(t.vals) != len(u.vals) {
			return false
		}
		for i := range u.vals {
			if !u.vals[i].conforms(t.vals[i]) {
				return false
			}
		}
		return t.of.conforms(u.of)
	}
	return true
}

// has reports whether v is of type t. The items of a list, the ends of a
// range and the entries of a context may also be null.
func (t *feelType) has(c *evalCtx, v any) (bool, error) {
	if err := c.spend(1); err != nil {
		return false, err
	}
	k, err := kindOf(v)
	if err != nil {
		return false, err
	}
	if t.name == "Any" {
		return v != nil, nil
	}
	if k != typeNames[t.name] {
		return false, nil
	}
	inner := func(x any) (bool, error) {
		if x == nil {
			return true, nil
		}
		return t.of.has(c, x)
	}
	switch x := v.(type) {
	case []any:
		if t.of == nil {
			return true, nil
		}
		for _, item := range x {
			if ok, err := inner(item); err != nil || !ok {
				return false, err
			}
		}
	case rangeVal:
		if t.of == nil {
			return true, nil
		}
		for _, end := range []any{x.lo, x.hi} {
			if ok, err := inner(end); err != nil || !ok {
				return false, err
			}
		}
	case closure:
		if !t.generic {
			return true, nil
		}
		return x.typ().conforms(t), nil
	case map[string]any:
		for i, key := range t.keys {
			e, found := x[key]
			if !found {
				return false, nil
			}
			if e == nil {
				continue
			}
			if ok, err := t.vals[i].has(c, e); err != nil || !ok {
				return false, err
			}
		}
	}
	return true, nil
}

// parseType reads the type of instance of: a name, the longest first (a
// built-in type or one of Options.Types), and for list, range, context and
// function their parameters in <...>.
func (p *parser) parseType() (*feelType, error) {
	var name string
	for k := maxFuncWords; k >= 1; k-- {
		if w := p.words(k); w != "" && (typeNames[w] != 0 || w == "Any" || p.opts.Types[w] != "") {
			p.i += k
			name = w
			break
		}
	}
	if name == "" && p.peek().quoted && p.opts.Types[p.peek().text] != "" {
		name = p.next().text
	}
	if name == "" {
		return nil, refuse(p.src, p.peek().pos, "expected a type after instance of (number, string, boolean, date, time, date and time, days and time duration, years and months duration, list, range, context, function, Any or an item definition of the DMN model), found %s", p.peek().describe())
	}
	if typeNames[name] == 0 && name != "Any" {
		return p.namedType(name)
	}
	t := &feelType{name: name}
	if !p.peekOp("<") || name != "list" && name != "range" && name != "context" && name != "function" {
		return t, nil
	}
	open := p.next()
	if err := p.enter(open); err != nil {
		return nil, err
	}
	defer p.leave()
	t.generic = true
	if name == "function" {
		return t, p.parseFunctionType(t, open)
	}
	if name != "context" {
		of, err := p.parseType()
		if err != nil {
			return nil, err
		}
		t.of = of
	} else {
		for !p.peekOp(">") {
			if len(t.keys) > 0 {
				if tk := p.next(); tk.kind != tComma {
					return nil, refuse(p.src, tk.pos, "expected , or > in the context type, found %s", tk.describe())
				}
			}
			k := p.next()
			if k.kind != tName || p.peek().kind != tColon {
				return nil, refuse(p.src, k.pos, "expected a key and : in the context type, found %s", k.describe())
			}
			p.next()
			v, err := p.parseType()
			if err != nil {
				return nil, err
			}
			t.keys = append(t.keys, k.text)
			t.vals = append(t.vals, v)
		}
	}
	if tk := p.next(); tk.kind != tOp || tk.text != ">" {
		return nil, refuse(p.src, tk.pos, "expected > to close the type at position %d, found %s", column(p.src, open.pos), tk.describe())
	}
	return t, nil
}

// parseFunctionType reads function<T, ...> -> R after its "<".
func (p *parser) parseFunctionType(t *feelType, open token) error {
	for !p.peekOp(">") {
		if len(t.vals) > 0 {
			if tk := p.next(); tk.kind != tComma {
				return refuse(p.src, tk.pos, "expected , or > in the function type, found %s", tk.describe())
			}
		}
		v, err := p.parseType()
		if err != nil {
			return err
		}
		t.vals = append(t.vals, v)
	}
	p.next()
	if a, b := p.peek(), p.toks[min(p.i+1, len(p.toks)-1)]; a.kind != tOp || a.text != "-" || b.kind != tOp || b.text != ">" {
		return refuse(p.src, a.pos, "expected -> and the result type after the function type at position %d, found %s", column(p.src, open.pos), a.describe())
	}
	p.i += 2
	r, err := p.parseType()
	t.of = r
	return err
}

// namedType reads the type Options.Types names, as FEEL type text.
func (p *parser) namedType(name string) (*feelType, error) {
	at := p.toks[p.i-1]
	p.typeRefs++
	if p.typeRefs > maxTypeRefs {
		return nil, refuse(p.src, at.pos, "type %q expands into more than %d named types (do the types refer to each other?)", name, maxTypeRefs)
	}
	src := "=" + p.opts.Types[name]
	toks, err := lex(src)
	if err != nil {
		return nil, refuse(p.src, at.pos, "type %q: %s", name, fault.Reason(err))
	}
	sub := &parser{src: src, toks: toks, opts: p.opts, noFilterAt: -1, typeRefs: p.typeRefs, depth: p.depth}
	t, err := sub.parseType()
	if err == nil && sub.peek().kind != tEOF {
		err = sub.unexpected(sub.peek())
	}
	p.typeRefs = sub.typeRefs
	if err != nil {
		if sub.typeRefs > maxTypeRefs {
			return nil, err
		}
		return nil, refuse(p.src, at.pos, "type %q (%s): %s", name, p.opts.Types[name], fault.Reason(err))
	}
	return t, nil
}

// typ is the function's type: its parameters' declared types (Any when
// undeclared) and the type of its result as far as the body tells it.
func (cl closure) typ() *feelType {
	t := &feelType{name: "function", generic: true, of: resultType(cl.body)}
	for _, pt := range cl.types {
		if pt == nil {
			pt = anyType
		}
		t.vals = append(t.vals, pt)
	}
	return t
}

// resultType is the type a function body always gives, when its form
// tells it (a literal, a context of such), else Any.
func resultType(n node) *feelType {
	switch x := n.(type) {
	case literal:
		if k, err := kindOf(x.val); err == nil && x.val != nil {
			for name, tk := range typeNames {
				if tk == k && name != "list" && name != "context" {
					return &feelType{name: name}
				}
			}
		}
	case ctxLit:
		t := &feelType{name: "context", generic: true, keys: x.keys}
		for _, v := range x.vals {
			t.vals = append(t.vals, resultType(v))
		}
		return t
	}
	return anyType
}

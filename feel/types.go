package feel

import (
	"strings"
)

// feelType is the type after instance of: a type name, or list<T>,
// range<T> and context<k: T, ...> (DMN 1.4's parameterized types).
type feelType struct {
	name string    // number, Any, list, range, context, ...
	of   *feelType // list<T>, range<T>
	// keys and vals are context<k: T, ...>'s entries.
	keys    []string
	vals    []*feelType
	generic bool // written with <...>
}

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
	if t.of != nil {
		t.of.write(b)
	}
	for i, k := range t.keys {
		if i > 0 {
			b.WriteString(", ")
		}
		writeName(b, k)
		b.WriteString(": ")
		t.vals[i].write(b)
	}
	b.WriteString(">")
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

// parseType reads the type of instance of: a name, the longest first, and
// for list, range and context their parameters in <...>.
func (p *parser) parseType() (*feelType, error) {
	var name string
	for k := maxFuncWords; k >= 1; k-- {
		if w := p.words(k); w != "" && (typeNames[w] != 0 || w == "Any") {
			p.i += k
			name = w
			break
		}
	}
	if name == "" {
		return nil, refuse(p.src, p.peek().pos, "expected a type after instance of (number, string, boolean, date, time, date and time, days and time duration, years and months duration, list, range, context or Any), found %s", p.peek().describe())
	}
	t := &feelType{name: name}
	if !p.peekOp("<") || name != "list" && name != "range" && name != "context" {
		return t, nil
	}
	open := p.next()
	if err := p.enter(open); err != nil {
		return nil, err
	}
	defer p.leave()
	t.generic = true
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

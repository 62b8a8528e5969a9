package feel

// fromAi is Camunda's tag for a value an AI agent supplies (a tool's
// parameter in an ad-hoc subprocess): at run time it returns its first
// argument unchanged. The other arguments describe the value for whoever
// builds the tool's schema (the agent's job worker); like Camunda, they must
// be null or constants of their type, which is checked here when the call is
// evaluated.
func init() {
	def("fromAi", [][]string{
		{"value"},
		{"value", "description"},
		{"value", "description", "type"},
		{"value", "description", "type", "schema"},
		{"value", "description", "type", "schema", "options"},
	}, func(_ *evalCtx, a args) (any, error) {
		for i := 1; i < len(a.v); i++ {
			if !a.has(i) {
				continue
			}
			var err error
			if i <= 2 {
				_, err = a.str(i)
			} else {
				_, err = a.context(i)
			}
			if err != nil {
				return nil, err
			}
		}
		return a.v[0], nil
	})
}

// AiParameter is one fromAi call of an expression: a parameter of a tool,
// as Camunda lists it for the agent that calls the tool.
type AiParameter struct {
	// Name is the path the value is read from ("toolCall.orderId").
	Name        string
	Description string
	Type        string
	// Schema and Options are nil when not given.
	Schema, Options map[string]any
}

// AiParameters returns the fromAi calls of e in source order whose value
// is a variable or a path into one and whose other arguments are null or
// literals of their types (strings, contexts of literals). Other calls are
// left out: what an agent supplies must be named by a path it can fill.
func (e *Expr) AiParameters() []AiParameter {
	var out []AiParameter
	var visit func(n node)
	visit = func(n node) {
		if c, ok := n.(call); ok && c.fn.name == "fromAi" {
			if p, ok := aiParameter(c.args); ok {
				out = append(out, p)
			}
		}
		for _, k := range children(n) {
			visit(k)
		}
	}
	if e.root != nil {
		visit(e.root)
	}
	return out
}

func aiParameter(args []node) (AiParameter, bool) {
	name, ok := pathName(args[0])
	if !ok {
		return AiParameter{}, false
	}
	p := AiParameter{Name: name}
	for i, a := range args[1:] {
		v, ok := constant(a)
		if !ok {
			return AiParameter{}, false
		}
		if v == nil {
			continue
		}
		var s string
		var m map[string]any
		if i < 2 {
			s, ok = v.(string)
		} else {
			m, ok = v.(map[string]any)
		}
		if !ok {
			return AiParameter{}, false
		}
		switch i {
		case 0:
			p.Description = s
		case 1:
			p.Type = s
		case 2:
			p.Schema = m
		case 3:
			p.Options = m
		}
	}
	return p, true
}

// pathName is "a.b.c" for a variable or a path into one.
func pathName(n node) (string, bool) {
	switch n := n.(type) {
	case name:
		return n.name, true
	case path:
		base, ok := pathName(n.base)
		return base + "." + n.field, ok
	}
	return "", false
}

// constant is the value of a literal, or of a list or context of them.
func constant(n node) (any, bool) {
	switch n := n.(type) {
	case literal:
		switch n.val.(type) {
		case nil, bool, float64, string:
			return n.val, true
		}
	case listLit:
		out := make([]any, len(n.items))
		for i, x := range n.items {
			v, ok := constant(x)
			if !ok {
				return nil, false
			}
			out[i] = v
		}
		return out, true
	case ctxLit:
		out := make(map[string]any, len(n.keys))
		for i, k := range n.keys {
			v, ok := constant(n.vals[i])
			if !ok {
				return nil, false
			}
			out[k] = v
		}
		return out, true
	}
	return nil, false
}

// children are the nodes directly inside n.
func children(n node) []node {
	switch n := n.(type) {
	case path:
		return []node{n.base}
	case neg:
		return []node{n.x}
	case not:
		return []node{n.x}
	case binary:
		return []node{n.l, n.r}
	case ifElse:
		return []node{n.cond, n.then, n.els}
	case forLoop:
		return append(iterNodes(n.iters), n.body)
	case quantified:
		return append(iterNodes(n.iters), n.cond)
	case listLit:
		return n.items
	case ctxLit:
		return n.vals
	case filter:
		return []node{n.base, n.cond}
	case betweenTest:
		return []node{n.x, n.lo, n.hi}
	case inTest:
		out := []node{n.x}
		for _, t := range n.tests {
			out = append(out, testNodes(t)...)
		}
		return out
	case instanceOf:
		return []node{n.x}
	case call:
		return n.args
	case userCall:
		return n.args
	case dynCall:
		return append([]node{n.callee}, n.args...)
	case isDefined:
		return []node{n.x}
	case sortBy:
		return []node{n.list, n.body}
	case lambda:
		return []node{n.body}
	case rangeLit:
		return testNodes(n.t)
	}
	return nil
}

func iterNodes(its []iterator) []node {
	var out []node
	for _, it := range its {
		out = append(out, it.from)
		if it.to != nil {
			out = append(out, it.to)
		}
	}
	return out
}

func testNodes(t unaryTest) []node {
	out := []node{}
	for _, x := range []node{t.a, t.b} {
		if x != nil {
			out = append(out, x)
		}
	}
	for _, sub := range t.any {
		out = append(out, testNodes(sub)...)
	}
	return out
}

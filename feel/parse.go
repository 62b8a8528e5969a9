package feel

// Limits keep both our recursive descent and expr's compiler (10k node
// default) far from their ceilings; real conditions are a few dozen nodes.
const (
	maxDepth = 64
	maxNodes = 1000
)

// reserved are FEEL words that start or continue forms outside the subset.
// They are refused wherever they appear, never read as variable names.
var reserved = map[string]string{
	"if":        "if-then-else is not supported",
	"then":      "if-then-else is not supported",
	"else":      "if-then-else is not supported",
	"for":       "for loops are not supported",
	"return":    "for loops are not supported",
	"some":      "quantified expressions (some/every) are not supported",
	"every":     "quantified expressions (some/every) are not supported",
	"satisfies": "quantified expressions (some/every) are not supported",
	"in":        "in tests are not supported",
	"between":   "between tests are not supported",
	"instance":  "instance of is not supported",
	"of":        "instance of is not supported",
	"function":  "function definitions are not supported",
	"external":  "function definitions are not supported",
	"and":       "and needs an operand on each side",
	"or":        "or needs an operand on each side",
}

type parser struct {
	src   string
	toks  []token
	i     int
	depth int
	nodes int
	names int // variable references; 0 means the expression is a constant
}

// parse parses the expression part of src (which starts with "=").
func parse(src string) (*parser, node, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, nil, err
	}
	p := &parser{src: src, toks: toks}
	if p.peek().kind == tEOF {
		return nil, nil, refuse(src, len(src), "empty expression")
	}
	n, err := p.parseOr()
	if err != nil {
		return nil, nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, nil, p.unexpected(t)
	}
	return p, n, nil
}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

func (p *parser) peekOp(ops ...string) bool {
	t := p.peek()
	if t.kind != tOp {
		return false
	}
	for _, op := range ops {
		if t.text == op {
			return true
		}
	}
	return false
}

func (p *parser) peekWord(w string) bool {
	t := p.peek()
	return t.kind == tName && t.text == w
}

// bareNot reports whether the next token is "not" without a parenthesis
// after it; "not(" is the FEEL function form and parses as a primary.
func (p *parser) bareNot() bool {
	return p.peekWord("not") && p.toks[p.i+1].kind != tLParen
}

func (p *parser) unexpected(t token) error {
	if t.kind == tName {
		if why, ok := reserved[t.text]; ok {
			return refuse(p.src, t.pos, "%s", why)
		}
	}
	return refuse(p.src, t.pos, "unexpected %s", t.describe())
}

// add counts a new node so that a pathological input is refused before
// it is handed to expr.
func (p *parser) add(n node, at token) (node, error) {
	p.nodes++
	if p.nodes > maxNodes {
		return nil, refuse(p.src, at.pos, "expression is too large (more than %d operations)", maxNodes)
	}
	return n, nil
}

func (p *parser) enter(at token) error {
	p.depth++
	if p.depth > maxDepth {
		return refuse(p.src, at.pos, "expression is nested too deeply (more than %d levels)", maxDepth)
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

func (p *parser) parseOr() (node, error) {
	return p.parseLeftAssoc(p.parseAnd, func() bool { return p.peekWord("or") })
}

func (p *parser) parseAnd() (node, error) {
	return p.parseLeftAssoc(p.parseNot, func() bool { return p.peekWord("and") })
}

func (p *parser) parseAdd() (node, error) {
	return p.parseLeftAssoc(p.parseMul, func() bool { return p.peekOp("+", "-") })
}

func (p *parser) parseMul() (node, error) {
	return p.parseLeftAssoc(p.parseUnary, func() bool { return p.peekOp("*", "/") })
}

func (p *parser) parseLeftAssoc(operand func() (node, error), atOp func() bool) (node, error) {
	l, err := operand()
	if err != nil {
		return nil, err
	}
	for atOp() {
		t := p.next()
		r, err := operand()
		if err != nil {
			return nil, err
		}
		if l, err = p.add(binary{binOps[t.text], l, r}, t); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// parseNot handles "not x" without parentheses. Its operand is a single
// (unary) operand, and an operator after it is refused: "not a = b" reads
// as not(a = b) in some languages and (not a) = b in others, and guessing
// would mis-evaluate one of them.
func (p *parser) parseNot() (node, error) {
	if !p.bareNot() {
		return p.parseCmp()
	}
	t := p.next()
	if err := p.enter(t); err != nil {
		return nil, err
	}
	defer p.leave()
	var x node
	var err error
	if p.bareNot() {
		x, err = p.parseNot()
	} else {
		x, err = p.parseUnary()
	}
	if err != nil {
		return nil, err
	}
	if op := p.peek(); op.kind == tOp {
		return nil, refuse(p.src, t.pos, "ambiguous not followed by %s; write not(...) around what it negates", op.describe())
	}
	return p.add(not{x}, t)
}

func (p *parser) parseCmp() (node, error) {
	l, err := p.parseAdd()
	if err != nil {
		return nil, err
	}
	if !p.peekOp("=", "!=", "<", "<=", ">", ">=") {
		return l, nil
	}
	t := p.next()
	r, err := p.parseAdd()
	if err != nil {
		return nil, err
	}
	if p.peekOp("=", "!=", "<", "<=", ">", ">=") {
		return nil, refuse(p.src, p.peek().pos, "comparisons do not chain; combine them with and")
	}
	return p.add(binary{binOps[t.text], l, r}, t)
}

func (p *parser) parseUnary() (node, error) {
	if !p.peekOp("-") {
		return p.parsePrimary()
	}
	t := p.next()
	if err := p.enter(t); err != nil {
		return nil, err
	}
	defer p.leave()
	x, err := p.parseUnary()
	if err != nil {
		return nil, err
	}
	return p.add(neg{x}, t)
}

func (p *parser) parsePrimary() (node, error) {
	t := p.next()
	var n node
	var err error
	switch t.kind {
	case tNum:
		n = literal{t.num}
	case tStr:
		n = literal{t.str}
	case tLParen:
		if n, err = p.parseGroup(t); err != nil {
			return nil, err
		}
	case tName:
		switch t.text {
		case "true", "false":
			n = literal{t.text == "true"}
		case "null":
			n = literal{nil}
		case "not":
			if p.peek().kind != tLParen {
				return nil, refuse(p.src, t.pos, "not without parentheses is only supported at the start of an and/or operand; write not(...)")
			}
			x, err := p.parseGroup(p.next())
			if err != nil {
				return nil, err
			}
			n = not{x}
		default:
			return p.parseName(t)
		}
	case tEOF:
		return nil, refuse(p.src, t.pos, "unexpected end of expression")
	default:
		return nil, p.unexpected(t)
	}
	if p.peek().kind == tDot {
		return nil, refuse(p.src, p.peek().pos, "path access (.) is only supported after a variable name")
	}
	return p.add(n, t)
}

// parseGroup parses "( expr )" after its "(" was consumed as open.
func (p *parser) parseGroup(open token) (node, error) {
	if err := p.enter(open); err != nil {
		return nil, err
	}
	defer p.leave()
	x, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	if t := p.next(); t.kind != tRParen {
		return nil, refuse(p.src, t.pos, "expected ) to close the ( at position %d, found %s", column(p.src, open.pos), t.describe())
	}
	return x, nil
}

// parseName parses a variable and its path: a, a.b, a.b.c.
func (p *parser) parseName(t token) (node, error) {
	if why, ok := reserved[t.text]; ok {
		return nil, refuse(p.src, t.pos, "%s", why)
	}
	if p.peek().kind == tLParen {
		return nil, refuse(p.src, t.pos, "function calls are not supported (%s(...))", t.text)
	}
	p.names++
	n, err := p.add(name{t.text}, t)
	if err != nil {
		return nil, err
	}
	for p.peek().kind == tDot {
		dot := p.next()
		f := p.next()
		if f.kind != tName || isKeyword(f.text) {
			return nil, refuse(p.src, dot.pos, "expected a field name after ., found %s", f.describe())
		}
		if p.peek().kind == tLParen {
			return nil, refuse(p.src, f.pos, "function calls are not supported (%s(...))", f.text)
		}
		if n, err = p.add(path{n, f.text}, f); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// isKeyword reports whether s is a FEEL keyword, which cannot name a variable
// or a field.
func isKeyword(s string) bool {
	switch s {
	case "true", "false", "null", "not":
		return true
	}
	_, ok := reserved[s]
	return ok
}

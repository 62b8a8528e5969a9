package feel

import (
	"strings"
)

// Limits keep the recursive descent and evaluation far from the stack's
// ceiling; real expressions are a few dozen nodes.
const (
	maxDepth = 64
	maxNodes = 1000
)

// keywords cannot name variables or fields (feel-scala reserves fewer; a
// refusal here is never a mis-evaluation).
var keywords = map[string]bool{
	"true": true, "false": true, "null": true, "not": true,
	"if": true, "then": true, "else": true, "for": true, "in": true, "return": true,
	"some": true, "every": true, "satisfies": true, "between": true, "instance": true,
	"of": true, "function": true, "external": true, "and": true, "or": true,
}

func isKeyword(s string) bool { return keywords[s] }

// isWord reports whether t is a name written without backticks: only such
// a name can be a keyword or a word of a function or type name.
func isWord(t token) bool { return t.kind == tName && !t.quoted }

// isName reports whether s reads back as one name token that is not a
// keyword, so that a context key can be printed bare.
func isName(s string) bool {
	toks, err := lex("=" + s)
	return err == nil && len(toks) == 2 && isWord(toks[0]) && toks[0].text == s && !isKeyword(s)
}

type parser struct {
	src   string
	toks  []token
	i     int
	depth int
	nodes int
	free  int      // references to names nothing in the expression binds; 0 means a constant
	clock bool     // calls now() or today()
	seed  bool     // calls uuid()
	bound []string // names bound by the enclosing for, some, every, filters and context literals
	opts  Options
	// defining are the context keys whose values are being parsed: a
	// function value there may call itself by its key (Options.Nulls).
	defining []string
	// noFilterAt is the depth at which "[" ends an interval's upper bound
	// (]1..5[) instead of starting a filter; -1 when none.
	noFilterAt int
	typeRefs   int // named types expanded (namedType)
}

// parse parses the expression part of src (which starts with "=").
func parse(src string, opts Options) (*parser, node, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, nil, err
	}
	p := &parser{src: src, toks: toks, noFilterAt: -1, opts: opts}
	if p.peek().kind == tEOF {
		return nil, nil, refuse(src, len(src), "empty expression")
	}
	n, err := p.parseExpr()
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
	return isWord(t) && t.text == w
}

func (p *parser) expectWord(w, after string) error {
	if !p.peekWord(w) {
		return refuse(p.src, p.peek().pos, "expected %s after %s, found %s", w, after, p.peek().describe())
	}
	p.next()
	return nil
}

// expectClose consumes the token closing open.
func (p *parser) expectClose(open token, want tokKind, text string) error {
	if t := p.next(); t.kind != want {
		return refuse(p.src, t.pos, "expected %s to close the %s at position %d, found %s", text, open.text, column(p.src, open.pos), t.describe())
	}
	return nil
}

// bareNot reports whether the next token is "not" without a parenthesis
// after it; "not(" is the FEEL function form and parses as a primary.
func (p *parser) bareNot() bool {
	return p.peekWord("not") && p.toks[p.i+1].kind != tLParen
}

func (p *parser) unexpected(t token) error {
	if isWord(t) && (t.text == "and" || t.text == "or") {
		return refuse(p.src, t.pos, "%s needs an operand on each side", t.text)
	}
	return refuse(p.src, t.pos, "unexpected %s", t.describe())
}

// add counts a new node so that a pathological input is refused before
// evaluation could take long.
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

func (p *parser) bind(names ...string) { p.bound = append(p.bound, names...) }

func (p *parser) unbind(n int) { p.bound = p.bound[:len(p.bound)-n] }

// reference notes a use of a name: free unless something in the
// expression binds it. Inside a filter any name may be an item's entry,
// which only makes the count conservative.
func (p *parser) reference(name string) {
	for _, b := range p.bound {
		if b == name {
			return
		}
	}
	p.free++
}

// parseExpr parses a full expression; if, for, some and every take the
// rest of it, as in feel-scala.
func (p *parser) parseExpr() (node, error) {
	switch {
	case p.peekWord("if"):
		return p.parseIf()
	case p.peekWord("for"):
		return p.parseFor()
	case p.peekWord("some"), p.peekWord("every"):
		return p.parseQuantified()
	}
	return p.parseOr()
}

func (p *parser) parseIf() (node, error) {
	t := p.next()
	if err := p.enter(t); err != nil {
		return nil, err
	}
	defer p.leave()
	cond, err := p.parseExpr()
	if err != nil {
		return nil, err
	}
	if err := p.expectWord("then", "the condition of if"); err != nil {
		return nil, err
	}
	then, err := p.parseExpr()
	if err != nil {
		return nil, err
	}
	if err := p.expectWord("else", "if ... then ..."); err != nil {
		return nil, err
	}
	els, err := p.parseExpr()
	if err != nil {
		return nil, err
	}
	return p.add(ifElse{cond, then, els}, t)
}

// commaList calls item for each element of a comma-separated list ending
// before closing. The list may be empty; a trailing comma is refused, as in
// feel-scala.
func (p *parser) commaList(closing tokKind, item func() error) error {
	if p.peek().kind == closing {
		return nil
	}
	for {
		if err := item(); err != nil {
			return err
		}
		if p.peek().kind != tComma {
			return nil
		}
		p.next()
	}
}

// parseIterators parses "x in xs, y in 1..3" and binds the names; the
// caller unbinds them.
func (p *parser) parseIterators(word string) ([]iterator, error) {
	var iters []iterator
	for {
		n := p.next()
		if !isWord(n) || isKeyword(n.text) {
			return nil, refuse(p.src, n.pos, "expected a variable name after %s, found %s", word, n.describe())
		}
		if err := p.expectWord("in", word+" "+n.text); err != nil {
			return nil, err
		}
		it := iterator{name: n.text}
		var err error
		if it.from, err = p.parseAdd(); err == nil && p.peek().kind == tRange {
			p.next()
			it.to, err = p.parseAdd()
		}
		if err != nil {
			return nil, err
		}
		iters = append(iters, it)
		p.bind(it.name)
		if p.peek().kind != tComma {
			return iters, nil
		}
		p.next()
	}
}

func (p *parser) parseFor() (node, error) {
	t := p.next()
	if err := p.enter(t); err != nil {
		return nil, err
	}
	defer p.leave()
	iters, err := p.parseIterators("for")
	if err != nil {
		return nil, err
	}
	defer p.unbind(len(iters) + 1)
	p.bind("partial")
	if err := p.expectWord("return", "for ... in ..."); err != nil {
		return nil, err
	}
	body, err := p.parseExpr()
	if err != nil {
		return nil, err
	}
	return p.add(forLoop{iters, body}, t)
}

func (p *parser) parseQuantified() (node, error) {
	t := p.next()
	if err := p.enter(t); err != nil {
		return nil, err
	}
	defer p.leave()
	iters, err := p.parseIterators(t.text)
	if err != nil {
		return nil, err
	}
	defer p.unbind(len(iters))
	if err := p.expectWord("satisfies", t.text+" ... in ..."); err != nil {
		return nil, err
	}
	cond, err := p.parseExpr()
	if err != nil {
		return nil, err
	}
	return p.add(quantified{every: t.text == "every", iters: iters, cond: cond}, t)
}

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
	return p.parseLeftAssoc(p.parsePow, func() bool { return p.peekOp("*", "/") })
}

// parsePow parses exponentiation, which binds tighter than * and looser
// than negation (-2 ** 2 is 4), left to right, as DMN's grammar has it.
func (p *parser) parsePow() (node, error) {
	return p.parseLeftAssoc(p.parseUnary, func() bool { return p.peekOp("**") })
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

// atComparison reports whether a comparison-level operator follows.
func (p *parser) atComparison() bool {
	return p.peekOp("=", "!=", "<", "<=", ">", ">=") || p.peekWord("between") || p.peekWord("in") || p.peekWord("instance")
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
	if op := p.peek(); op.kind == tOp || p.atComparison() {
		return nil, refuse(p.src, t.pos, "ambiguous not followed by %s; write not(...) around what it negates", op.describe())
	}
	return p.add(not{x}, t)
}

func (p *parser) parseCmp() (node, error) {
	l, err := p.parseAdd()
	if err != nil {
		return nil, err
	}
	if !p.atComparison() {
		return l, nil
	}
	t := p.next()
	var n node
	switch t.text {
	case "between":
		lo, err := p.parseAdd()
		if err != nil {
			return nil, err
		}
		if err := p.expectWord("and", "between ..."); err != nil {
			return nil, err
		}
		hi, err := p.parseAdd()
		if err != nil {
			return nil, err
		}
		n = betweenTest{l, lo, hi}
	case "in":
		tests, err := p.parseTests()
		if err != nil {
			return nil, err
		}
		n = inTest{l, tests}
	case "instance":
		if err := p.expectWord("of", "instance"); err != nil {
			return nil, err
		}
		typ, err := p.parseType()
		if err != nil {
			return nil, err
		}
		n = instanceOf{l, typ}
	default:
		r, err := p.parseAdd()
		if err != nil {
			return nil, err
		}
		n = binary{binOps[t.text], l, r}
	}
	if p.atComparison() {
		return nil, refuse(p.src, p.peek().pos, "comparisons do not chain; combine them with and")
	}
	return p.add(n, t)
}

// words joins the next k tokens with spaces if they are all names.
func (p *parser) words(k int) string {
	if p.i+k > len(p.toks) {
		return ""
	}
	ws := make([]string, k)
	for j := range k {
		if t := p.toks[p.i+j]; isWord(t) {
			ws[j] = t.text
		} else {
			return ""
		}
	}
	return strings.Join(ws, " ")
}

// parseTests parses what follows "in": one test, a parenthesised list of
// tests (any of which may match), or an interval.
func (p *parser) parseTests() ([]unaryTest, error) {
	if p.peek().kind != tLParen {
		t, err := p.parseTest()
		return []unaryTest{t}, err
	}
	if t, ok, err := p.tryInterval(); ok || err != nil {
		return []unaryTest{t}, err
	}
	open := p.next()
	if err := p.enter(open); err != nil {
		return nil, err
	}
	defer p.leave()
	var tests []unaryTest
	for {
		t, err := p.parseTest()
		if err != nil {
			return nil, err
		}
		tests = append(tests, t)
		if p.peek().kind != tComma {
			break
		}
		p.next()
	}
	return tests, p.expectClose(open, tRParen, ")")
}

// parseTest parses one unary test: < e (and <=, >, >=), an interval, or an
// expression the value must equal (or, when it is a list, be in).
func (p *parser) parseTest() (unaryTest, error) {
	t := p.peek()
	if p.peekOp("<", "<=", ">", ">=", "=", "!=") {
		p.next()
		e, err := p.parseAdd()
		return unaryTest{kind: testCompare, op: binOps[t.text], a: e}, err
	}
	if t.kind == tLParen || t.kind == tLBrack || t.kind == tRBrack {
		if it, ok, err := p.tryInterval(); ok || err != nil {
			return it, err
		}
	}
	if t.kind == tLBrack {
		if it, ok, err := p.tryIntervals(); ok || err != nil {
			return it, err
		}
	}
	e, err := p.parseAdd()
	return unaryTest{kind: testEqual, a: e}, err
}

// tryInterval parses an interval such as [1..5], (1..5) or ]1..5[ if one
// starts here; otherwise it reports false and leaves the parser where it
// was, since "(" and "[" also start groups and lists.
func (p *parser) tryInterval() (unaryTest, bool, error) {
	saved := *p
	open := p.next()
	if err := p.enter(open); err != nil {
		return unaryTest{}, true, err
	}
	defer p.leave()
	lo, err := p.parseAdd()
	if open.kind != tRBrack && (err != nil || p.peek().kind != tRange) {
		*p = saved
		return unaryTest{}, false, nil
	}
	if err != nil {
		return unaryTest{}, true, err
	}
	if t := p.next(); t.kind != tRange {
		return unaryTest{}, true, refuse(p.src, t.pos, "expected .. in the interval starting at position %d, found %s", column(p.src, open.pos), t.describe())
	}
	// The upper bound may be closed by "[" (1..5[ is open), which a first
	// reading takes for a filter; read it again without filters then.
	atHi := *p
	hi, err := p.parseAdd()
	if k := p.peek().kind; err != nil || k != tRBrack && k != tRParen && k != tLBrack {
		*p = atHi
		p.noFilterAt = p.depth
		hi, err = p.parseAdd()
		p.noFilterAt = -1
	}
	if err != nil {
		return unaryTest{}, true, err
	}
	closing := p.next()
	if closing.kind != tRBrack && closing.kind != tRParen && closing.kind != tLBrack {
		return unaryTest{}, true, refuse(p.src, closing.pos, "expected ] or ) to close the interval starting at position %d, found %s", column(p.src, open.pos), closing.describe())
	}
	return unaryTest{kind: testInterval, a: lo, b: hi, openLo: open.kind != tLBrack, openHi: closing.kind != tRBrack}, true, nil
}

// tryIntervals parses a list of intervals, [[1..5], [7..9]], which a value
// is in when it is in any of them, if one starts here; otherwise it reports
// false and leaves the parser where it was.
func (p *parser) tryIntervals() (unaryTest, bool, error) {
	saved := *p
	open := p.next()
	if err := p.enter(open); err != nil {
		return unaryTest{}, true, err
	}
	defer p.leave()
	var any []unaryTest
	for {
		if k := p.peek().kind; k != tLParen && k != tLBrack && k != tRBrack {
			*p = saved
			return unaryTest{}, false, nil
		}
		it, ok, err := p.tryInterval()
		if !ok || err != nil {
			*p = saved
			return unaryTest{}, false, nil
		}
		any = append(any, it)
		if p.peek().kind != tComma {
			break
		}
		p.next()
	}
	if err := p.expectClose(open, tRBrack, "]"); err != nil {
		*p = saved
		return unaryTest{}, false, nil
	}
	return unaryTest{kind: testIntervals, any: any}, true, nil
}

func (p *parser) parseUnary() (node, error) {
	if !p.peekOp("-") {
		return p.parsePostfix()
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

// parsePostfix parses a primary followed by paths (.field) and filters
// ([condition] or [index]), in any order.
func (p *parser) parsePostfix() (node, error) {
	n, err := p.parsePrimary()
	if err != nil {
		return nil, err
	}
	for {
		switch p.peek().kind {
		case tDot:
			dot := p.next()
			f := p.next()
			if f.kind != tName || !f.quoted && isKeyword(f.text) {
				return nil, refuse(p.src, dot.pos, "expected a field name after ., found %s", f.describe())
			}
			field := f.text
			// The properties whose names have a space.
			if field == "time" && !f.quoted && p.peekWord("offset") {
				p.next()
				field = "time offset"
			}
			if (field == "start" || field == "end") && !f.quoted && p.peekWord("included") {
				p.next()
				field += " included"
			}
			if p.peek().kind == tLParen && !p.opts.Nulls {
				return nil, refuse(p.src, f.pos, "calling a function through a path (%s(...)) is not supported", field)
			}
			if n, err = p.add(path{n, field}, f); err != nil {
				return nil, err
			}
		case tLBrack:
			if p.noFilterAt == p.depth {
				return n, nil
			}
			open := p.next()
			if err := p.enter(open); err != nil {
				return nil, err
			}
			p.bind("item")
			cond, err := p.parseExpr()
			p.unbind(1)
			p.leave()
			if err != nil {
				return nil, err
			}
			if err := p.expectClose(open, tRBrack, "]"); err != nil {
				return nil, err
			}
			if n, err = p.add(filter{base: n, cond: cond, index: isNumber(cond)}, open); err != nil {
				return nil, err
			}
		case tLParen:
			if !p.opts.Nulls {
				return n, nil
			}
			// A call of the function value n gives (Options.Nulls).
			if n, err = p.parseDynCall(p.peek(), n); err != nil {
				return nil, err
			}
		default:
			return n, nil
		}
	}
}

// isNumber reports whether n is a number literal, possibly negated: such a
// filter is an index (xs[1], xs[-1]).
func isNumber(n node) bool {
	if m, ok := n.(neg); ok {
		n = m.x
	}
	l, ok := n.(literal)
	_, num := l.val.(float64)
	return ok && num
}

func (p *parser) parsePrimary() (node, error) {
	if k := p.peek().kind; (k == tLBrack || k == tLParen || k == tRBrack) && p.rangeAhead() {
		return p.parseRange()
	}
	t := p.next()
	var n node
	var err error
	switch t.kind {
	case tNum:
		n = literal{t.num}
	case tStr:
		n = literal{t.str}
	case tTemporal:
		v, err := parseTemporal(t.str)
		if err != nil {
			return p.badTemporal(t, t.str, err)
		}
		n = literal{v}
	case tLParen:
		if err := p.enter(t); err != nil {
			return nil, err
		}
		defer p.leave()
		op := p.peek()
		if p.opts.Nulls && p.peekOp("<", "<=", ">", ">=", "=", "!=") {
			// DMN 1.5's unary comparison as a range value: (< 10).
			p.next()
			if n, err = p.parseAdd(); err != nil {
				return nil, err
			}
			if err := p.expectClose(t, tRParen, ")"); err != nil {
				return nil, err
			}
			return p.add(cmpRange{op: op.text, x: n}, t)
		}
		if n, err = p.parseExpr(); err != nil {
			return nil, err
		}
		if err := p.expectClose(t, tRParen, ")"); err != nil {
			return nil, err
		}
		return n, nil
	case tLBrack:
		if n, err = p.parseList(t); err != nil {
			return nil, err
		}
	case tLBrace:
		if n, err = p.parseContext(t); err != nil {
			return nil, err
		}
	case tName:
		if uf := p.opts.Functions[t.text]; t.quoted && uf != nil && p.peek().kind == tLParen {
			return p.parseUserCall(t, uf)
		}
		if t.quoted && p.opts.Nulls && p.isBound(t.text) && p.peek().kind == tLParen {
			return p.parseDynCall(t, name{t.text})
		}
		if t.quoted && p.opts.Nulls && builtins[t.text] != nil && p.peek().kind == tLParen {
			// A built-in's name quoted as a model's name (a decision
			// named "met by"): a call is the built-in's.
			return p.parseCall(t, t.text)
		}
		if t.quoted {
			if n, ok := p.functionValue(t); ok {
				return n, nil
			}
			p.reference(t.text)
			return p.add(name{t.text}, t)
		}
		return p.parseName(t)
	case tEOF:
		return nil, refuse(p.src, t.pos, "unexpected end of expression")
	default:
		return nil, p.unexpected(t)
	}
	return p.add(n, t)
}

func (p *parser) parseList(open token) (node, error) {
	if err := p.enter(open); err != nil {
		return nil, err
	}
	defer p.leave()
	items := []node{}
	err := p.commaList(tRBrack, func() error {
		item, err := p.parseExpr()
		items = append(items, item)
		return err
	})
	if err != nil {
		return nil, err
	}
	return listLit{items}, p.expectClose(open, tRBrack, "]")
}

// parseContext parses {key: value, ...}. Each entry is in scope for the
// entries after it. A key is a string or the text up to its colon, which
// may contain spaces and symbols ({first name: ...}), as in feel-scala.
func (p *parser) parseContext(open token) (node, error) {
	if err := p.enter(open); err != nil {
		return nil, err
	}
	defer p.leave()
	var c ctxLit
	dup := false
	defer func() { p.unbind(len(c.keys)) }()
	err := p.commaList(tRBrace, func() error {
		k, err := p.parseKey()
		if err != nil {
			return err
		}
		if indexOf(c.keys, k) >= 0 {
			if !p.opts.Nulls {
				return refuse(p.src, p.toks[p.i-1].pos, "key %q appears twice in the context", k)
			}
			dup = true // DMN: an invalid context is null
		}
		p.defining = append(p.defining, k)
		v, err := p.parseExpr()
		p.defining = p.defining[:len(p.defining)-1]
		if err != nil {
			return err
		}
		c.keys = append(c.keys, k)
		c.vals = append(c.vals, v)
		p.bind(k)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if dup {
		return literal{nil}, p.expectClose(open, tRBrace, "}")
	}
	return c, p.expectClose(open, tRBrace, "}")
}

// parseKey reads a context key and its colon.
func (p *parser) parseKey() (string, error) {
	first := p.peek()
	if (first.kind == tStr || first.quoted) && p.toks[p.i+1].kind == tColon {
		p.i += 2
		if first.quoted {
			return first.text, nil
		}
		return first.str, nil
	}
	last := first
	for {
		switch t := p.peek(); t.kind {
		case tColon:
			if t == first {
				return "", refuse(p.src, t.pos, "expected a context key before :")
			}
			p.next()
			return p.src[first.pos : last.pos+len(last.text)], nil
		case tName, tNum, tOp, tDot, tRange, tLParen, tRParen:
			if t.quoted {
				return "", refuse(p.src, t.pos, "a backtick-quoted context key must be the whole key")
			}
			last = p.next()
		default:
			return "", refuse(p.src, t.pos, "expected a context key followed by :, found %s", t.describe())
		}
	}
}

// parseName parses what starts with a name: true, false, null, not(...),
// a function call (whose name may have spaces: the longest built-in name
// whose words follow wins, as in feel-scala) or a variable.
func (p *parser) parseName(t token) (node, error) {
	switch t.text {
	case "true", "false":
		return p.add(literal{t.text == "true"}, t)
	case "null":
		return p.add(literal{nil}, t)
	case "if", "for", "some", "every":
		return nil, refuse(p.src, t.pos, "%s must be in parentheses when it is an operand: (%s ...)", t.text, t.text)
	case "function":
		if p.opts.Nulls {
			return p.parseFunction(t)
		}
		return nil, refuse(p.src, t.pos, "function definitions are only supported as the second argument of sort")
	}
	p.i-- // t is the first word of a possible function name
	for k := maxFuncWords; k >= 2; k-- {
		if w := p.words(k); w != "" && p.toks[p.i+k].kind == tLParen && (builtins[w] != nil || unsupportedFuncs[w] != "") {
			p.i += k
			return p.parseCall(t, w)
		}
	}
	p.i++
	if p.peek().kind == tLParen && p.opts.Nulls && p.isBound(t.text) && builtins[t.text] == nil && p.opts.Functions[t.text] == nil {
		return p.parseDynCall(t, name{t.text})
	}
	if p.peek().kind == tLParen && (!isKeyword(t.text) || t.text == "not") {
		return p.parseCall(t, t.text)
	}
	if isKeyword(t.text) {
		if t.text == "and" || t.text == "or" {
			return nil, p.unexpected(t)
		}
		if t.text == "not" {
			return nil, refuse(p.src, t.pos, "not without parentheses is only supported at the start of an and/or operand; write not(...)")
		}
		return nil, refuse(p.src, t.pos, "%q is a reserved word and cannot name a variable", t.text)
	}
	// Words that run into "(" name a function we do not know: say so
	// rather than report the second word as unexpected.
	run := []string{t.text}
	for j := p.i; isWord(p.toks[j]) && !isKeyword(p.toks[j].text); j++ {
		run = append(run, p.toks[j].text)
		if p.toks[j+1].kind == tLParen {
			return nil, refuseFunc(p.src, strings.Join(run, " "))
		}
	}
	if n, ok := p.functionValue(t); ok {
		return n, nil
	}
	p.reference(t.text)
	return p.add(name{t.text}, t)
}

// functionValue is the Function t names, where a value goes, under
// Options.Nulls: bkm(otherBkm) passes one to be called.
func (p *parser) functionValue(t token) (node, bool) {
	fn := p.opts.Functions[t.text]
	if !p.opts.Nulls || fn == nil || p.isBound(t.text) {
		return nil, false
	}
	p.free++ // its body may be defined after this expression is compiled
	n, err := p.add(fnRef{fn}, t)
	return n, err == nil
}

// parseCall parses the arguments of fname, whose "(" is next.
func (p *parser) parseCall(t token, fname string) (node, error) {
	if uf := p.opts.Functions[fname]; uf != nil {
		return p.parseUserCall(t, uf)
	}
	fn := builtins[fname]
	if fn == nil && p.opts.Nulls && unsupportedFuncs[fname] == "" && !strings.Contains(fname, " ") {
		// In DMN a name may hold a function (a business knowledge
		// model's parameter): call what it holds, null when nothing.
		p.reference(fname)
		return p.parseDynCall(t, name{fname})
	}
	if fn == nil {
		return nil, refuseFunc(p.src, fname)
	}
	if fname == "sort" {
		return p.parseSort(t)
	}
	as, names, err := p.parseArgs()
	if err != nil {
		return nil, err
	}
	if as, err = p.arrange(fn, as, names); err != nil {
		if p.opts.Nulls && !(fn.variadic && names != nil && len(fn.sigs[0]) > 1) {
			// DMN: a built-in given arguments it does not take is null.
			return p.add(literal{nil}, t)
		}
		return nil, err
	}
	p.clock = p.clock || fn.clock
	p.seed = p.seed || fn.seeded
	switch fname {
	case "not":
		return p.add(not{as[0]}, t)
	case "is defined":
		return p.add(isDefined{as[0]}, t)
	case "date", "time", "date and time", "duration":
		// A conversion of a string literal is a literal, checked now, as
		// feel-scala's parser does.
		if l, ok := as[0].(literal); ok && len(as) == 1 {
			if s, ok := l.val.(string); ok {
				v, err := fn.fn(&evalCtx{}, args{f: fn, v: []any{s}})
				if err != nil {
					return p.badTemporal(t, s, err)
				}
				return p.add(literal{v}, t)
			}
		}
	}
	c := call{fn: fn, args: as}
	if null, err := p.precompile(&c, t); err != nil {
		return nil, err
	} else if null {
		return p.add(literal{nil}, t)
	}
	return p.add(c, t)
}

// parseArgs parses the arguments of a call, whose "(" is next: all in
// order, or all by name (names then holds them).
func (p *parser) parseArgs() (as []node, names []string, err error) {
	open := p.next()
	if err := p.enter(open); err != nil {
		return nil, nil, err
	}
	defer p.leave()
	err = p.commaList(tRParen, func() error {
		at := p.peek()
		if n, ok := p.argName(); ok {
			names = append(names, n)
		}
		if len(names) > 0 && len(names) != len(as)+1 {
			return refuse(p.src, at.pos, "arguments must be all named or all positional")
		}
		a, err := p.parseExpr()
		as = append(as, a)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return as, names, p.expectClose(open, tRParen, ")")
}

// argName consumes "name:" (the name may have spaces) if a named argument
// starts here.
func (p *parser) argName() (string, bool) {
	if t := p.peek(); t.kind == tName && t.quoted && p.toks[p.i+1].kind == tColon {
		p.i += 2
		return t.text, true
	}
	j := p.i
	for isWord(p.toks[j]) {
		j++
	}
	if j == p.i || p.toks[j].kind != tColon {
		return "", false
	}
	w := p.words(j - p.i)
	p.i = j + 1
	return w, true
}

// arrange checks the number of arguments and turns named arguments into
// positional ones: the first form of fn whose parameters include all the
// names, with null for the ones not given (feel-scala's rule).
func (p *parser) arrange(fn *builtin, a []node, names []string) ([]node, error) {
	if names == nil {
		for _, sig := range fn.sigs {
			if len(a) == len(sig) || fn.variadic && len(a) >= len(sig) {
				return a, nil
			}
		}
		return nil, refuseArity(p.src, fn, len(a))
	}
	if fn.variadic {
		// One named argument for the one parameter is the list it takes
		// (sum(list: xs)), as a single positional argument is.
		if sig := fn.sigs[0]; len(sig) == 1 && len(names) == 1 && names[0] == sig[0] {
			return a, nil
		}
		return nil, refuseCall(p.src, fn, "named arguments are not supported for it but for a single list; pass the arguments in order")
	}
next:
	for _, sig := range fn.sigs {
		r := make([]node, len(sig))
		for i, n := range names {
			j := indexOf(sig, n)
			if j < 0 {
				continue next
			}
			if r[j] != nil {
				return nil, refuseCall(p.src, fn, "argument %q is given twice", n)
			}
			r[j] = a[i]
		}
		for j := range r {
			if r[j] == nil {
				r[j] = literal{nil}
			}
		}
		return r, nil
	}
	return nil, refuseCall(p.src, fn, "no form of it has the parameters %s", strings.Join(names, ", "))
}

func indexOf(s []string, x string) int {
	for i, v := range s {
		if v == x {
			return i
		}
	}
	return -1
}

// precompile compiles a literal regular expression once, at deploy time,
// refusing an invalid one. Under Options.Nulls literal flags that are no
// XPath flags at all make the call null (those XPath has but Go's regular
// expressions lack, x and q, stay refused).
func (p *parser) precompile(c *call, t token) (null bool, err error) {
	flagsAt := map[string]int{"matches": 2, "replace": 3, "split": -1, "extract": -1}
	at, ok := flagsAt[c.fn.name]
	if !ok {
		return false, nil
	}
	pattern, ok := c.args[1].(literal)
	if s, isStr := pattern.val.(string); ok && isStr {
		flags := ""
		if at > 0 && at < len(c.args) {
			f, ok := c.args[at].(literal)
			if !ok {
				return false, nil
			}
			if f.val != nil {
				if flags, ok = f.val.(string); !ok {
					return false, nil
				}
			}
		}
		if p.opts.Nulls && strings.Trim(flags, "smixq") != "" {
			return true, nil
		}
		re, err := compileRegex(s, flags)
		if err != nil {
			return false, refuse(p.src, t.pos, "%s: %v", c.fn.name, err)
		}
		c.re = re
	}
	return false, nil
}

// parseSort parses sort(list, function(a, b) condition), positionally or
// with the names list and precedes.
func (p *parser) parseSort(t token) (node, error) {
	open := p.next()
	if err := p.enter(open); err != nil {
		return nil, err
	}
	defer p.leave()
	var s sortBy
	i := 0
	err := p.commaList(tRParen, func() error {
		at := p.peek()
		if n, ok := p.argName(); ok {
			i = indexOf([]string{"list", "precedes"}, n)
		}
		var err error
		switch {
		case i == 0 && s.list == nil:
			s.list, err = p.parseExpr()
		case i == 1 && s.body == nil && s.fn == nil:
			if p.opts.Nulls && !p.peekWord("function") {
				s.fn, err = p.parseExpr()
				break
			}
			err = p.parseLambda(&s)
		default:
			return refuse(p.src, at.pos, "sort takes a list and a precedes function")
		}
		i++
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := p.expectClose(open, tRParen, ")"); err != nil {
		return nil, err
	}
	if s.list == nil || s.body == nil && s.fn == nil {
		return nil, refuse(p.src, t.pos, "sort takes a list and a precedes function: sort(xs, function(a, b) a < b)")
	}
	return p.add(s, t)
}

// parseLambda parses function(a, b) body, the precedes argument of sort.
func (p *parser) parseLambda(s *sortBy) error {
	t := p.next()
	if !isWord(t) || t.text != "function" {
		return refuse(p.src, t.pos, "sort needs a function(a, b) as its precedes argument, found %s", t.describe())
	}
	open := p.next()
	if open.kind != tLParen {
		return refuse(p.src, open.pos, "expected ( after function, found %s", open.describe())
	}
	var params []string
	err := p.commaList(tRParen, func() error {
		n := p.next()
		if !isWord(n) || isKeyword(n.text) || indexOf(params, n.text) >= 0 {
			return refuse(p.src, n.pos, "expected a parameter name, found %s", n.describe())
		}
		params = append(params, n.text)
		return nil
	})
	if err != nil {
		return err
	}
	if err := p.expectClose(open, tRParen, ")"); err != nil {
		return err
	}
	if len(params) != 2 {
		return refuse(p.src, t.pos, "the precedes function of sort takes 2 parameters, not %d", len(params))
	}
	p.bind(params...)
	defer p.unbind(2)
	body, err := p.parseExpr()
	s.a, s.b, s.body = params[0], params[1], body
	return err
}

// badTemporal is what a date, time or duration literal s that does not
// parse compiles to: a refusal, or under Options.Nulls null, as DMN makes
// a conversion of an invalid string.
func (p *parser) badTemporal(t token, s string, err error) (node, error) {
	if !p.opts.Nulls {
		return nil, refuse(p.src, t.pos, "%v", err)
	}
	return p.add(literal{nil}, t)
}

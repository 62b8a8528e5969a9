package feel

import (
	"fmt"
	"strings"
)

// UnaryTests is a compiled list of unary tests, as a DMN decision table's
// input entry holds them: "-" (anything), one or more tests separated by
// commas (< e, <= e, > e, >= e, an interval, or an expression the value
// must equal or, when it is a list, be in), or not(...) around such a list.
// It is what "x in (...)" tests x against, compiled on its own so that the
// dmn package evaluates it under the same limits as every expression.
//
// A source that mentions "?" is instead one boolean expression in which
// "?" is the value tested (? > 5 and ? < 10, contains(?, "x")), as DMN
// 1.2 and later allow: it matches when it evaluates to true.
type UnaryTests struct {
	src    string
	any    bool // "-": matches every value, null included
	negate bool // not(...)
	tests  []unaryTest
	expr   node // the boolean expression over "?", when the source has one
	opts   Options
}

// questionName is the name "?" is read as: feel reads any name in
// backticks, and no variable of a caller can be named so by accident.
const questionName = "?"

// CompileUnaryTests compiles src (without a leading "="). A refusal carries
// fault.BPMNExpression, as Compile's do.
func CompileUnaryTests(src string) (*UnaryTests, error) {
	return CompileUnaryTestsWith(src, Options{})
}

// CompileUnaryTestsWith is CompileUnaryTests in the dialect opts selects.
func CompileUnaryTestsWith(src string, opts Options) (*UnaryTests, error) {
	body := strings.TrimSpace(src)
	if body == "-" || body == "" {
		return &UnaryTests{src: src, any: true, opts: opts}, nil
	}
	u := &UnaryTests{src: src, opts: opts}
	if quoted, ok := quoteQuestion(body); ok {
		_, root, err := parse("="+quoted, opts)
		if err != nil {
			return nil, err
		}
		u.expr = root
		return u, nil
	}
	full := "=" + body
	toks, err := lex(full)
	if err != nil {
		return nil, err
	}
	p := &parser{src: full, toks: toks, noFilterAt: -1, opts: opts}
	// not(...) negates the whole list only when its parenthesis closes at
	// the end; "not(a) or b" is an expression like any other.
	if t := p.peek(); isWord(t) && t.text == "not" && p.toks[1].kind == tLParen && closesAtEnd(toks, 1) {
		u.negate = true
		p.i = 2
		end := len(toks) - 2 // the closing parenthesis
		p.toks = append(toks[:end:end], token{kind: tEOF, pos: toks[end].pos})
	}
	for {
		t, err := p.parseTest()
		if err != nil {
			return nil, err
		}
		u.tests = append(u.tests, t)
		if p.peek().kind != tComma {
			break
		}
		p.next()
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, p.unexpected(t)
	}
	return u, nil
}

// quoteQuestion puts every "?" of src outside strings and backticks in
// backticks, reporting whether there was one.
func quoteQuestion(src string) (string, bool) {
	var b strings.Builder
	found := false
	for i := 0; i < len(src); i++ {
		switch c := src[i]; c {
		case '"', '`':
			j := i + 1
			for j < len(src) && src[j] != c {
				if c == '"' && src[j] == '\\' {
					j++
				}
				j++
			}
			j = min(j, len(src)-1)
			b.WriteString(src[i : j+1])
			i = j
		case '?':
			b.WriteString("`" + questionName + "`")
			found = true
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), found
}

// closesAtEnd reports whether the parenthesis opened at toks[open] closes
// at the last token before EOF.
func closesAtEnd(toks []token, open int) bool {
	depth := 0
	for i := open; i < len(toks); i++ {
		switch toks[i].kind {
		case tLParen:
			depth++
		case tRParen:
			depth--
			if depth == 0 {
				return i == len(toks)-2
			}
		}
	}
	return false
}

// Source returns the text CompileUnaryTests was given.
func (u *UnaryTests) Source() string { return u.src }

// Test reports whether x passes the tests, with vars in scope for the
// tests' own expressions, in env (its limits and deadline bound the work;
// exceeding one is a *LimitError). A test that cannot compare x (a number
// against a string, null against < 5) does not match rather than fail, as
// DMN asks of an input entry.
func (u *UnaryTests) Test(x any, vars map[string]any, env Env) (ok bool, err error) {
	if u.any {
		return !u.negate, nil
	}
	defer func() {
		if r := recover(); r != nil {
			ok, err = false, fmt.Errorf("feel: testing %s: internal error: %v", quoteSource(u.src), r)
		}
	}()
	c := newEvalCtx(vars, env)
	c.nulls = u.opts.Nulls
	if u.expr != nil {
		v, err := u.expr.eval(c, &scope{name: questionName, val: x})
		if err != nil && c.fatal(err) {
			return false, fmt.Errorf("feel: testing %s: %w", quoteSource(u.src), err)
		}
		return v == true, nil
	}
	for _, t := range u.tests {
		m, err := t.test(c, nil, x)
		if err != nil {
			// Only a value the test cannot compare is a miss; work cut
			// off by a limit or a cancelled context is an error.
			if c.fatal(err) {
				return false, fmt.Errorf("feel: testing %s: %w", quoteSource(u.src), err)
			}
			continue
		}
		if m {
			return !u.negate, nil
		}
	}
	return u.negate, nil
}

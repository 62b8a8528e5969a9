package feel

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/sutra-run/worker/fault"
)

// rangeVal is a range as a value (DMN 1.4): [1..5], (a..b], (< 5), and
// what range("...") reads. A nil end is unbounded (range("< 5")). op is
// the comparison a range was written as ("" for an interval): DMN makes
// (= 10) and [10..10] unequal. (!= v) is every value but v (lo and hi).
type rangeVal struct {
	lo, hi         any
	openLo, openHi bool
	op             string
}

// rangeLit is an interval written where a value goes: x in r, r.start.
type rangeLit struct{ t unaryTest }

func (rangeLit) prec() int { return precPrimary }

func (n rangeLit) feel(b *strings.Builder) { n.t.feel(b) }

func (n rangeLit) eval(c *evalCtx, s *scope) (any, error) { return c.orNull(n.value(c, s)) }

func (n rangeLit) value(c *evalCtx, s *scope) (any, error) {
	if err := c.spend(1); err != nil {
		return nil, err
	}
	lo, err := n.t.a.eval(c, s)
	if err != nil {
		return nil, err
	}
	hi, err := n.t.b.eval(c, s)
	if err != nil {
		return nil, err
	}
	return newRange(c, lo, hi, n.t.openLo, n.t.openHi)
}

// cmpRange is a unary comparison as a range: (< 5), range(">= 3").
type cmpRange struct {
	op string
	x  node
}

func (cmpRange) prec() int { return precPrimary }

func (n cmpRange) feel(b *strings.Builder) {
	b.WriteString("(" + n.op + " ")
	n.x.feel(b)
	b.WriteString(")")
}

func (n cmpRange) eval(c *evalCtx, s *scope) (any, error) {
	if err := c.spend(1); err != nil {
		return nil, err
	}
	v, err := n.x.eval(c, s)
	if err != nil {
		return nil, err
	}
	return c.orNull(comparisonRange(c, n.op, v))
}

// comparisonRange is the range of the values that compare with v by op.
func comparisonRange(c *evalCtx, op string, v any) (any, error) {
	if v == nil {
		return nil, fmt.Errorf("(%s null) is not a range", op)
	}
	var r any
	var err error
	switch op {
	case "<", "<=":
		r, err = newRange(c, nil, v, false, op == "<")
	case ">", ">=":
		r, err = newRange(c, v, nil, op == ">", false)
	default: // = and !=
		r, err = newRange(c, v, v, false, false)
	}
	if err != nil {
		return nil, err
	}
	rv := r.(rangeVal)
	rv.op = op
	return rv, nil
}

// newRange checks that the ends can be ordered, against each other when
// both are given.
func newRange(c *evalCtx, lo, hi any, openLo, openHi bool) (any, error) {
	for _, end := range []any{lo, hi} {
		if _, num, _ := number(end); end != nil && !num && !isTemporal(end) {
			if _, str := end.(string); !str {
				return nil, fmt.Errorf("a range needs numbers, strings, dates, times or durations, got %s", describe(end))
			}
		}
	}
	if lo != nil && hi != nil {
		cmp, err := compare(c, lo, hi, "..")
		if err != nil {
			return nil, err
		}
		if cmp > 0 {
			return nil, errors.New("a range must not start after its end")
		}
	}
	return rangeVal{lo: lo, hi: hi, openLo: openLo, openHi: openHi}, nil
}

// has reports whether x is in r.
func (r rangeVal) has(c *evalCtx, x any) (bool, error) {
	if r.op == "!=" {
		eq, err := equal(c, x, r.lo)
		return !eq, err
	}
	if r.lo != nil {
		lo, err := compare(c, x, r.lo, "in")
		if err != nil || lo < 0 || lo == 0 && r.openLo {
			return false, err
		}
	}
	if r.hi != nil {
		hi, err := compare(c, x, r.hi, "in")
		if err != nil || hi > 0 || hi == 0 && r.openHi {
			return false, err
		}
	}
	return true, nil
}

// String is the range as FEEL writes it: [1..5], (1..5), or a comparison
// for an unbounded end (< 5).
func (r rangeVal) String() string {
	end := func(v any) string {
		var b strings.Builder
		if f, ok, _ := number(v); ok {
			v = f
		}
		literal{v}.feel(&b)
		return b.String()
	}
	switch {
	case r.op == "=" || r.op == "!=":
		return r.op + " " + end(r.lo)
	case r.lo == nil && r.openHi:
		return "< " + end(r.hi)
	case r.lo == nil:
		return "<= " + end(r.hi)
	case r.hi == nil && r.openLo:
		return "> " + end(r.lo)
	case r.hi == nil:
		return ">= " + end(r.lo)
	}
	open, closing := "[", "]"
	if r.openLo {
		open = "("
	}
	if r.openHi {
		closing = ")"
	}
	return open + end(r.lo) + ".." + end(r.hi) + closing
}

// rangeProperty is r.start, r.end, r.start included, r.end included.
func rangeProperty(r rangeVal, name string) (any, bool) {
	switch name {
	case "start":
		return r.lo, true
	case "end":
		return r.hi, true
	case "start included":
		return r.lo != nil && !r.openLo, true
	case "end included":
		return r.hi != nil && !r.openHi, true
	}
	return nil, false
}

// rangeItems are the whole numbers of a range of whole numbers, for
// "for i in [1..3]".
func rangeItems(c *evalCtx, r rangeVal) ([]any, error) {
	a, aok, _ := number(r.lo)
	z, zok, _ := number(r.hi)
	if r.op == "!=" || !aok || !zok || a != math.Trunc(a) || z != math.Trunc(z) {
		return nil, fmt.Errorf("only a range of whole numbers has items, got %s", r)
	}
	if r.openLo {
		a++
	}
	if r.openHi {
		z--
	}
	if z < a {
		return []any{}, nil
	}
	if math.Abs(a) > maxExact || math.Abs(z) > maxExact {
		return nil, fmt.Errorf("a range needs whole numbers of at most %d in magnitude", int64(maxExact))
	}
	if err := c.items(int(math.Min(z-a+1, float64(c.lim.MaxSteps+1)))); err != nil {
		return nil, err
	}
	out := make([]any, 0, int(z-a)+1)
	for x := a; x <= z; x++ {
		out = append(out, x)
	}
	return out, nil
}

// rangeAhead reports whether the "[", "(" or "]" at p.i opens an interval:
// whether ".." follows at its own nesting level before anything closes it
// or a comma, a for, some or every. It looks no further than the opener's extent, so parsing
// stays linear in the nesting depth.
func (p *parser) rangeAhead() bool {
	depth := 0
	for j := p.i + 1; j < len(p.toks); j++ {
		switch p.toks[j].kind {
		case tLParen, tLBrack, tLBrace:
			depth++
		case tRParen, tRBrack, tRBrace:
			if depth == 0 {
				return false
			}
			depth--
		case tComma:
			if depth == 0 {
				return false
			}
		case tRange:
			if depth == 0 {
				return true
			}
		case tName:
			// for, some and every have ranges of their own (i in 1..3).
			if t := p.toks[j]; depth == 0 && isWord(t) && (t.text == "for" || t.text == "some" || t.text == "every") {
				return false
			}
		case tEOF:
			return false
		}
	}
	return false
}

// parseRange parses the interval whose opener is next as a range value.
func (p *parser) parseRange() (node, error) {
	at := p.peek()
	t, ok, err := p.tryInterval()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, refuse(p.src, at.pos, "expected a range")
	}
	return p.add(rangeLit{t}, at)
}

// maxRangeText bounds the text range() parses.
const maxRangeText = 1024

func init() {
	def("range", sig("from"), func(c *evalCtx, a args) (any, error) {
		src, err := a.str(0)
		if err != nil {
			return nil, err
		}
		if len(src) > maxRangeText {
			// Parsing builds tokens and nodes the budget does not count:
			// a range's text is short.
			return nil, fmt.Errorf("the range text is %d bytes, over %d", len(src), maxRangeText)
		}
		if err := c.scan(len(src)); err != nil {
			return nil, err
		}
		return parseRangeString(c, src)
	})
}

// parseRangeString reads range()'s argument: an interval ([1..5], (a..b])
// or a comparison (< 5, >= @"2024-01-01", = 3) whose ends are literals.
func parseRangeString(c *evalCtx, src string) (any, error) {
	r, err := readRange(c, src)
	if fault.Code(err) != "" {
		// The parser's refusal, at run time: the engine assigns the code.
		return nil, fmt.Errorf("%q is not a range: %s", src, fault.Reason(err))
	}
	return r, err
}

func readRange(c *evalCtx, src string) (any, error) {
	full := "=" + strings.TrimSpace(src)
	toks, err := lex(full)
	if err != nil {
		return nil, err
	}
	p := &parser{src: full, toks: toks, noFilterAt: -1}
	if p.peek().kind == tEOF {
		return nil, fmt.Errorf("%q is empty", src)
	}
	t, err := p.parseTest()
	if err == nil && p.peek().kind != tEOF {
		err = p.unexpected(p.peek())
	}
	if err != nil {
		return nil, err
	}
	end := func(n node) (any, error) {
		l, ok := n.(literal)
		if !ok || l.val == nil {
			return nil, fmt.Errorf("the ends of %q must be literals other than null", src)
		}
		return l.val, nil
	}
	if t.kind != testInterval && t.kind != testCompare {
		return nil, fmt.Errorf("%q is not a range", src)
	}
	lo, err := end(t.a)
	if err != nil {
		return nil, err
	}
	switch t.kind {
	case testInterval:
		hi, err := end(t.b)
		if err != nil {
			return nil, err
		}
		return newRange(c, lo, hi, t.openLo, t.openHi)
	case testCompare:
		if op := t.op.feel; op != "!=" {
			return comparisonRange(c, op, lo)
		}
	}
	return nil, fmt.Errorf("%q is not a range", src)
}

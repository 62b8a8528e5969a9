package feel

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Precedence, loosest first. Printing uses it to add only the parentheses
// the parser needs, so that parse(print(n)) rebuilds n exactly.
const (
	precIf = 1 + iota // if, for, some, every: their last part extends to the end
	precOr
	precAnd
	precCmp
	precAdd
	precMul
	precPow
	precNeg
	precPrimary
)

// node is one parsed FEEL expression. It prints itself as canonical FEEL
// (String, fuzzing) and evaluates itself with FEEL's semantics. A node is
// never modified after parsing, so a compiled expression can be shared.
type node interface {
	prec() int
	feel(b *strings.Builder)
	eval(c *evalCtx, s *scope) (any, error)
}

type (
	// literal is nil, bool, float64, string or a temporal value (from @"..."
	// or a conversion function applied to a string literal).
	literal struct{ val any }
	name    struct{ name string }
	path    struct {
		base  node
		field string
	}
	neg    struct{ x node }
	not    struct{ x node }
	binary struct {
		op   *binOp
		l, r node
	}
	ifElse struct{ cond, then, els node }
	// iterator is "name in from" or "name in from..to" of for/some/every.
	iterator struct {
		name     string
		from, to node
	}
	forLoop struct {
		iters []iterator
		body  node
	}
	quantified struct {
		every bool
		iters []iterator
		cond  node
	}
	listLit struct{ items []node }
	ctxLit  struct {
		keys []string
		vals []node
	}
	filter struct {
		base, cond node
		index      bool // cond is a number literal: an index without evaluating per item
	}
	betweenTest struct{ x, lo, hi node }
	inTest      struct {
		x     node
		tests []unaryTest
	}
	instanceOf struct {
		x   node
		typ *feelType
	}
	call struct {
		fn   *builtin
		args []node
		re   *regexp.Regexp // the pattern, when it is a literal compiled at deploy time
	}
	isDefined struct{ x node }
	// sortBy is sort(list, function(a, b) body), or under Options.Nulls
	// sort(list, fn) with fn any expression giving a function value.
	sortBy struct {
		list node
		a, b string
		body node
		fn   node
	}
)

type unaryTestKind int

const (
	testEqual     unaryTestKind = iota // an expression: equal to it, or contained in it when it is a list
	testCompare                        // < e, <= e, > e, >= e
	testInterval                       // [a..b], (a..b), ]a..b[ and mixtures
	testIntervals                      // [[a..b], [c..d]]: in any of the intervals
)

type unaryTest struct {
	kind           unaryTestKind
	op             *binOp // testCompare
	a, b           node   // b: upper bound of an interval
	openLo, openHi bool
	any            []unaryTest // testIntervals
}

type binOp struct {
	feel string
	prec int
}

var binOps = map[string]*binOp{
	"or":  {"or", precOr},
	"and": {"and", precAnd},
	"=":   {"=", precCmp},
	"!=":  {"!=", precCmp},
	"<":   {"<", precCmp},
	"<=":  {"<=", precCmp},
	">":   {">", precCmp},
	">=":  {">=", precCmp},
	"+":   {"+", precAdd},
	"-":   {"-", precAdd},
	"*":   {"*", precMul},
	"/":   {"/", precMul},
	"**":  {"**", precPow},
}

func (literal) prec() int     { return precPrimary }
func (name) prec() int        { return precPrimary }
func (path) prec() int        { return precPrimary }
func (neg) prec() int         { return precNeg }
func (not) prec() int         { return precPrimary }
func (n binary) prec() int    { return n.op.prec }
func (ifElse) prec() int      { return precIf }
func (forLoop) prec() int     { return precIf }
func (quantified) prec() int  { return precIf }
func (listLit) prec() int     { return precPrimary }
func (ctxLit) prec() int      { return precPrimary }
func (filter) prec() int      { return precPrimary }
func (betweenTest) prec() int { return precCmp }
func (inTest) prec() int      { return precCmp }
func (instanceOf) prec() int  { return precCmp }
func (call) prec() int        { return precPrimary }
func (isDefined) prec() int   { return precPrimary }
func (sortBy) prec() int      { return precPrimary }

// ---- printing ----

func (n literal) feel(b *strings.Builder) {
	switch v := n.val.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case float64:
		// 'f' because FEEL has no exponent syntax; -1 is the shortest text
		// that parses back to the same float64.
		b.WriteString(strconv.FormatFloat(v, 'f', -1, 64))
	case string:
		quoteFEEL(b, v)
	default:
		// A temporal value prints as the conversion that rebuilds it.
		switch v.(type) {
		case date:
			b.WriteString("date(")
		case timeOfDay:
			b.WriteString("time(")
		case dateTime:
			b.WriteString("date and time(")
		default:
			b.WriteString("duration(")
		}
		quoteFEEL(b, v.(fmt.Stringer).String())
		b.WriteString(")")
	}
}

func (n name) feel(b *strings.Builder) { writeName(b, n.name) }

func (n path) feel(b *strings.Builder) {
	operand(b, n.base, n.base.prec() < precPrimary)
	b.WriteString(".")
	if n.field == "time offset" {
		b.WriteString(n.field) // the property, which the parser reads as one field
		return
	}
	writeName(b, n.field)
}

// writeName writes a variable or field name bare when it reads back as
// that name, otherwise in backticks (`steady-state`, `if`).
func writeName(b *strings.Builder, s string) {
	if isName(s) {
		b.WriteString(s)
		return
	}
	b.WriteString("`" + s + "`")
}

// feel writes "- -a" rather than "-(-a)": parentheses would add a level
// of nesting per negation, and a canonical form must not hit maxDepth when
// its source did not.
func (n neg) feel(b *strings.Builder) {
	if _, ok := n.x.(neg); ok {
		b.WriteString("- ")
		n.x.feel(b)
		return
	}
	b.WriteString("-")
	operand(b, n.x, n.x.prec() < precPrimary)
}

func (n not) feel(b *strings.Builder) {
	b.WriteString("not(")
	n.x.feel(b)
	b.WriteString(")")
}

func (n binary) feel(b *strings.Builder) {
	p := n.op.prec
	// Comparisons do not chain, so a comparison operand of a comparison
	// needs parentheses on either side; everything else is left-associative.
	l := text(n.l, n.l.prec() < p || p == precCmp && n.l.prec() == precCmp)
	r := text(n.r, n.r.prec() <= p)
	if n.op.feel == "and" && glued(l, r) {
		l = "(" + l + ")"
	}
	b.WriteString(l + " " + n.op.feel + " " + r)
}

// text prints n, in parentheses if parens.
func text(n node, parens bool) string {
	var b strings.Builder
	operand(&b, n, parens)
	return b.String()
}

// glued reports whether l + " and " + r would read back as one name with
// spaces: the function or type "date and time", or the function "years and
// months duration". Parentheses around l keep the words apart.
func glued(l, r string) bool {
	word := func(s string, i int) bool {
		return i < 0 || i >= len(s) || !(s[i] == '_' || isDigit(s[i]) || s[i] >= 'A' && s[i] <= 'Z' || s[i] >= 'a' && s[i] <= 'z' || s[i] >= 0x80)
	}
	ends := func(w string) bool { return strings.HasSuffix(l, w) && word(l, len(l)-len(w)-1) }
	starts := func(w string) bool { return strings.HasPrefix(r, w) && word(r, len(w)) }
	return ends("date") && starts("time") || ends("years") && starts("months")
}

func (n ifElse) feel(b *strings.Builder) {
	b.WriteString("if ")
	n.cond.feel(b)
	b.WriteString(" then ")
	n.then.feel(b)
	b.WriteString(" else ")
	n.els.feel(b)
}

func writeIters(b *strings.Builder, iters []iterator) {
	for i, it := range iters {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(it.name)
		b.WriteString(" in ")
		operand(b, it.from, it.from.prec() < precAdd)
		if it.to != nil {
			b.WriteString("..")
			operand(b, it.to, it.to.prec() < precAdd)
		}
	}
}

func (n forLoop) feel(b *strings.Builder) {
	b.WriteString("for ")
	writeIters(b, n.iters)
	b.WriteString(" return ")
	n.body.feel(b)
}

func (n quantified) feel(b *strings.Builder) {
	if n.every {
		b.WriteString("every ")
	} else {
		b.WriteString("some ")
	}
	writeIters(b, n.iters)
	b.WriteString(" satisfies ")
	n.cond.feel(b)
}

func writeList(b *strings.Builder, items []node) {
	for i, it := range items {
		if i > 0 {
			b.WriteString(", ")
		}
		it.feel(b)
	}
}

func (n listLit) feel(b *strings.Builder) {
	b.WriteString("[")
	writeList(b, n.items)
	b.WriteString("]")
}

func (n ctxLit) feel(b *strings.Builder) {
	b.WriteString("{")
	for i, k := range n.keys {
		if i > 0 {
			b.WriteString(", ")
		}
		if isName(k) {
			b.WriteString(k)
		} else {
			quoteFEEL(b, k)
		}
		b.WriteString(": ")
		n.vals[i].feel(b)
	}
	b.WriteString("}")
}

func (n filter) feel(b *strings.Builder) {
	operand(b, n.base, n.base.prec() < precPrimary)
	b.WriteString("[")
	n.cond.feel(b)
	b.WriteString("]")
}

func (n betweenTest) feel(b *strings.Builder) {
	operand(b, n.x, n.x.prec() < precAdd)
	b.WriteString(" between ")
	lo, hi := text(n.lo, n.lo.prec() < precAdd), text(n.hi, n.hi.prec() < precAdd)
	if glued(lo, hi) {
		lo = "(" + lo + ")"
	}
	b.WriteString(lo + " and " + hi)
}

func (n inTest) feel(b *strings.Builder) {
	operand(b, n.x, n.x.prec() < precAdd)
	b.WriteString(" in ")
	var one strings.Builder
	if len(n.tests) == 1 {
		n.tests[0].feel(&one)
		// A lone test is written bare unless it would read as a list of
		// tests: "x in (a or b) + 1" must become "x in ((a or b) + 1)".
		if !strings.HasPrefix(one.String(), "(") || n.tests[0].kind == testInterval {
			b.WriteString(one.String())
			return
		}
	}
	b.WriteString("(")
	for i, t := range n.tests {
		if i > 0 {
			b.WriteString(", ")
		}
		t.feel(b)
	}
	b.WriteString(")")
}

func (t unaryTest) feel(b *strings.Builder) {
	switch t.kind {
	case testEqual:
		operand(b, t.a, t.a.prec() < precAdd)
	case testCompare:
		b.WriteString(t.op.feel)
		b.WriteString(" ")
		operand(b, t.a, t.a.prec() < precAdd)
	case testIntervals:
		b.WriteString("[")
		for i, it := range t.any {
			if i > 0 {
				b.WriteString(", ")
			}
			it.feel(b)
		}
		b.WriteString("]")
	case testInterval:
		// Open ends print as ( and ), never as ] and [.
		if t.openLo {
			b.WriteString("(")
		} else {
			b.WriteString("[")
		}
		operand(b, t.a, t.a.prec() < precAdd)
		b.WriteString("..")
		operand(b, t.b, t.b.prec() < precAdd)
		if t.openHi {
			b.WriteString(")")
		} else {
			b.WriteString("]")
		}
	}
}

func (n instanceOf) feel(b *strings.Builder) {
	operand(b, n.x, n.x.prec() < precAdd)
	b.WriteString(" instance of ")
	n.typ.write(b)
}

func (n call) feel(b *strings.Builder) {
	b.WriteString(n.fn.name)
	b.WriteString("(")
	writeList(b, n.args)
	b.WriteString(")")
}

func (n isDefined) feel(b *strings.Builder) {
	b.WriteString("is defined(")
	n.x.feel(b)
	b.WriteString(")")
}

func (n sortBy) feel(b *strings.Builder) {
	b.WriteString("sort(")
	n.list.feel(b)
	if n.fn != nil {
		b.WriteString(", ")
		n.fn.feel(b)
	} else {
		b.WriteString(", function(" + n.a + ", " + n.b + ") ")
		n.body.feel(b)
	}
	b.WriteString(")")
}

func operand(b *strings.Builder, n node, parens bool) {
	if parens {
		b.WriteString("(")
	}
	n.feel(b)
	if parens {
		b.WriteString(")")
	}
}

// quoteFEEL writes s as a FEEL string literal using only the escapes lex
// accepts, so that the literal reads back as s.
func quoteFEEL(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if r < 0x20 || r == 0x7f {
				b.WriteString(`\u`)
				h := strconv.FormatInt(int64(r), 16)
				b.WriteString(strings.Repeat("0", 4-len(h)))
				b.WriteString(h)
				continue
			}
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

// ---- evaluation ----

func (n literal) eval(*evalCtx, *scope) (any, error) { return n.val, nil }

func (n name) eval(c *evalCtx, s *scope) (any, error) {
	v, _ := lookup(c, s, n.name)
	return v, nil
}

// Every node but a literal or a name charges a step when evaluated, so a
// loop's body costs what it evaluates (limits.go).

// The nodes that can fail on the values they meet compute their value in
// value; eval makes a failure null under Options.Nulls.
func (n path) eval(c *evalCtx, s *scope) (any, error)        { return c.orNull(n.value(c, s)) }
func (n neg) eval(c *evalCtx, s *scope) (any, error)         { return c.orNull(n.value(c, s)) }
func (n not) eval(c *evalCtx, s *scope) (any, error)         { return c.orNull(n.value(c, s)) }
func (n binary) eval(c *evalCtx, s *scope) (any, error)      { return c.orNull(n.value(c, s)) }
func (n filter) eval(c *evalCtx, s *scope) (any, error)      { return c.orNull(n.value(c, s)) }
func (n betweenTest) eval(c *evalCtx, s *scope) (any, error) { return c.orNull(n.value(c, s)) }
func (n inTest) eval(c *evalCtx, s *scope) (any, error)      { return c.orNull(n.value(c, s)) }
func (n instanceOf) eval(c *evalCtx, s *scope) (any, error)  { return c.orNull(n.value(c, s)) }
func (n call) eval(c *evalCtx, s *scope) (any, error)        { return c.orNull(n.value(c, s)) }
func (n forLoop) eval(c *evalCtx, s *scope) (any, error)     { return c.orNull(n.value(c, s)) }
func (n quantified) eval(c *evalCtx, s *scope) (any, error)  { return c.orNull(n.value(c, s)) }
func (n sortBy) eval(c *evalCtx, s *scope) (any, error)      { return c.orNull(n.value(c, s)) }

func (n path) value(c *evalCtx, s *scope) (any, error) {
	if err := c.spend(1); err != nil {
		return nil, err
	}
	v, err := n.base.eval(c, s)
	if err != nil {
		return nil, err
	}
	return get(c, v, n.field)
}

func (n neg) value(c *evalCtx, s *scope) (any, error) {
	if err := c.spend(1); err != nil {
		return nil, err
	}
	v, err := n.x.eval(c, s)
	if err != nil {
		return nil, err
	}
	switch d := v.(type) {
	case ymDuration:
		if d != math.MinInt64 {
			return -d, nil
		}
	case dtDuration:
		if d != math.MinInt64 {
			return -d, nil
		}
	}
	x, ok, err := number(v)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("cannot negate %s", describe(v))
	}
	return noNegZero(-x), nil
}

func (n not) value(c *evalCtx, s *scope) (any, error) {
	if err := c.spend(1); err != nil {
		return nil, err
	}
	v, err := n.x.eval(c, s)
	if err != nil {
		return nil, err
	}
	x, err := boolean(v, "not")
	return !x, err
}

func (n binary) value(c *evalCtx, s *scope) (any, error) {
	if err := c.spend(1); err != nil {
		return nil, err
	}
	l, err := n.l.eval(c, s)
	if err != nil {
		return nil, err
	}
	if op := n.op.feel; (op == "and" || op == "or") && c.nulls {
		return c.ternary(l, n.r, s, op == "or")
	} else if op == "and" || op == "or" {
		// Strictly boolean, left to right, stopping once the result is known.
		x, err := boolean(l, op)
		if err != nil || x == (op == "or") {
			return x, err
		}
		r, err := n.r.eval(c, s)
		if err != nil {
			return nil, err
		}
		return boolean(r, op)
	}
	r, err := n.r.eval(c, s)
	if err != nil {
		return nil, err
	}
	switch op := n.op.feel; op {
	case "=", "!=":
		if c.nulls && l != nil && r != nil {
			// DMN: values of different types are not comparable, so
			// neither equal nor unequal.
			if kl, err := kindOf(l); err == nil {
				if kr, err := kindOf(r); err == nil && kl != kr {
					return nil, nil
				}
			}
		}
		eq, err := equal(c, l, r)
		if op == "!=" {
			eq = !eq
		}
		return eq, err
	case "<":
		cmp, err := compare(c, l, r, op)
		return cmp < 0, err
	case "<=":
		cmp, err := compare(c, l, r, op)
		return cmp <= 0, err
	case ">":
		cmp, err := compare(c, l, r, op)
		return cmp > 0, err
	case ">=":
		cmp, err := compare(c, l, r, op)
		return cmp >= 0, err
	default:
		return arithmetic(c, l, r, op)
	}
}

// ternary is DMN's three-valued and/or (Options.Nulls), l being the left
// operand's value: the result is known once one side is false (and) or
// true (or); otherwise two booleans give a boolean and anything else null.
func (c *evalCtx) ternary(l any, right node, s *scope, or bool) (any, error) {
	if l == or {
		return or, nil
	}
	r, err := right.eval(c, s)
	if err != nil {
		return nil, err
	}
	if r == or {
		return or, nil
	}
	if _, ok := l.(bool); ok && r == !or {
		return !or, nil
	}
	return nil, nil
}

// eval takes the else branch unless the condition is true: feel-scala's
// rule, under which a null or non-boolean condition is not an error.
func (n ifElse) eval(c *evalCtx, s *scope) (any, error) {
	if err := c.spend(1); err != nil {
		return nil, err
	}
	v, err := n.cond.eval(c, s)
	if err != nil {
		return nil, err
	}
	if v == true {
		return n.then.eval(c, s)
	}
	return n.els.eval(c, s)
}

// domain evaluates an iterator's list, or its range of whole numbers.
// dateRange is the days from a to z, either way, both included (DMN 1.4:
// for d in @"2024-01-01"..@"2024-01-03").
func dateRange(c *evalCtx, a, z date) ([]any, error) {
	// Dates are midnight UTC, so whole days apart; Unix seconds do not
	// saturate as time.Time.Sub does beyond 292 years.
	days := (z.t.Unix() - a.t.Unix()) / 86400
	step := int64(1)
	if days < 0 {
		days, step = -days, -1
	}
	if err := c.items(int(min(days+1, int64(c.lim.MaxSteps)+1))); err != nil {
		return nil, err
	}
	r := make([]any, 0, days+1)
	for d := a.t; ; d = d.AddDate(0, 0, int(step)) {
		r = append(r, date{d})
		if d.Equal(z.t) {
			return r, nil
		}
	}
}

func (it iterator) domain(c *evalCtx, s *scope) ([]any, error) {
	from, err := it.from.eval(c, s)
	if err != nil {
		return nil, err
	}
	if r, ok := from.(rangeVal); ok && it.to == nil {
		return rangeItems(c, r)
	}
	if it.to == nil {
		l, ok := from.([]any)
		if !ok {
			return nil, fmt.Errorf("\"%s in\" needs a list, got %s", it.name, describe(from))
		}
		return l, nil
	}
	to, err := it.to.eval(c, s)
	if err != nil {
		return nil, err
	}
	if d0, ok := from.(date); ok {
		if d1, ok := to.(date); ok {
			return dateRange(c, d0, d1)
		}
	}
	a, aok, err := number(from)
	if err != nil {
		return nil, err
	}
	z, zok, err := number(to)
	if err != nil {
		return nil, err
	}
	if !aok || !zok {
		return nil, fmt.Errorf("a range needs two numbers, got %s and %s", describe(from), describe(to))
	}
	// Beyond 2^53, x += 1 would stop changing x and never reach z.
	if a != math.Trunc(a) || z != math.Trunc(z) || math.Abs(a) > maxExact || math.Abs(z) > maxExact {
		return nil, fmt.Errorf("a range needs whole numbers of at most %d in magnitude, got %s..%s", int64(maxExact),
			strconv.FormatFloat(a, 'f', -1, 64), strconv.FormatFloat(z, 'f', -1, 64))
	}
	if err := c.items(int(math.Min(math.Abs(z-a)+1, float64(c.lim.MaxSteps+1)))); err != nil {
		return nil, err
	}
	step := 1.0
	if z < a {
		step = -1
	}
	r := make([]any, 0, int(math.Abs(z-a))+1)
	for x := a; ; x += step {
		r = append(r, noNegZero(x))
		if x == z {
			return r, nil
		}
	}
}

// each calls f with the scope of every combination of the iterators'
// items, the first iterator outermost. A later domain may use the earlier
// names (for x in xs, y in x.items).
func each(c *evalCtx, s *scope, iters []iterator, f func(*scope) (bool, error)) (bool, error) {
	if len(iters) == 0 {
		return f(s)
	}
	items, err := iters[0].domain(c, s)
	if err != nil {
		return false, err
	}
	for _, item := range items {
		if err := c.spend(1); err != nil {
			return false, err
		}
		more, err := each(c, &scope{up: s, name: iters[0].name, val: item}, iters[1:], f)
		if err != nil || !more {
			return more, err
		}
	}
	return true, nil
}

func (n forLoop) value(c *evalCtx, s *scope) (any, error) {
	if err := c.spend(1); err != nil {
		return nil, err
	}
	r := []any{}
	_, err := each(c, s, n.iters, func(s *scope) (bool, error) {
		// partial is the results so far (feel-scala); the slice is never
		// written below len(r), so handing it out is safe.
		v, err := n.body.eval(c, &scope{up: s, name: "partial", val: r[:len(r):len(r)]})
		if err != nil {
			return false, err
		}
		r = append(r, v)
		return true, c.alloc(itemBytes)
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// eval is strict like and/or: the condition must be boolean for every item
// visited; some stops at the first true, every at the first false.
func (n quantified) value(c *evalCtx, s *scope) (any, error) {
	if err := c.spend(1); err != nil {
		return nil, err
	}
	word := "some"
	if n.every {
		word = "every"
	}
	result := n.every
	_, err := each(c, s, n.iters, func(s *scope) (bool, error) {
		v, err := n.cond.eval(c, s)
		if err != nil {
			return false, err
		}
		b, ok := v.(bool)
		if !ok {
			return false, fmt.Errorf("%s ... satisfies needs a boolean, got %s", word, describe(v))
		}
		if b != n.every {
			result = b
			return false, nil
		}
		return true, nil
	})
	return result, err
}

func (n listLit) eval(c *evalCtx, s *scope) (any, error) {
	if err := c.items(1 + len(n.items)); err != nil {
		return nil, err
	}
	r := make([]any, len(n.items))
	for i, item := range n.items {
		var err error
		if r[i], err = item.eval(c, s); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// eval puts each entry in scope for the entries after it, as in FEEL:
// {a: 1, b: a + 1} is {a: 1, b: 2}.
func (n ctxLit) eval(c *evalCtx, s *scope) (any, error) {
	m := make(map[string]any, len(n.keys))
	inner := &scope{up: s, entries: m}
	for i, k := range n.keys {
		if err := c.entry(k); err != nil {
			return nil, err
		}
		v, err := n.vals[i].eval(c, inner)
		if err != nil {
			return nil, err
		}
		m[k] = v
	}
	return m, nil
}

// eval follows feel-scala: a number literal is an index; otherwise the
// condition is evaluated for each item (as "item", and a context item's
// entries as names), and if it gives a number for the first item, that
// number is the index. Items whose condition is not true are left out.
func (n filter) value(c *evalCtx, s *scope) (any, error) {
	if err := c.spend(1); err != nil {
		return nil, err
	}
	v, err := n.base.eval(c, s)
	if err != nil || v == nil {
		return nil, err
	}
	items, ok := v.([]any)
	if !ok && c.nulls {
		// DMN reads a single value as a list of that value.
		items, ok = []any{v}, true
	}
	if !ok {
		return nil, fmt.Errorf("cannot filter %s; only a list has items", describe(v))
	}
	if n.index {
		i, err := n.cond.eval(c, s)
		if err != nil {
			return nil, err
		}
		return index(items, i)
	}
	if len(items) == 0 {
		return []any{}, nil
	}
	if err := c.items(len(items)); err != nil {
		return nil, err
	}
	r := []any{}
	for k, item := range items {
		is := &scope{up: s, name: "item", val: item}
		if m, ok := item.(map[string]any); ok {
			is.entries = m
		}
		keep, err := n.cond.eval(c, is)
		if err != nil {
			return nil, err
		}
		if _, isNum, _ := number(keep); isNum && k == 0 {
			return index(items, keep)
		}
		if keep == true {
			r = append(r, item)
		}
	}
	return r, nil
}

// index is FEEL's 1-based list index: -1 is the last item, and an index out
// of range is null.
func index(items []any, i any) (any, error) {
	f, ok, err := number(i)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("a list index must be a number, got %s", describe(i))
	}
	if f != math.Trunc(f) {
		return nil, fmt.Errorf("a list index must be a whole number, got %s", strconv.FormatFloat(f, 'f', -1, 64))
	}
	if f < 0 {
		f += float64(len(items))
	} else {
		f--
	}
	if f < 0 || f >= float64(len(items)) {
		return nil, nil
	}
	return items[int(f)], nil
}

func (n betweenTest) value(c *evalCtx, s *scope) (any, error) {
	if err := c.spend(1); err != nil {
		return nil, err
	}
	x, err := n.x.eval(c, s)
	if err != nil {
		return nil, err
	}
	lo, err := n.lo.eval(c, s)
	if err != nil {
		return nil, err
	}
	hi, err := n.hi.eval(c, s)
	if err != nil {
		return nil, err
	}
	a, err := compare(c, x, lo, "between")
	if err != nil {
		return nil, err
	}
	z, err := compare(c, x, hi, "between")
	return a >= 0 && z <= 0, err
}

// eval is true when any test is; tests are tried left to right.
func (n inTest) value(c *evalCtx, s *scope) (any, error) {
	if err := c.spend(1); err != nil {
		return nil, err
	}
	x, err := n.x.eval(c, s)
	if err != nil {
		return nil, err
	}
	for _, t := range n.tests {
		ok, err := t.test(c, s, x)
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

func (t unaryTest) test(c *evalCtx, s *scope, x any) (bool, error) {
	if t.kind == testIntervals {
		for _, it := range t.any {
			if ok, err := it.test(c, s, x); err != nil || ok {
				return ok, err
			}
		}
		return false, nil
	}
	a, err := t.a.eval(c, s)
	if err != nil {
		return false, err
	}
	switch t.kind {
	case testEqual:
		if l, ok := a.([]any); ok {
			return contains(c, l, x)
		}
		if r, ok := a.(rangeVal); ok {
			return r.has(c, x)
		}
		return equal(c, x, a)
	case testCompare:
		switch t.op.feel {
		case "=":
			return equal(c, x, a)
		case "!=":
			eq, err := equal(c, x, a)
			return !eq, err
		}
		cmp, err := compare(c, x, a, t.op.feel)
		switch t.op.feel {
		case "<":
			return cmp < 0, err
		case "<=":
			return cmp <= 0, err
		case ">":
			return cmp > 0, err
		}
		return cmp >= 0, err
	}
	z, err := t.b.eval(c, s)
	if err != nil {
		return false, err
	}
	lo, err := compare(c, x, a, "in")
	if err != nil {
		return false, err
	}
	hi, err := compare(c, x, z, "in")
	if err != nil {
		return false, err
	}
	return (lo > 0 || lo == 0 && !t.openLo) && (hi < 0 || hi == 0 && !t.openHi), nil
}

func contains(c *evalCtx, l []any, x any) (bool, error) {
	if err := c.spend(len(l)); err != nil {
		return false, err
	}
	for _, item := range l {
		if r, ok := item.(rangeVal); ok {
			// A list of ranges holds the values in any of them.
			if in, err := r.has(c, x); err != nil || in {
				return in, err
			}
			continue
		}
		if eq, err := equal(c, item, x); err != nil || eq {
			return eq, err
		}
	}
	return false, nil
}

// typeNames are the types instance of accepts, by the kind they match.
var typeNames = map[string]kind{
	"boolean": kBool, "number": kNumber, "string": kString, "list": kList, "context": kContext,
	"date": kDate, "time": kTime, "date and time": kDateTime,
	"years and months duration": kYMDuration, "days and time duration": kDTDuration, "range": kRange, "function": kFunction,
}

func (n instanceOf) value(c *evalCtx, s *scope) (any, error) {
	if err := c.spend(1); err != nil {
		return nil, err
	}
	v, err := n.x.eval(c, s)
	if err != nil {
		return nil, err
	}
	return n.typ.has(c, v)
}

func (n call) value(c *evalCtx, s *scope) (any, error) {
	if err := c.items(1 + len(n.args)); err != nil {
		return nil, err
	}
	a := args{f: n.fn, re: n.re, v: make([]any, len(n.args)), nulls: c.nulls}
	for i, arg := range n.args {
		var err error
		if a.v[i], err = arg.eval(c, s); err != nil {
			return nil, err
		}
	}
	if n.fn.variadic {
		// The last parameter takes the remaining arguments as a list, or a
		// single list argument as it is (sum(xs) and sum(1, 2)).
		fixed := len(n.fn.sigs[0]) - 1
		rest := a.v[fixed:]
		if l, ok := rest[0].([]any); ok && len(rest) == 1 && fixed == 0 {
			a.v = []any{l}
		} else {
			a.v = append(a.v[:fixed:fixed], append([]any(nil), rest...))
		}
	}
	v, err := n.fn.fn(c, a)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", n.fn.name, err)
	}
	return v, nil
}

// eval is true when the name, or every step of the path, exists: a variable
// or context entry holding null is defined, a missing one is not.
func (n isDefined) eval(c *evalCtx, s *scope) (any, error) {
	if err := c.spend(1); err != nil {
		return nil, err
	}
	_, ok, err := defined(c, s, n.x)
	return ok, err
}

func defined(c *evalCtx, s *scope, x node) (any, bool, error) {
	switch n := x.(type) {
	case name:
		v, ok := lookup(c, s, n.name)
		return v, ok, nil
	case path:
		v, ok, err := defined(c, s, n.base)
		if err != nil || !ok {
			return nil, false, err
		}
		switch b := v.(type) {
		case map[string]any:
			f, ok := b[n.field]
			return f, ok, nil
		case []any:
			r, err := get(c, b, n.field)
			return r, err == nil, nil
		}
		p, ok := property(v, n.field)
		return p, ok, nil
	}
	v, err := x.eval(c, s)
	return v, err == nil, err
}

func (n sortBy) value(c *evalCtx, s *scope) (any, error) {
	if err := c.spend(1); err != nil {
		return nil, err
	}
	v, err := n.list.eval(c, s)
	if err != nil {
		return nil, err
	}
	l, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("sort: argument \"list\" must be a list, got %s", describe(v))
	}
	if err := c.items(len(l)); err != nil {
		return nil, err
	}
	var fn closure
	if n.fn != nil {
		f, err := n.fn.eval(c, s)
		if err != nil {
			return nil, err
		}
		var ok bool
		if fn, ok = f.(closure); !ok || len(fn.params) != 2 {
			return nil, fmt.Errorf("sort: argument \"precedes\" must be a function of 2 parameters, got %s", describe(f))
		}
	}
	r := make([]any, len(l))
	copy(r, l)
	var failed error
	sort.SliceStable(r, func(i, j int) bool {
		if failed != nil {
			return false
		}
		if failed = c.spend(1); failed != nil {
			return false
		}
		var v any
		var err error
		if n.fn != nil {
			v, err = fn.call(c, []any{r[i], r[j]})
		} else {
			v, err = n.body.eval(c, &scope{up: &scope{up: s, name: n.a, val: r[i]}, name: n.b, val: r[j]})
		}
		if err != nil {
			failed = fmt.Errorf("sort: %w", err)
			return false
		}
		less, ok := v.(bool)
		if !ok {
			failed = fmt.Errorf("sort: the precedes function must return a boolean, got %s", describe(v))
		}
		return less
	})
	if failed != nil {
		return nil, failed
	}
	return r, nil
}

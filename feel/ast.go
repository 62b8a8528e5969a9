package feel

import (
	"strconv"
	"strings"
)

// Precedence, loosest first. Printing uses it to add only the parentheses
// the parser needs, so that parse(print(n)) rebuilds n exactly.
const (
	precOr = 1 + iota
	precAnd
	precCmp
	precAdd
	precMul
	precNeg
	precPrimary
)

// node is one parsed FEEL expression. Each node prints itself twice: as
// canonical FEEL (String, fuzzing) and as expr-lang source. The expr form
// routes every FEEL operator through a helper in eval.go, so FEEL semantics
// (null, number model, type errors) are ours and never expr's defaults.
type node interface {
	prec() int
	feel(b *strings.Builder)
	expr(b *strings.Builder)
}

type (
	literal struct{ val any } // nil, bool, float64 or string
	name    struct{ name string }
	path    struct {
		base  node // a name or a path
		field string
	}
	neg    struct{ x node }
	not    struct{ x node }
	binary struct {
		op   *binOp
		l, r node
	}
)

type binOp struct {
	feel   string
	prec   int
	helper string // the eval.go function; "" for and/or, which expr short-circuits
}

var binOps = map[string]*binOp{
	"or":  {"or", precOr, ""},
	"and": {"and", precAnd, ""},
	"=":   {"=", precCmp, "_eq"},
	"!=":  {"!=", precCmp, "_ne"},
	"<":   {"<", precCmp, "_lt"},
	"<=":  {"<=", precCmp, "_le"},
	">":   {">", precCmp, "_gt"},
	">=":  {">=", precCmp, "_ge"},
	"+":   {"+", precAdd, "_add"},
	"-":   {"-", precAdd, "_sub"},
	"*":   {"*", precMul, "_mul"},
	"/":   {"/", precMul, "_div"},
}

func (literal) prec() int { return precPrimary }
func (name) prec() int    { return precPrimary }
func (path) prec() int    { return precPrimary }
func (neg) prec() int     { return precNeg }
func (not) prec() int     { return precPrimary }
func (n binary) prec() int {
	return n.op.prec
}

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
	}
}

func (n literal) expr(b *strings.Builder) {
	switch v := n.val.(type) {
	case nil:
		b.WriteString("nil")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case float64:
		// The exponent form always contains "e", so expr lexes a float64
		// (never an int, which could overflow or divide as integers).
		b.WriteString(strconv.FormatFloat(v, 'e', -1, 64))
	case string:
		// Valid UTF-8 is guaranteed by the lexer, and expr's unescaping
		// accepts every escape strconv.Quote writes.
		b.WriteString(strconv.Quote(v))
	}
}

func (n name) feel(b *strings.Builder) { b.WriteString(n.name) }

// Variables are read through _get from $env rather than as expr
// identifiers, so a FEEL name can never collide with an expr keyword or
// builtin (nil, len, matches...), and lookups stay reflection-free.
func (n name) expr(b *strings.Builder) {
	b.WriteString("_get($env, ")
	b.WriteString(strconv.Quote(n.name))
	b.WriteString(")")
}

func (n path) feel(b *strings.Builder) {
	n.base.feel(b)
	b.WriteString(".")
	b.WriteString(n.field)
}

func (n path) expr(b *strings.Builder) {
	b.WriteString("_get(")
	n.base.expr(b)
	b.WriteString(", ")
	b.WriteString(strconv.Quote(n.field))
	b.WriteString(")")
}

func (n neg) feel(b *strings.Builder) {
	b.WriteString("-")
	operand(b, n.x, n.x.prec() < precPrimary)
}

func (n neg) expr(b *strings.Builder) {
	b.WriteString("_neg(")
	n.x.expr(b)
	b.WriteString(")")
}

func (n not) feel(b *strings.Builder) {
	b.WriteString("not(")
	n.x.feel(b)
	b.WriteString(")")
}

func (n not) expr(b *strings.Builder) {
	b.WriteString(`(!_bool(`)
	n.x.expr(b)
	b.WriteString(`, "not"))`)
}

func (n binary) feel(b *strings.Builder) {
	p := n.op.prec
	// Comparisons do not chain, so a comparison operand of a comparison
	// needs parentheses on either side; everything else is left-associative.
	operand(b, n.l, n.l.prec() < p || p == precCmp && n.l.prec() == precCmp)
	b.WriteString(" ")
	b.WriteString(n.op.feel)
	b.WriteString(" ")
	operand(b, n.r, n.r.prec() <= p)
}

func (n binary) expr(b *strings.Builder) {
	if n.op.helper == "" {
		// and/or stay expr operators for their short-circuit; _bool makes
		// both operands strictly boolean (expr would pass a non-boolean
		// right operand through as the result).
		b.WriteString("(_bool(")
		n.l.expr(b)
		b.WriteString(`, "` + n.op.feel + `") ` + n.op.feel + ` _bool(`)
		n.r.expr(b)
		b.WriteString(`, "` + n.op.feel + `"))`)
		return
	}
	b.WriteString(n.op.helper)
	b.WriteString("(")
	n.l.expr(b)
	b.WriteString(", ")
	n.r.expr(b)
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

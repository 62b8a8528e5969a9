package feel

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// builtin is a FEEL built-in function. Arguments are evaluated before the
// call; a value of the wrong type is an evaluation error (feel-scala would
// return null), in line with the operators.
type builtin struct {
	name string
	// sigs are the parameter names of each accepted form, fewest first;
	// named arguments pick the form whose names they are.
	sigs [][]string
	// variadic functions have one form whose last parameter takes the
	// remaining arguments as a list (sum(1, 2)), or a single list argument
	// as it is (sum(xs)) when it is the only parameter.
	variadic bool
	clock    bool // reads the current time
	seeded   bool // reads the evaluation's seed (uuid, random number)
	fn       func(c *evalCtx, a args) (any, error)
}

// args are the evaluated arguments of one call.
type args struct {
	f  *builtin
	v  []any
	re *regexp.Regexp
	// nulls is Options.Nulls: a single value passes as the list a
	// parameter wants, as DMN converts it.
	nulls bool
}

// param names parameter i for messages, from the form called (the last
// parameter of a variadic function takes the rest).
func (a args) param(i int) string {
	sig := a.f.sigs[len(a.f.sigs)-1]
	for _, s := range slices.Backward(a.f.sigs) {
		if len(s) == len(a.v) {
			sig = s // the first form of that many parameters
		}
	}
	return sig[min(i, len(sig)-1)]
}

func (a args) wrong(i int, want string) error {
	return fmt.Errorf("argument %q must be %s, got %s", a.param(i), want, describe(a.v[i]))
}

// has reports whether optional argument i was given as something other
// than null; an explicit null stands for a missing argument.
func (a args) has(i int) bool { return i < len(a.v) && a.v[i] != nil }

func (a args) str(i int) (string, error) {
	s, ok := a.v[i].(string)
	if !ok {
		return "", a.wrong(i, "a string")
	}
	return s, nil
}

func (a args) num(i int) (float64, error) {
	f, ok, err := number(a.v[i])
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, a.wrong(i, "a number")
	}
	return f, nil
}

// whole reads a whole number; positions, lengths and scales are never
// truncated, unlike feel-scala, which silently drops the fraction.
func (a args) whole(i int) (int, error) {
	f, err := a.num(i)
	if err != nil {
		return 0, err
	}
	if f != math.Trunc(f) || math.Abs(f) > 1<<31 {
		return 0, fmt.Errorf("argument %q must be a whole number, got %s", a.param(i), strconv.FormatFloat(f, 'f', -1, 64))
	}
	return int(f), nil
}

func (a args) list(i int) ([]any, error) {
	l, ok := a.v[i].([]any)
	if !ok && a.nulls && a.v[i] != nil {
		return []any{a.v[i]}, nil
	}
	if !ok {
		return nil, a.wrong(i, "a list")
	}
	return l, nil
}

func (a args) context(i int) (map[string]any, error) {
	m, ok := a.v[i].(map[string]any)
	if !ok {
		return nil, a.wrong(i, "a context")
	}
	return m, nil
}

// builtins by name. Names with spaces are resolved greedily by the parser.
var builtins = map[string]*builtin{}

// maxFuncWords is the most words in a built-in's name ("last day of month").
const maxFuncWords = 4

// unsupportedFuncs are feel-scala functions refused on purpose, with why.
var unsupportedFuncs = map[string]string{
	"log": "its floating-point result may differ between platforms",
	"exp": "its floating-point result may differ between platforms",
}

func def(name string, sigs [][]string, fn func(*evalCtx, args) (any, error)) *builtin {
	b := &builtin{name: name, sigs: sigs, fn: fn}
	builtins[name] = b
	return b
}

func sig(params ...string) [][]string { return [][]string{params} }

func init() {
	defineBooleans()
	defineStrings()
	defineLists()
	defineNumbers()
	defineConversions()
	defineContexts()
	defineTemporal()
	defineUUID()
	defineRandomNumber()
}

// ---- booleans ----

func defineBooleans() {
	// not, is defined and sort are parsed into their own nodes; their
	// entries make the names and arities known.
	def("not", sig("negand"), nil)
	def("is defined", sig("value"), nil)
	def("is", sig("value1", "value2"), func(c *evalCtx, a args) (any, error) {
		// The same value of the same type: unlike "=", 10:00+01:00 is not
		// 09:00Z, nor a date a date and time.
		ka, err := kindOf(a.v[0])
		if err != nil {
			return nil, err
		}
		kb, err := kindOf(a.v[1])
		if err != nil || ka != kb {
			return false, err
		}
		eq, err := equal(c, a.v[0], a.v[1])
		if err != nil || !eq || !isTemporal(a.v[0]) {
			return eq, err
		}
		return fmt.Sprint(a.v[0]) == fmt.Sprint(a.v[1]), nil
	})
	def("get or else", sig("value", "default"), func(_ *evalCtx, a args) (any, error) {
		if a.v[0] == nil {
			return a.v[1], nil
		}
		return a.v[0], nil
	})
	def("assert", [][]string{{"value", "condition"}, {"value", "condition", "cause"}}, func(_ *evalCtx, a args) (any, error) {
		if a.v[1] == true {
			return a.v[0], nil
		}
		if a.has(2) {
			cause, err := a.str(2)
			if err != nil {
				return nil, err
			}
			return nil, errors.New(cause)
		}
		return nil, errors.New("the condition is not fulfilled")
	})
}

// ---- strings ----

func stringFn(name string, f func(string) any) {
	def(name, sig("string"), func(c *evalCtx, a args) (any, error) {
		s, err := a.str(0)
		if err != nil {
			return nil, err
		}
		if err := c.scan(len(s)); err != nil {
			return nil, err
		}
		r := f(s)
		if rs, ok := r.(string); ok {
			return rs, c.spendString(len(rs))
		}
		return r, nil
	})
}

func matchFn(name string, f func(s, m string) any) {
	def(name, sig("string", "match"), func(c *evalCtx, a args) (any, error) {
		s, err := a.str(0)
		if err != nil {
			return nil, err
		}
		m, err := a.str(1)
		if err != nil {
			return nil, err
		}
		return f(s, m), c.scan(len(s) + len(m))
	})
}

func defineStrings() {
	stringFn("string length", func(s string) any { return float64(utf8.RuneCountInString(s)) })
	stringFn("upper case", func(s string) any { return strings.ToUpper(s) })
	stringFn("lower case", func(s string) any { return strings.ToLower(s) })
	// Java's String.trim: spaces and control characters.
	stringFn("trim", func(s string) any { return strings.TrimFunc(s, func(r rune) bool { return r <= ' ' }) })
	stringFn("is blank", func(s string) any { return strings.TrimFunc(s, unicode.IsSpace) == "" })
	matchFn("contains", func(s, m string) any { return strings.Contains(s, m) })
	matchFn("starts with", func(s, m string) any { return strings.HasPrefix(s, m) })
	matchFn("ends with", func(s, m string) any { return strings.HasSuffix(s, m) })
	matchFn("substring before", func(s, m string) any {
		before, _, found := strings.Cut(s, m)
		if !found {
			return ""
		}
		return before
	})
	matchFn("substring after", func(s, m string) any {
		_, after, found := strings.Cut(s, m)
		if !found {
			return ""
		}
		return after
	})
	def("substring", [][]string{{"string", "start position"}, {"string", "start position", "length"}}, substring)
	def("matches", [][]string{{"input", "pattern"}, {"input", "pattern", "flags"}}, func(c *evalCtx, a args) (any, error) {
		s, re, err := regexArgs(c, a, 2)
		if err != nil {
			return nil, err
		}
		return re.MatchString(s), nil
	})
	def("replace", [][]string{{"input", "pattern", "replacement"}, {"input", "pattern", "replacement", "flags"}}, replace)
	def("split", sig("string", "delimiter"), func(c *evalCtx, a args) (any, error) {
		s, re, err := regexArgs(c, a, -1)
		if err != nil {
			return nil, err
		}
		return split(c, s, re)
	})
	def("extract", sig("input", "pattern"), func(c *evalCtx, a args) (any, error) {
		s, re, err := regexArgs(c, a, -1)
		if err != nil {
			return nil, err
		}
		found, err := c.matches(re, s)
		if err != nil {
			return nil, err
		}
		r := make([]any, len(found))
		for i, m := range found {
			r[i] = s[m[0]:m[1]]
		}
		return r, nil
	})
	def("string join", [][]string{{"list"}, {"list", "delimiter"}, {"list", "delimiter", "prefix", "suffix"}}, stringJoin)
}

// substring counts characters (code points) from 1; a negative start counts
// from the end.
func substring(c *evalCtx, a args) (any, error) {
	s, err := a.str(0)
	if err != nil {
		return nil, err
	}
	start, err := a.whole(1)
	if err != nil {
		return nil, err
	}
	if err := c.scan(len(s)); err != nil {
		return nil, err
	}
	chars := utf8.RuneCountInString(s)
	i := start - 1
	if start <= 0 {
		i = chars + start
	}
	if i < 0 || i > chars {
		return nil, fmt.Errorf("start position %d is outside a string of %d characters", start, chars)
	}
	end := chars
	if a.has(2) {
		n, err := a.whole(2)
		if err != nil {
			return nil, err
		}
		if n < 0 {
			return nil, fmt.Errorf("length %d is negative", n)
		}
		end = min(i+n, chars)
	}
	// From characters to byte offsets; invalid UTF-8 counts as one
	// character per byte, as []rune would have it (U+FFFD each).
	if !utf8.ValidString(s) {
		return string([]rune(s)[i:end]), c.spendString(3 * (end - i))
	}
	from, to := len(s), len(s)
	for n, off := 0, 0; off < len(s); n++ {
		if n == i {
			from = off
		}
		if n == end {
			to = off
			break
		}
		_, size := utf8.DecodeRuneInString(s[off:])
		off += size
	}
	return s[from:to], nil
}

// regexFlags reads XPath's flags: s, m and i, which Go's RE2 has too; x
// (whitespace in the pattern is not matched) and q (the pattern is
// literal), which are applied to the pattern.
func regexFlags(flags string) (prefix string, spaced, quoted bool, err error) {
	var b strings.Builder
	for _, f := range flags {
		switch f {
		case 's', 'm', 'i':
			if !strings.ContainsRune(b.String(), f) {
				b.WriteRune(f)
			}
		case 'x':
			spaced = true
		case 'q':
			quoted = true
		default:
			return "", false, false, fmt.Errorf("regular expression flag %q is not one of XPath's (s, m, i, x, q)", f)
		}
	}
	if b.Len() > 0 {
		prefix = "(?" + b.String() + ")"
	}
	return prefix, spaced, quoted, nil
}

// unspaced removes the whitespace of a pattern outside character classes,
// as XPath's flag x does.
func unspaced(pattern string) string {
	var b strings.Builder
	class := false
	for i := 0; i < len(pattern); i++ {
		switch ch := pattern[i]; {
		case ch == '\\' && i+1 < len(pattern) && !strings.ContainsRune(" \t\n\r", rune(pattern[i+1])):
			b.WriteString(pattern[i : i+2])
			i++
		case ch == '[':
			class = true
			b.WriteByte(ch)
		case ch == ']':
			class = false
			b.WriteByte(ch)
		case !class && strings.IndexByte(" \t\n\r", ch) >= 0:
		default:
			b.WriteByte(ch)
		}
	}
	return b.String()
}

// subtractsClass reports whether a pattern uses XML Schema's class
// subtraction, "-[" inside a character class.
func subtractsClass(pattern string) bool {
	class := false
	for i := 0; i < len(pattern); i++ {
		switch pattern[i] {
		case '\\':
			i++
		case '[':
			class = true
		case ']':
			class = false
		case '-':
			if class && i+1 < len(pattern) && pattern[i+1] == '[' {
				return true
			}
		}
	}
	return false
}

// regexBytes is about what compiling a regular expression allocates per
// byte of its pattern.
const regexBytes = 64

// compileRegex compiles pattern with flags, as Go regular expressions (RE2):
// no backreferences or lookaround.
func compileRegex(pattern, flags string) (*regexp.Regexp, error) {
	prefix, spaced, quoted, err := regexFlags(flags)
	if err != nil {
		return nil, err
	}
	expr := pattern
	switch {
	case quoted:
		expr = regexp.QuoteMeta(pattern)
	case spaced:
		expr = unspaced(pattern)
	}
	if !quoted && subtractsClass(expr) {
		// RE2 would read [a-z-[aeiou]] as another class: refuse it.
		return nil, fmt.Errorf("invalid regular expression %q: XML Schema's class subtraction (-[...]) is not supported", pattern)
	}
	re, err := regexp.Compile(prefix + expr)
	if err != nil {
		return nil, fmt.Errorf("invalid regular expression %q: %s", pattern, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
	}
	return re, nil
}

// regexArgs reads the input string (argument 0) and the pattern (argument
// 1) with its flags (argument flagsAt, when given); a literal pattern was
// compiled at deploy time.
func regexArgs(c *evalCtx, a args, flagsAt int) (string, *regexp.Regexp, error) {
	s, err := a.str(0)
	if err != nil {
		return "", nil, err
	}
	re := a.re
	if re == nil {
		pattern, err := a.str(1)
		if err != nil {
			return "", nil, err
		}
		flags := ""
		if flagsAt > 0 && a.has(flagsAt) {
			if flags, err = a.str(flagsAt); err != nil {
				return "", nil, err
			}
		}
		// A computed pattern is compiled at each evaluation, into a program
		// several times its length.
		if err := c.spendString(regexBytes * len(pattern)); err != nil {
			return "", nil, err
		}
		if re, err = compileRegex(pattern, flags); err != nil {
			return "", nil, err
		}
	}
	return s, re, c.scanRegex(re, len(s))
}

func replace(c *evalCtx, a args) (any, error) {
	s, re, err := regexArgs(c, a, 3)
	if err != nil {
		return nil, err
	}
	repl, err := a.str(2)
	if err != nil {
		return nil, err
	}
	found, err := c.matches(re, s)
	if err != nil {
		return nil, err
	}
	if err := c.alloc(len(s)); err != nil {
		return nil, err
	}
	var b strings.Builder
	last := 0
	for _, m := range found {
		b.WriteString(s[last:m[0]])
		before := b.Len()
		if err := expand(&b, repl, s, m, re.NumSubexp()); err != nil {
			return nil, err
		}
		if err := c.spendString(b.Len() - before); err != nil {
			return nil, err
		}
		last = m[1]
	}
	b.WriteString(s[last:])
	return b.String(), nil
}

// expand writes a replacement the way Java's Matcher.replaceAll (which
// feel-scala uses) reads it: $n is group n, taking more digits while they
// still name a group, \ escapes the next character. Go's own Expand reads
// $1x as a group named "1x", so it is not used.
func expand(b *strings.Builder, repl, s string, m []int, groups int) error {
	for i := 0; i < len(repl); i++ {
		switch ch := repl[i]; ch {
		case '\\':
			i++
			if i == len(repl) {
				return errors.New("the replacement ends with a lone \\")
			}
			b.WriteByte(repl[i])
		case '$':
			i++
			if i == len(repl) || !isDigit(repl[i]) {
				return errors.New("$ in the replacement must be followed by a group number (write \\$ for a dollar sign)")
			}
			g := int(repl[i] - '0')
			for i+1 < len(repl) && isDigit(repl[i+1]) && g*10+int(repl[i+1]-'0') <= groups {
				i++
				g = g*10 + int(repl[i]-'0')
			}
			if g > groups {
				return fmt.Errorf("the replacement refers to group %d, but the pattern has %d", g, groups)
			}
			if m[2*g] >= 0 {
				b.WriteString(s[m[2*g]:m[2*g+1]])
			}
		default:
			b.WriteByte(ch)
		}
	}
	return nil
}

// split is Java's Pattern.split(s, -1), which feel-scala uses: trailing
// empty strings are kept, and an empty match at the start makes no leading
// empty string.
func split(c *evalCtx, s string, re *regexp.Regexp) (any, error) {
	found, err := c.matches(re, s)
	if err != nil {
		return nil, err
	}
	r := []any{}
	last := 0
	for _, m := range found {
		if m[1] == 0 {
			continue
		}
		r = append(r, s[last:m[0]])
		last = m[1]
	}
	r = append(r, s[last:])
	return r, c.items(len(r))
}

func stringJoin(c *evalCtx, a args) (any, error) {
	l, err := a.list(0)
	if err != nil {
		return nil, err
	}
	var opt [3]string
	for i := range opt {
		if a.has(i + 1) {
			if opt[i], err = a.str(i + 1); err != nil {
				return nil, err
			}
		}
	}
	if err := c.spend(len(l)); err != nil {
		return nil, err
	}
	if err := c.spendString(len(opt[1]) + len(opt[2])); err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString(opt[1])
	first := true
	for _, item := range l {
		switch s := item.(type) {
		case nil: // skipped, as in feel-scala
		case string:
			if !first {
				b.WriteString(opt[0])
			}
			first = false
			b.WriteString(s)
			if err := c.spendString(len(s) + len(opt[0])); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("argument \"list\" must be a list of strings, but it holds %s", describe(item))
		}
	}
	b.WriteString(opt[2])
	return b.String(), nil
}

// ---- lists ----

func listFn(name string, params []string, f func(c *evalCtx, l []any, a args) (any, error)) {
	def(name, sig(params...), func(c *evalCtx, a args) (any, error) {
		l, err := a.list(0)
		if err != nil {
			return nil, err
		}
		if err := c.spend(len(l)); err != nil {
			return nil, err
		}
		return f(c, l, a)
	})
}

func variadic(name string, params []string, f func(c *evalCtx, l []any, a args) (any, error)) {
	listFn(name, params, f)
	builtins[name].variadic = true
}

// numbers reads a list of numbers.
func numbers(l []any) ([]float64, error) {
	r := make([]float64, len(l))
	for i, item := range l {
		f, ok, err := number(item)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("expected a list of numbers, but it holds %s", describe(item))
		}
		r[i] = f
	}
	return r, nil
}

// aggregate applies f to a non-empty list of numbers; an empty list is null.
func aggregate(name string, f func([]float64) (any, error)) {
	variadic(name, []string{"list"}, func(_ *evalCtx, l []any, _ args) (any, error) {
		if len(l) == 0 {
			return nil, nil
		}
		ns, err := numbers(l)
		if err != nil {
			return nil, err
		}
		return f(ns)
	})
}

func finite(f float64) (any, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, errors.New("the result overflows")
	}
	return noNegZero(f), nil
}

func sum(ns []float64) float64 {
	s := 0.0
	for _, n := range ns {
		s += n
	}
	return s
}

func extreme(name string, want int) {
	variadic(name, []string{"list"}, func(c *evalCtx, l []any, _ args) (any, error) {
		if len(l) == 0 {
			return nil, nil
		}
		incomparable := func(err error) error {
			if IsLimit(err) {
				return err
			}
			return fmt.Errorf("the items must be comparable: %w", err)
		}
		best := l[0]
		if _, err := compare(c, best, best, name); err != nil {
			return nil, incomparable(err)
		}
		for _, item := range l[1:] {
			cmp, err := compare(c, item, best, name)
			if err != nil {
				return nil, incomparable(err)
			}
			if cmp == want {
				best = item
			}
		}
		return best, nil
	})
}

// truth folds all/any: the deciding value wins wherever it is; otherwise
// every item must be a boolean (feel-scala would return null).
func truth(name string, decider bool) {
	variadic(name, []string{"list"}, func(_ *evalCtx, l []any, _ args) (any, error) {
		bad := -1
		for i, item := range l {
			b, ok := item.(bool)
			if ok && b == decider {
				return decider, nil
			}
			if !ok && bad < 0 {
				bad = i
			}
		}
		if bad >= 0 {
			return nil, fmt.Errorf("expected a list of booleans, but it holds %s", describe(l[bad]))
		}
		return !decider, nil
	})
}

// listIndex turns a 1-based position (negative from the end) into a 0-based
// index, as feel-scala does; callers clamp it like Scala's take and drop.
func listIndex(l []any, pos int) int {
	if pos > 0 {
		return pos - 1
	}
	return len(l) + pos
}

func clamp(i, n int) int { return max(0, min(i, n)) }

// key is a string that is equal for FEEL-equal values, so that distinct
// values and union run in linear time.
func key(c *evalCtx, b *strings.Builder, v any) error {
	if err := c.spend(1); err != nil {
		return err
	}
	k, err := kindOf(v)
	if err != nil {
		return err
	}
	b.WriteByte(byte('a' + k))
	switch x := v.(type) {
	case string:
		if err := c.spendString(len(x)); err != nil {
			return err
		}
		b.WriteString(strconv.Quote(x))
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case []any:
		b.WriteString(strconv.Itoa(len(x)) + "[")
		for _, item := range x {
			if err := key(c, b, item); err != nil {
				return err
			}
		}
	case map[string]any:
		b.WriteString(strconv.Itoa(len(x)) + "{")
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if err := c.spendString(len(k)); err != nil {
				return err
			}
			b.WriteString(strconv.Quote(k))
			if err := key(c, b, x[k]); err != nil {
				return err
			}
		}
	case timeOfDay:
		if x.zoned {
			fmt.Fprintf(b, "z%d", x.instantOfDay())
		} else {
			fmt.Fprintf(b, "l%d", x.ns)
		}
	case dateTime:
		// Zoned values are equal as instants, local ones as wall clocks.
		fmt.Fprintf(b, "%v%d.%d", x.zoned, x.t.Unix(), x.t.Nanosecond())
	case date, ymDuration, dtDuration, rangeVal:
		b.WriteString(x.(fmt.Stringer).String())
	case nil:
	default: // a number, by kindOf
		f, _, err := number(v)
		if err != nil {
			return err
		}
		b.WriteString(strconv.FormatFloat(noNegZero(f), 'g', -1, 64))
	}
	b.WriteByte(';')
	return nil
}

// distinct keeps the first of each group of equal items, in order.
func distinct(c *evalCtx, l []any) ([]any, error) {
	seen := make(map[string]bool, len(l))
	r := []any{}
	var b strings.Builder
	for _, item := range l {
		b.Reset()
		if err := key(c, &b, item); err != nil {
			return nil, err
		}
		if !seen[b.String()] {
			seen[b.String()] = true
			r = append(r, item)
			if err := c.alloc(itemBytes); err != nil {
				return nil, err
			}
		}
	}
	return r, nil
}

func flatten(c *evalCtx, l []any, into []any) ([]any, error) {
	for _, item := range l {
		if err := c.spend(1); err != nil {
			return nil, err
		}
		if inner, ok := item.([]any); ok {
			var err error
			if into, err = flatten(c, inner, into); err != nil {
				return nil, err
			}
			continue
		}
		into = append(into, item)
		if err := c.alloc(itemBytes); err != nil {
			return nil, err
		}
	}
	return into, nil
}

// spread turns the variadic lists argument of concatenate and union into
// one list; an argument that is not a list is one item (feel-scala).
func spread(c *evalCtx, lists []any) ([]any, error) {
	r := []any{}
	for _, l := range lists {
		n := 1
		inner, ok := l.([]any)
		if ok {
			n = len(inner)
		}
		if err := c.items(n); err != nil {
			return nil, err
		}
		if ok {
			r = append(r, inner...)
		} else {
			r = append(r, l)
		}
	}
	return r, nil
}

func defineLists() {
	listFn("list contains", []string{"list", "element"}, func(c *evalCtx, l []any, a args) (any, error) {
		return contains(c, l, a.v[1])
	})
	listFn("count", []string{"list"}, func(_ *evalCtx, l []any, _ args) (any, error) { return float64(len(l)), nil })
	listFn("is empty", []string{"list"}, func(_ *evalCtx, l []any, _ args) (any, error) { return len(l) == 0, nil })
	aggregate("sum", func(ns []float64) (any, error) { return finite(sum(ns)) })
	aggregate("mean", func(ns []float64) (any, error) { return finite(sum(ns) / float64(len(ns))) })
	aggregate("product", func(ns []float64) (any, error) {
		p := 1.0
		for _, n := range ns {
			p *= n
		}
		return finite(p)
	})
	aggregate("median", func(ns []float64) (any, error) {
		s := slices.Sorted(slices.Values(ns))
		if len(s)%2 == 1 {
			return s[len(s)/2], nil
		}
		return finite((s[len(s)/2-1] + s[len(s)/2]) / 2)
	})
	aggregate("stddev", func(ns []float64) (any, error) {
		if len(ns) < 2 {
			return nil, errors.New("the sample standard deviation needs at least two numbers")
		}
		mean := sum(ns) / float64(len(ns))
		d := 0.0
		for _, n := range ns {
			d += (n - mean) * (n - mean)
		}
		return finite(math.Sqrt(d / float64(len(ns)-1)))
	})
	variadic("mode", []string{"list"}, func(c *evalCtx, l []any, _ args) (any, error) {
		if err := c.alloc(len(l) * 3 * itemBytes); err != nil {
			return nil, err
		}
		ns, err := numbers(l)
		if err != nil {
			return nil, err
		}
		counts := map[float64]int{}
		top := 0
		for _, n := range ns {
			counts[noNegZero(n)]++
			top = max(top, counts[noNegZero(n)])
		}
		var modes []float64
		for n, k := range counts {
			if k == top {
				modes = append(modes, n)
			}
		}
		slices.Sort(modes) // in ascending order, as in feel-scala
		r := []any{}
		for _, n := range modes {
			r = append(r, n)
		}
		return r, nil
	})
	extreme("min", -1)
	extreme("max", 1)
	truth("all", false)
	truth("any", true)
	def("sublist", [][]string{{"list", "start"}, {"list", "start", "length"}}, func(c *evalCtx, a args) (any, error) {
		l, err := a.list(0)
		if err != nil {
			return nil, err
		}
		start, err := a.whole(1)
		if err != nil {
			return nil, err
		}
		if start == 0 {
			return nil, errors.New("start position must not be 0 (positions count from 1)")
		}
		i := listIndex(l, start)
		end := len(l)
		if a.has(2) {
			n, err := a.whole(2)
			if err != nil {
				return nil, err
			}
			end = i + n
		}
		lo, hi := clamp(i, len(l)), clamp(end, len(l))
		if hi < lo {
			return []any{}, nil
		}
		if err := c.items(hi - lo); err != nil {
			return nil, err
		}
		return append([]any{}, l[lo:hi]...), nil
	})
	variadic("append", []string{"list", "items"}, func(c *evalCtx, l []any, a args) (any, error) {
		items := a.v[1].([]any)
		if err := c.items(len(l) + len(items)); err != nil {
			return nil, err
		}
		return append(append(make([]any, 0, len(l)+len(items)), l...), items...), nil
	})
	variadic("concatenate", []string{"lists"}, func(c *evalCtx, l []any, _ args) (any, error) {
		return spread(c, l)
	})
	variadic("union", []string{"lists"}, func(c *evalCtx, l []any, _ args) (any, error) {
		all, err := spread(c, l)
		if err != nil {
			return nil, err
		}
		return distinct(c, all)
	})
	def("insert before", sig("list", "position", "newItem"), func(c *evalCtx, a args) (any, error) {
		l, err := a.list(0)
		if err != nil {
			return nil, err
		}
		pos, err := a.whole(1)
		if err != nil {
			return nil, err
		}
		if pos == 0 {
			return nil, errors.New("position must not be 0 (positions count from 1)")
		}
		i := clamp(listIndex(l, pos), len(l))
		if err := c.items(len(l) + 1); err != nil {
			return nil, err
		}
		r := make([]any, 0, len(l)+1)
		return append(append(append(r, l[:i]...), a.v[2]), l[i:]...), nil
	})
	def("list replace", [][]string{{"list", "position", "newItem"}, {"list", "match", "newItem"}}, func(c *evalCtx, a args) (any, error) {
		l, err := a.list(0)
		if err != nil {
			return nil, err
		}
		if match, ok := a.v[1].(closure); ok {
			// Every item for which match(item, newItem) is true.
			if err := c.items(len(l)); err != nil {
				return nil, err
			}
			r := append([]any{}, l...)
			for i, item := range l {
				if len(match.params) != 2 {
					return nil, errors.New("the match function must take 2 parameters")
				}
				v, err := match.call(c, []any{item, a.v[2]})
				if err != nil {
					return nil, err
				}
				if v == true {
					r[i] = a.v[2]
				}
			}
			return r, nil
		}
		pos, err := a.whole(1)
		if err != nil {
			return nil, err
		}
		i := listIndex(l, pos)
		if pos == 0 || i < 0 || i >= len(l) {
			return nil, fmt.Errorf("position %d is outside the list of %d items", pos, len(l))
		}
		if err := c.items(len(l)); err != nil {
			return nil, err
		}
		r := append([]any{}, l...)
		r[i] = a.v[2]
		return r, nil
	})
	def("remove", sig("list", "position"), func(c *evalCtx, a args) (any, error) {
		l, err := a.list(0)
		if err != nil {
			return nil, err
		}
		pos, err := a.whole(1)
		if err != nil {
			return nil, err
		}
		if pos == 0 {
			return nil, errors.New("position must not be 0 (positions count from 1)")
		}
		if err := c.items(len(l)); err != nil {
			return nil, err
		}
		r := append([]any{}, l[:clamp(listIndex(l, pos), len(l))]...)
		return append(r, l[clamp(listIndex(l, pos+1), len(l)):]...), nil
	})
	listFn("reverse", []string{"list"}, func(c *evalCtx, l []any, _ args) (any, error) {
		if err := c.alloc(len(l) * itemBytes); err != nil {
			return nil, err
		}
		r := append([]any{}, l...)
		slices.Reverse(r)
		return r, nil
	})
	listFn("index of", []string{"list", "match"}, func(c *evalCtx, l []any, a args) (any, error) {
		r := []any{}
		for i, item := range l {
			eq, err := equal(c, item, a.v[1])
			if err != nil {
				return nil, err
			}
			if eq {
				r = append(r, float64(i+1))
				if err := c.alloc(itemBytes); err != nil {
					return nil, err
				}
			}
		}
		return r, nil
	})
	listFn("distinct values", []string{"list"}, func(c *evalCtx, l []any, _ args) (any, error) { return distinct(c, l) })
	listFn("duplicate values", []string{"list"}, func(c *evalCtx, l []any, _ args) (any, error) {
		keys := make([]string, len(l))
		counts := map[string]int{}
		var b strings.Builder
		for i, item := range l {
			b.Reset()
			if err := key(c, &b, item); err != nil {
				return nil, err
			}
			keys[i] = b.String()
			counts[keys[i]]++
		}
		r := []any{}
		for i, item := range l {
			if counts[keys[i]] > 1 {
				counts[keys[i]] = 0 // once per value, at its first place
				r = append(r, item)
			}
		}
		return r, nil
	})
	listFn("flatten", []string{"list"}, func(c *evalCtx, l []any, _ args) (any, error) { return flatten(c, l, []any{}) })
	listFn("partition", []string{"list", "size"}, func(c *evalCtx, l []any, a args) (any, error) {
		n, err := a.whole(1)
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return nil, fmt.Errorf("size must be greater than 0, got %d", n)
		}
		if err := c.items(len(l) + len(l)/n + 1); err != nil {
			return nil, err
		}
		r := []any{}
		for i := 0; i < len(l); i += n {
			r = append(r, append([]any{}, l[i:min(i+n, len(l))]...))
		}
		return r, nil
	})
	def("sort", sig("list", "precedes"), nil)
}

// ---- numbers ----

type rounding int

const (
	roundUp rounding = iota // away from zero
	roundDown
	roundCeiling
	roundFloor
	roundHalfUp
	roundHalfDown
	roundHalfEven
)

// roundDecimal rounds f to scale decimal places, on the shortest decimal
// text of f (what the user wrote or the JSON held): round half up(1.005, 2)
// is 1.01, as in feel-scala's BigDecimal, although the float64 nearest 1.005
// is a little below it.
func roundDecimal(f float64, scale int, mode rounding) (any, error) {
	if f == 0 {
		return 0.0, nil
	}
	neg := f < 0
	text := strconv.FormatFloat(math.Abs(f), 'e', -1, 64) // d.ddddde±XX
	mant, exp, _ := strings.Cut(text, "e")
	e, _ := strconv.Atoi(exp)
	digits := strings.Replace(mant, ".", "", 1)
	keep := e + 1 + scale // digits to keep
	if keep >= len(digits) {
		return f, nil
	}
	// kept are the digits left; first is the first digit dropped, and
	// restNonZero tells whether any digit after it is not 0.
	kept, first, restNonZero := "", byte('0'), true
	switch {
	case keep > 0:
		kept, first, restNonZero = digits[:keep], digits[keep], strings.Trim(digits[keep+1:], "0") != ""
	case keep == 0:
		first, restNonZero = digits[0], strings.Trim(digits[1:], "0") != ""
	}
	anyNonZero := first != '0' || restNonZero
	lastOdd := kept != "" && (kept[len(kept)-1]-'0')%2 == 1
	var up bool
	switch mode {
	case roundUp:
		up = anyNonZero
	case roundCeiling:
		up = anyNonZero && !neg
	case roundFloor:
		up = anyNonZero && neg
	case roundHalfUp:
		up = first >= '5'
	case roundHalfDown:
		up = first > '5' || first == '5' && restNonZero
	case roundHalfEven:
		up = first > '5' || first == '5' && (restNonZero || lastOdd)
	}
	n := new(big.Int)
	n.SetString("0"+kept, 10)
	if up {
		n.Add(n, big.NewInt(1))
	}
	r, err := strconv.ParseFloat(n.String()+"e"+strconv.Itoa(-scale), 64)
	if err != nil || math.IsInf(r, 0) {
		return nil, errors.New("the result overflows")
	}
	if neg {
		r = -r
	}
	return noNegZero(r), nil
}

func roundFn(name string, sigs [][]string, mode rounding) {
	def(name, sigs, func(_ *evalCtx, a args) (any, error) {
		f, err := a.num(0)
		if err != nil {
			return nil, err
		}
		scale := 0
		if len(a.v) > 1 {
			// A scale given is a number within DMN's (those of
			// IEEE 754 decimal128), null included.
			if scale, err = a.whole(1); err != nil {
				return nil, err
			}
			if scale < -6111 || scale > 6176 {
				return nil, fmt.Errorf("scale %d is outside -6111 to 6176", scale)
			}
		}
		return roundDecimal(f, scale, mode)
	})
}

func numberFn(name string, f func(float64) (any, error)) {
	def(name, sig("number"), func(_ *evalCtx, a args) (any, error) {
		n, err := a.num(0)
		if err != nil {
			return nil, err
		}
		return f(n)
	})
}

func defineNumbers() {
	roundFn("decimal", sig("n", "scale"), roundHalfEven)
	roundFn("floor", [][]string{{"n"}, {"n", "scale"}}, roundFloor)
	roundFn("ceiling", [][]string{{"n"}, {"n", "scale"}}, roundCeiling)
	roundFn("round up", sig("n", "scale"), roundUp)
	roundFn("round down", sig("n", "scale"), roundDown)
	roundFn("round half up", sig("n", "scale"), roundHalfUp)
	roundFn("round half down", sig("n", "scale"), roundHalfDown)
	def("abs", sig("n"), func(_ *evalCtx, a args) (any, error) {
		switch d := a.v[0].(type) {
		case ymDuration:
			return ymDuration(max(d, -d)), nil
		case dtDuration:
			return dtDuration(max(d, -d)), nil
		}
		n, err := a.num(0)
		if err != nil {
			return nil, a.wrong(0, "a number or a duration")
		}
		return math.Abs(n), nil
	})
	def("modulo", sig("dividend", "divisor"), func(_ *evalCtx, a args) (any, error) {
		x, err := a.num(0)
		if err != nil {
			return nil, err
		}
		y, err := a.num(1)
		if err != nil {
			return nil, err
		}
		if y == 0 {
			return nil, errors.New("division by zero")
		}
		// The result has the sign of the divisor, as in feel-scala.
		r := math.Mod(x, y)
		if r != 0 && (r < 0) != (y < 0) {
			r += y
		}
		return noNegZero(r), nil
	})
	numberFn("sqrt", func(n float64) (any, error) {
		if n < 0 {
			return nil, nil // feel-scala: null
		}
		return math.Sqrt(n), nil
	})
	numberFn("odd", func(n float64) (any, error) { return math.Abs(math.Mod(n, 2)) == 1, nil })
	numberFn("even", func(n float64) (any, error) { return math.Mod(n, 2) == 0, nil })
}

// ---- conversions ----

// formatNumber writes a number in plain decimal: integers exactly, others
// in the shortest form that reads back as the same float64.
func formatNumber(v any) (string, bool, error) {
	switch x := v.(type) {
	case int:
		return strconv.Itoa(x), true, nil
	case int64:
		return strconv.FormatInt(x, 10), true, nil
	case uint:
		return strconv.FormatUint(uint64(x), 10), true, nil
	case uint64:
		return strconv.FormatUint(x, 10), true, nil
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return strconv.FormatInt(i, 10), true, nil
		}
	}
	f, ok, err := number(v)
	if err != nil || !ok {
		return "", ok, err
	}
	return strconv.FormatFloat(noNegZero(f), 'f', -1, 64), true, nil
}

// toString is FEEL's string(): strings inside lists and contexts are
// quoted, context entries are in key order.
// Every write is charged before it is made: the value may be built from
// shared parts, far larger written out than it is in memory.
func toString(c *evalCtx, b *strings.Builder, v any, nested bool) error {
	write := func(s ...string) error {
		n := 0
		for _, p := range s {
			n += len(p)
		}
		if err := c.spendString(n); err != nil {
			return err
		}
		for _, p := range s {
			b.WriteString(p)
		}
		return nil
	}
	switch x := v.(type) {
	case nil:
		return write("null")
	case string:
		if nested {
			return write(`"`, x, `"`)
		}
		return write(x)
	case bool:
		return write(strconv.FormatBool(x))
	case []any:
		if err := write("["); err != nil {
			return err
		}
		for i, item := range x {
			if i > 0 {
				if err := write(", "); err != nil {
					return err
				}
			}
			if err := toString(c, b, item, true); err != nil {
				return err
			}
		}
		return write("]")
	case map[string]any:
		if err := write("{"); err != nil {
			return err
		}
		if err := c.items(len(x)); err != nil { // the sorted keys
			return err
		}
		for i, k := range slices.Sorted(maps.Keys(x)) {
			sep := ""
			if i > 0 {
				sep = ", "
			}
			if err := write(sep, k, ":"); err != nil {
				return err
			}
			if err := toString(c, b, x[k], true); err != nil {
				return err
			}
		}
		return write("}")
	case date, timeOfDay, dateTime, ymDuration, dtDuration, rangeVal:
		return write(x.(fmt.Stringer).String())
	}
	s, ok, err := formatNumber(v)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("unsupported value of Go type %T", v)
	}
	return write(s)
}

// parseNumber reads a decimal number as Java's BigDecimal does: an optional
// sign, digits with an optional fraction, an optional exponent.
func parseNumber(s string) (any, error) {
	bad := fmt.Errorf("cannot read %q as a number", s)
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := 0
	for ; i < len(s) && isDigit(s[i]); i++ {
		digits++
	}
	if i < len(s) && s[i] == '.' {
		for i++; i < len(s) && isDigit(s[i]); i++ {
			digits++
		}
	}
	if digits == 0 {
		return nil, bad
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := i
		for ; i < len(s) && isDigit(s[i]); i++ {
		}
		if i == j {
			return nil, bad
		}
	}
	if i != len(s) {
		return nil, bad
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) {
		return nil, fmt.Errorf("number %q is out of range", s)
	}
	if f == math.Trunc(f) && math.Abs(f) > maxExact {
		return nil, fmt.Errorf("integer %s is too large for exact arithmetic", s)
	}
	return noNegZero(f), nil
}

func defineConversions() {
	def("string", sig("from"), func(c *evalCtx, a args) (any, error) {
		if a.v[0] == nil {
			return nil, nil
		}
		var b strings.Builder
		if err := toString(c, &b, a.v[0], false); err != nil {
			return nil, err
		}
		return b.String(), nil
	})
	def("number", [][]string{{"from"}, {"from", "grouping separator"}, {"from", "grouping separator", "decimal separator"}}, func(c *evalCtx, a args) (any, error) {
		s, err := a.str(0)
		if err != nil {
			return nil, err
		}
		if err := c.spendString(2 * len(s)); err != nil { // read, and copied by each separator replaced
			return nil, err
		}
		var group, dec string
		if a.has(1) {
			if group, err = a.str(1); err != nil {
				return nil, err
			}
			if group != " " && group != "," && group != "." {
				return nil, errors.New(`the grouping separator must be " ", "," or "."`)
			}
			s = strings.ReplaceAll(s, group, "")
		}
		if a.has(2) {
			if dec, err = a.str(2); err != nil {
				return nil, err
			}
			if dec != "," && dec != "." || dec == group {
				return nil, errors.New(`the decimal separator must be "," or "." and differ from the grouping separator`)
			}
			s = strings.ReplaceAll(s, dec, ".")
		}
		return parseNumber(s)
	})
	def("date", [][]string{{"from"}, {"year", "month", "day"}}, func(_ *evalCtx, a args) (any, error) {
		if len(a.v) == 3 {
			var ymd [3]int
			for i := range ymd {
				var err error
				if ymd[i], err = a.whole(i); err != nil {
					return nil, err
				}
			}
			d, err := parseDate(fmt.Sprintf("%04d-%02d-%02d", ymd[0], ymd[1], ymd[2]))
			if err != nil {
				return nil, fmt.Errorf("year %d, month %d, day %d is not a date (years %d to %d)", ymd[0], ymd[1], ymd[2], minYear, maxYear)
			}
			return d, nil
		}
		switch x := a.v[0].(type) {
		case string:
			return parseDate(x)
		case date:
			return x, nil
		case dateTime:
			return midnight(x.t), nil
		}
		return nil, a.wrong(0, "a string, a date or a date and time")
	})
	def("time", [][]string{{"from"}, {"hour", "minute", "second"}, {"hour", "minute", "second", "offset"}}, timeFn)
	def("date and time", [][]string{{"from"}, {"date", "time"}}, func(_ *evalCtx, a args) (any, error) {
		if len(a.v) == 1 {
			s, err := a.str(0)
			if err != nil {
				return nil, err
			}
			return parseDateTime(s)
		}
		var d date
		switch x := a.v[0].(type) {
		case date:
			d = x
		case dateTime:
			d = midnight(x.t)
		default:
			return nil, a.wrong(0, "a date or a date and time")
		}
		switch t := a.v[1].(type) {
		case timeOfDay:
			return atTime(d, t)
		}
		return nil, a.wrong(1, "a time")
	})
	def("duration", sig("from"), func(_ *evalCtx, a args) (any, error) {
		s, err := a.str(0)
		if err != nil {
			return nil, err
		}
		return parseDuration(s)
	})
	def("years and months duration", sig("from", "to"), func(_ *evalCtx, a args) (any, error) {
		var ds [2]time.Time
		for i := range ds {
			switch x := a.v[i].(type) {
			case date:
				ds[i] = x.t
			case dateTime:
				ds[i] = x.t
			default:
				return nil, a.wrong(i, "a date or a date and time")
			}
		}
		return monthsBetween(ds[0], ds[1]), nil
	})
}

// monthsBetween is the whole months from a's date to b's date, as Java's
// Period.between counts them (Jan 31 to Feb 29 is 0 months).
func monthsBetween(a, b time.Time) ymDuration {
	ay, am, ad := a.Date()
	by, bm, bd := b.Date()
	months := int64(by-ay)*12 + int64(bm-am)
	switch {
	case months > 0 && bd < ad:
		months--
	case months < 0 && bd > ad:
		months++
	}
	return ymDuration(months)
}

func timeFn(_ *evalCtx, a args) (any, error) {
	if len(a.v) == 1 {
		switch x := a.v[0].(type) {
		case string:
			return parseTime(x)
		case timeOfDay:
			return x, nil
		case dateTime:
			h, m, s := x.t.Clock()
			_, off := x.t.Zone()
			t := timeOfDay{ns: int64(h)*int64(time.Hour) + int64(m)*int64(time.Minute) + int64(s)*int64(time.Second) + int64(x.t.Nanosecond()), off: int32(off), zoned: x.zoned, zone: zoneName(x.t)}
			if t.zone != "" {
				t.off = 0 // the zone's offset belongs to the date, not the time
			}
			return t, nil
		case date:
			return timeOfDay{zoned: true}, nil // midnight UTC, as in feel-scala
		}
		return nil, a.wrong(0, "a string, a time, a date or a date and time")
	}
	h, err := a.whole(0)
	if err != nil {
		return nil, err
	}
	m, err := a.whole(1)
	if err != nil {
		return nil, err
	}
	s, err := a.num(2)
	if err != nil {
		return nil, err
	}
	if h < 0 || h > 23 || m < 0 || m > 59 || s < 0 || s >= 60 {
		return nil, fmt.Errorf("%d:%d:%v is not a time of day", h, m, s)
	}
	sec := int64(math.Round(s * 1e9))
	if sec >= int64(time.Minute) {
		return nil, fmt.Errorf("%d:%d:%v is not a time of day", h, m, s)
	}
	t := timeOfDay{ns: int64(h)*int64(time.Hour) + int64(m)*int64(time.Minute) + sec}
	if a.has(3) {
		off, ok := a.v[3].(dtDuration)
		if !ok {
			return nil, a.wrong(3, "a days and time duration")
		}
		if off%dtDuration(time.Second) != 0 || off > dtDuration(18*time.Hour) || off < -dtDuration(18*time.Hour) {
			return nil, fmt.Errorf("offset %v must be whole seconds within ±18 hours", off)
		}
		t.off, t.zoned = int32(off/dtDuration(time.Second)), true
	}
	return t, nil
}

// ---- contexts ----

func defineContexts() {
	// DMN 1.5 names the context m, and context put's list of keys keys.
	def("get value", [][]string{{"context", "key"}, {"m", "key"}}, func(c *evalCtx, a args) (any, error) {
		m, err := a.context(0)
		if err != nil {
			return nil, err
		}
		if k, ok := a.v[1].(string); ok {
			return m[k], nil
		}
		keys, err := a.list(1)
		if err != nil {
			return nil, a.wrong(1, "a string or a list of strings")
		}
		// A path of keys; one that leads nowhere is null, as in feel-scala.
		if len(keys) == 0 {
			return nil, nil
		}
		if err := c.spend(len(keys)); err != nil {
			return nil, err
		}
		var v any = m
		for _, k := range keys {
			s, ok := k.(string)
			cur, isCtx := v.(map[string]any)
			if !ok || !isCtx {
				return nil, nil
			}
			v = cur[s]
		}
		return v, nil
	})
	def("get entries", [][]string{{"context"}, {"m"}}, func(c *evalCtx, a args) (any, error) {
		m, err := a.context(0)
		if err != nil {
			return nil, err
		}
		if err := c.items(len(m) * 4); err != nil { // an item and a context of two entries each
			return nil, err
		}
		r := []any{}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			r = append(r, map[string]any{"key": k, "value": m[k]})
		}
		return r, nil
	})
	def("context put", [][]string{{"context", "key", "value"}, {"context", "keys", "value"}}, func(c *evalCtx, a args) (any, error) {
		m, err := a.context(0)
		if err != nil {
			return nil, err
		}
		var keys []any
		if k, ok := a.v[1].(string); ok {
			keys = []any{k}
		} else if keys, err = a.list(1); err != nil {
			return nil, a.wrong(1, "a string or a list of strings")
		}
		if len(keys) == 0 {
			return nil, nil // feel-scala: null
		}
		return put(c, m, keys, a.v[2])
	})
	variadic("context merge", []string{"contexts"}, func(c *evalCtx, l []any, _ args) (any, error) {
		r := map[string]any{}
		for _, item := range l {
			m, ok := item.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("expected a list of contexts, but it holds %s", describe(item))
			}
			for k, v := range m {
				if err := c.entry(k); err != nil {
					return nil, err
				}
				r[k] = v
			}
		}
		return r, nil
	})
	listFn("context", []string{"entries"}, func(c *evalCtx, l []any, _ args) (any, error) {
		r := map[string]any{}
		for _, item := range l {
			m, ok := item.(map[string]any)
			k, isStr := m["key"].(string)
			_, hasValue := m["value"]
			if !ok || !isStr || !hasValue {
				return nil, errors.New(`expected a list of contexts with a string "key" and a "value"`)
			}
			if err := c.entry(k); err != nil {
				return nil, err
			}
			r[k] = m["value"]
		}
		return r, nil
	})
}

// put copies m with keys[0] (and so on down nested contexts) set to v.
func put(c *evalCtx, m map[string]any, keys []any, v any) (any, error) {
	k, ok := keys[0].(string)
	if !ok {
		return nil, fmt.Errorf("argument \"key\" must be a string or a list of strings, but it holds %s", describe(keys[0]))
	}
	if err := c.spend(len(m)); err != nil {
		return nil, err
	}
	if err := c.alloc((len(m) + 1) * entryBytes); err != nil {
		return nil, err
	}
	r := make(map[string]any, len(m)+1)
	for key, val := range m {
		r[key] = val
	}
	if len(keys) > 1 {
		inner, _ := m[k].(map[string]any)
		var err error
		if v, err = put(c, inner, keys[1:], v); err != nil {
			return nil, err
		}
	}
	r[k] = v
	return r, nil
}

// ---- dates and times ----

func dateFn(name string, f func(time.Time) any) {
	def(name, sig("date"), func(_ *evalCtx, a args) (any, error) {
		switch x := a.v[0].(type) {
		case date:
			return f(x.t), nil
		case dateTime:
			return f(x.t), nil
		}
		return nil, a.wrong(0, "a date or a date and time")
	})
}

func defineTemporal() {
	now := def("now", [][]string{{}}, func(c *evalCtx, _ args) (any, error) {
		if c.now.IsZero() {
			return nil, errNoClock
		}
		t, err := checkDate(c.now.UTC())
		return dateTime{t: t, zoned: true}, err
	})
	now.clock = true
	today := def("today", [][]string{{}}, func(c *evalCtx, _ args) (any, error) {
		if c.now.IsZero() {
			return nil, errNoClock
		}
		t, err := checkDate(c.now.UTC())
		return midnight(t), err
	})
	today.clock = true
	dateFn("day of week", func(t time.Time) any { return t.Weekday().String() })
	dateFn("day of year", func(t time.Time) any { return float64(t.YearDay()) })
	dateFn("month of year", func(t time.Time) any { return t.Month().String() })
	dateFn("week of year", func(t time.Time) any { _, w := t.ISOWeek(); return float64(w) })
	dateFn("last day of month", func(t time.Time) any {
		return date{time.Date(t.Year(), t.Month(), daysIn(t.Year(), t.Month()), 0, 0, 0, 0, time.UTC)}
	})
}

package feel

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

type tokKind int

const (
	tEOF tokKind = iota
	tNum
	tStr
	tName
	tOp // = != < <= > >= + - * /
	tLParen
	tRParen
	tDot
	tLBrack
	tRBrack
	tLBrace
	tRBrace
	tComma
	tColon
	tRange    // ..
	tTemporal // @"...": str is the decoded string
)

type token struct {
	kind tokKind
	text string // source text; the operator for tOp, the name for tName
	pos  int    // byte offset in the full source (which includes the leading "=")
	num  float64
	str  string // decoded value of a string literal
	// quoted marks a tName written in backticks (`steady-state`): text is
	// what is between them, and the name is never a keyword or part of a
	// function name.
	quoted bool
}

// describe names a token in error messages.
func (t token) describe() string {
	switch t.kind {
	case tEOF:
		return "end of expression"
	case tNum:
		return "number " + t.text
	case tStr:
		return "string " + t.text
	case tName:
		if t.quoted {
			return "name `" + t.text + "`"
		}
		return "name " + strconv.Quote(t.text)
	case tTemporal:
		return "temporal literal " + t.text
	}
	return strconv.Quote(t.text)
}

// punctuation maps single characters to their token kinds.
var punctuation = map[byte]tokKind{
	'(': tLParen, ')': tRParen, '[': tLBrack, ']': tRBrack,
	'{': tLBrace, '}': tRBrace, ',': tComma, ':': tColon,
}

// refusedRunes explains characters that belong to FEEL (or to other
// expression languages users confuse with it) but not to the supported subset.
var refusedRunes = map[rune]string{
	'\'': "single-quoted strings are not supported; use double quotes",
	'?':  "?, ?: and ?? are not supported",
	'%':  "the % operator is not supported",
	'^':  "the ^ operator is not supported",
	'&':  "&& is not FEEL; use and",
	'|':  "|| is not FEEL; use or",
	';':  "; is not supported",
	'#':  "# is not supported",
	'$':  "$ is not supported",
	'~':  "~ is not supported",
	'\\': "\\ outside a string is not supported",
}

// lex splits src into tokens, starting after the leading "=". It refuses
// anything outside the subset as early as possible so that the message can
// name the exact character.
func lex(src string) ([]token, error) {
	for i, r := range src {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(src[i:]); size == 1 {
				return nil, refuse(src, i, "invalid UTF-8")
			}
		}
	}
	var toks []token
	i := 1
	for i < len(src) {
		r, size := utf8.DecodeRuneInString(src[i:])
		switch {
		case unicode.IsSpace(r):
			i += size
		case strings.HasPrefix(src[i:], "//"):
			// A comment, as in feel-scala: to the end of the line.
			if n := strings.IndexByte(src[i:], '\n'); n >= 0 {
				i += n
			} else {
				i = len(src)
			}
		case strings.HasPrefix(src[i:], "/*"):
			n := strings.Index(src[i+2:], "*/")
			if n < 0 {
				return nil, refuse(src, i, "unterminated comment")
			}
			i += n + 4
		case r == '"':
			t, n, err := lexString(src, i)
			if err != nil {
				return nil, err
			}
			toks = append(toks, t)
			i += n
		case r >= '0' && r <= '9' || r == '.' && i+1 < len(src) && isDigit(src[i+1]):
			t, n, err := lexNumber(src, i)
			if err != nil {
				return nil, err
			}
			toks = append(toks, t)
			i += n
		case r == '.':
			if i+1 < len(src) && src[i+1] == '.' {
				toks = append(toks, token{kind: tRange, text: "..", pos: i})
				i += 2
				continue
			}
			toks = append(toks, token{kind: tDot, text: ".", pos: i})
			i++
		case r == '@':
			if i+1 >= len(src) || src[i+1] != '"' {
				return nil, refuse(src, i, "@ must be followed by a string (a temporal literal such as @\"2024-01-31\")")
			}
			t, n, err := lexString(src, i+1)
			if err != nil {
				return nil, err
			}
			toks = append(toks, token{kind: tTemporal, text: src[i : i+1+n], pos: i, str: t.str})
			i += 1 + n
		case r == '`':
			// feel-scala's escaped name: any characters but a backtick.
			n := strings.IndexByte(src[i+1:], '`')
			switch n {
			case -1:
				return nil, refuse(src, i, "unterminated backtick-quoted name")
			case 0:
				return nil, refuse(src, i, "empty backtick-quoted name")
			}
			toks = append(toks, token{kind: tName, text: src[i+1 : i+1+n], pos: i, quoted: true})
			i += n + 2
		case nameStart(r):
			j := i + size
			for j < len(src) {
				r, size := utf8.DecodeRuneInString(src[j:])
				if !nameStart(r) && !unicode.IsDigit(r) {
					break
				}
				j += size
			}
			toks = append(toks, token{kind: tName, text: src[i:j], pos: i})
			i = j
		case punctuation[src[i]] != 0:
			toks = append(toks, token{kind: punctuation[src[i]], text: src[i : i+1], pos: i})
			i++
		default:
			t, err := lexOperator(src, i)
			if err != nil {
				return nil, err
			}
			toks = append(toks, t)
			i += len(t.text)
		}
	}
	return append(toks, token{kind: tEOF, pos: len(src)}), nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func lexOperator(src string, i int) (token, error) {
	next := byte(0)
	if i+1 < len(src) {
		next = src[i+1]
	}
	op := src[i : i+1]
	switch src[i] {
	case '=':
		if next == '=' {
			return token{}, refuse(src, i, "== is not FEEL; use = for equality")
		}
	case '!':
		if next != '=' {
			return token{}, refuse(src, i, "! is not FEEL; use not(...)")
		}
		op = "!="
	case '<', '>':
		if next == '=' {
			op = src[i : i+2]
		}
	case '*':
		if next == '*' {
			op = "**"
		}
	case '/':
	case '+', '-':
	default:
		r, _ := utf8.DecodeRuneInString(src[i:])
		if why, ok := refusedRunes[r]; ok {
			return token{}, refuse(src, i, "%s", why)
		}
		return token{}, refuse(src, i, "unexpected character %q", r)
	}
	return token{kind: tOp, text: op, pos: i}, nil
}

// lexNumber reads digits with an optional fraction and exponent (1.2e-3,
// as DMN 1.4 added). Numbers are float64, like the JSON variables they
// meet.
func lexNumber(src string, i int) (token, int, error) {
	j := i
	for j < len(src) && isDigit(src[j]) {
		j++
	}
	if j < len(src) && src[j] == '.' && j+1 < len(src) && isDigit(src[j+1]) {
		j++
		for j < len(src) && isDigit(src[j]) {
			j++
		}
	}
	if j < len(src) && (src[j] == 'e' || src[j] == 'E') {
		k := j + 1
		if k < len(src) && (src[k] == '+' || src[k] == '-') {
			k++
		}
		if k < len(src) && isDigit(src[k]) {
			j = k
			for j < len(src) && isDigit(src[j]) {
				j++
			}
		}
	}
	if j < len(src) {
		if r, _ := utf8.DecodeRuneInString(src[j:]); r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) {
			return token{}, 0, refuse(src, i, "malformed number %q (digit separators are not supported)", src[i:j+utf8.RuneLen(r)])
		}
	}
	text := src[i:j]
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return token{}, 0, refuse(src, i, "number %s is out of range", text)
	}
	return token{kind: tNum, text: text, pos: i, num: f}, j - i, nil
}

// nameStart reports whether a name may start with r: _, a letter, or a
// character beyond the Basic Multilingual Plane (DMN's NameStartChar
// has U+10000 to U+EFFFF, emoji among them).
func nameStart(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || r >= 0x10000 && r <= 0xEFFFF
}

// lexString decodes a double-quoted literal with FEEL escapes: \" \' \\ \n
// \r \t \b \f, \uXXXX (surrogate pairs combine) and \UXXXXXX. Any other
// backslash stays in the string with the character after it, as in
// feel-scala, so a pattern such as "\d+" or "\$" reaches a regular
// expression function as Camunda users write it.
func lexString(src string, i int) (token, int, error) {
	var b strings.Builder
	j := i + 1
	for j < len(src) {
		c := src[j]
		switch c {
		case '"':
			return token{kind: tStr, text: src[i : j+1], pos: i, str: b.String()}, j + 1 - i, nil
		case '\\':
			if j+1 >= len(src) {
				return token{}, 0, refuse(src, i, "unterminated string")
			}
			switch e := src[j+1]; e {
			case '"', '\'', '\\':
				b.WriteByte(e)
				j += 2
			case 'n':
				b.WriteByte('\n')
				j += 2
			case 'r':
				b.WriteByte('\r')
				j += 2
			case 't':
				b.WriteByte('\t')
				j += 2
			case 'b':
				b.WriteByte('\b')
				j += 2
			case 'f':
				b.WriteByte('\f')
				j += 2
			case 'u':
				r, n, ok := unicodeEscape(src[j:])
				if !ok {
					return token{}, 0, refuse(src, j, "invalid unicode escape")
				}
				b.WriteRune(r)
				j += n
			case 'U':
				v, err := strconv.ParseUint(src[j+2:min(j+8, len(src))], 16, 32)
				if err != nil || j+8 > len(src) || !utf8.ValidRune(rune(v)) {
					return token{}, 0, refuse(src, j, "invalid unicode escape (want \\U and 6 hex digits)")
				}
				b.WriteRune(rune(v))
				j += 8
			default:
				b.WriteByte('\\')
				j++
			}
		default:
			b.WriteByte(c)
			j++
		}
	}
	return token{}, 0, refuse(src, i, "unterminated string")
}

// unicodeEscape decodes \uXXXX at the start of s, or a \uXXXX\uXXXX
// surrogate pair; a lone surrogate is not a character and is refused.
func unicodeEscape(s string) (rune, int, bool) {
	hex4 := func(s string) (rune, bool) {
		if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(s[2:6], 16, 32)
		return rune(v), err == nil
	}
	r, ok := hex4(s)
	switch {
	case !ok:
		return 0, 0, false
	case r >= 0xD800 && r < 0xDC00:
		lo, ok := hex4(s[6:])
		if !ok || lo < 0xDC00 || lo > 0xDFFF {
			return 0, 0, false
		}
		return (r-0xD800)<<10 | (lo - 0xDC00) + 0x10000, 12, true
	case r >= 0xDC00 && r <= 0xDFFF:
		return 0, 0, false
	}
	return r, 6, true
}

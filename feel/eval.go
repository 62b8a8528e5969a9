package feel

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The value model. Variables are JSON-shaped: nil, bool, string, numbers,
// []any and map[string]any. Numbers of any Go numeric type (and
// json.Number, for decoders that keep precision) are compared and computed
// as float64; an integer that float64 cannot hold exactly is an error
// rather than a silently rounded operand. Inside an evaluation there are
// also the temporal values of temporal.go; they leave as ISO 8601 strings.

type kind int

const (
	kNull kind = iota
	kBool
	kNumber
	kString
	kList
	kContext
	kDate
	kTime
	kDateTime
	kYMDuration
	kDTDuration
	kRange
	kFunction
)

// maxExact is 2^53: every integer of smaller magnitude is exact in float64.
const maxExact = 1 << 53

func kindOf(v any) (kind, error) {
	switch v.(type) {
	case nil:
		return kNull, nil
	case bool:
		return kBool, nil
	case string:
		return kString, nil
	case []any:
		return kList, nil
	case map[string]any:
		return kContext, nil
	case float64, float32, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, json.Number:
		return kNumber, nil
	case date:
		return kDate, nil
	case timeOfDay:
		return kTime, nil
	case dateTime:
		return kDateTime, nil
	case ymDuration:
		return kYMDuration, nil
	case dtDuration:
		return kDTDuration, nil
	case rangeVal:
		return kRange, nil
	case closure:
		return kFunction, nil
	}
	return 0, fmt.Errorf("unsupported value of Go type %T", v)
}

var kindNames = [...]string{"null", "a boolean", "a number", "a string", "a list", "a context",
	"a date", "a time", "a date and time", "a years and months duration", "a days and time duration", "a range", "a function"}

// describe names v's FEEL type for error messages, telling local times
// from times with an offset, since they cannot be compared.
func describe(v any) string {
	switch t := v.(type) {
	case timeOfDay:
		if !t.zoned {
			return "a local time"
		}
	case dateTime:
		if !t.zoned {
			return "a local date and time"
		}
	}
	k, err := kindOf(v)
	if err != nil {
		return fmt.Sprintf("a value of Go type %T", v)
	}
	return kindNames[k]
}

// number converts v to float64; ok is false when v is not a number.
func number(v any) (f float64, ok bool, err error) {
	switch n := v.(type) {
	case float64:
		f = n
	case float32:
		f = float64(n)
	case int:
		return exactInt(int64(n))
	case int8:
		return float64(n), true, nil
	case int16:
		return float64(n), true, nil
	case int32:
		return float64(n), true, nil
	case int64:
		return exactInt(n)
	case uint:
		return exactUint(uint64(n))
	case uint8:
		return float64(n), true, nil
	case uint16:
		return float64(n), true, nil
	case uint32:
		return float64(n), true, nil
	case uint64:
		return exactUint(n)
	case json.Number:
		if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
			return exactInt(i)
		} else if errors.Is(err, strconv.ErrRange) {
			return 0, true, fmt.Errorf("integer %s is too large for exact arithmetic", n)
		}
		if f, err = n.Float64(); err != nil {
			return 0, true, fmt.Errorf("invalid number %q", string(n))
		}
	default:
		return 0, false, nil
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, true, fmt.Errorf("%v is not a finite number", f)
	}
	return f, true, nil
}

func exactInt(i int64) (float64, bool, error) {
	if i > maxExact || i < -maxExact {
		return 0, true, fmt.Errorf("integer %d is too large for exact arithmetic", i)
	}
	return float64(i), true, nil
}

func exactUint(u uint64) (float64, bool, error) {
	if u > maxExact {
		return 0, true, fmt.Errorf("integer %d is too large for exact arithmetic", u)
	}
	return float64(u), true, nil
}

var errNoClock = errors.New("the current time is not available here")

// scope is one level of names bound inside an expression: an iteration
// variable, a function parameter, "item" with a filtered context's entries,
// or the entries of a context literal so far. Lookups fall back to the
// variables.
type scope struct {
	up      *scope
	name    string
	val     any
	entries map[string]any // shadow name, as in feel-scala's filter context
}

func lookup(c *evalCtx, s *scope, name string) (any, bool) {
	for ; s != nil; s = s.up {
		if v, ok := s.entries[name]; ok {
			return v, true
		}
		if s.name == name {
			return s.val, true
		}
	}
	v, ok := c.vars[name]
	return v, ok
}

// equal is FEEL "=": null equals only null, values of different types are
// unequal, numbers compare by value, lists and contexts compare deeply,
// zoned dates and times compare as instants.
func equal(c *evalCtx, a, b any) (bool, error) {
	ka, err := kindOf(a)
	if err != nil {
		return false, err
	}
	kb, err := kindOf(b)
	if err != nil {
		return false, err
	}
	if ka != kb {
		return false, nil
	}
	switch ka {
	case kNull:
		return true, nil
	case kBool:
		return a.(bool) == b.(bool), nil
	case kString:
		x, y := a.(string), b.(string)
		if len(x) == len(y) {
			if err := c.scan(len(x)); err != nil {
				return false, err
			}
		}
		return x == y, nil
	case kNumber:
		x, _, err := number(a)
		if err != nil {
			return false, err
		}
		y, _, err := number(b)
		return x == y, err
	case kList:
		x, y := a.([]any), b.([]any)
		if len(x) != len(y) {
			return false, nil
		}
		if err := c.spend(len(x)); err != nil {
			return false, err
		}
		for i := range x {
			if eq, err := equal(c, x[i], y[i]); err != nil || !eq {
				return false, err
			}
		}
		return true, nil
	case kContext:
		x, y := a.(map[string]any), b.(map[string]any)
		if len(x) != len(y) {
			return false, nil
		}
		if err := c.spend(len(x)); err != nil {
			return false, err
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok {
				return false, nil
			}
			if eq, err := equal(c, xv, yv); err != nil || !eq {
				return false, err
			}
		}
		return true, nil
	}
	if ka == kFunction {
		return false, nil // functions are not compared
	}
	if ka == kRange {
		x, y := a.(rangeVal), b.(rangeVal)
		if x.openLo != y.openLo || x.openHi != y.openHi || x.op != y.op {
			return false, nil
		}
		if eq, err := equal(c, x.lo, y.lo); err != nil || !eq {
			return false, err
		}
		return equal(c, x.hi, y.hi)
	}
	cmp, ok := compareTemporal(a, b)
	return ok && cmp == 0, nil
}

// compare orders two numbers, two strings or two temporal values of the
// same kind. Anything else, null included, is an error: "null < 5" has no
// true answer, and reporting false would take a gateway branch on a missing
// variable.
func compare(c *evalCtx, a, b any, op string) (int, error) {
	if x, ok := a.(string); ok {
		if y, ok := b.(string); ok {
			return strings.Compare(x, y), c.scan(min(len(x), len(y)))
		}
	}
	if r, ok := compareTemporal(a, b); ok {
		return r, nil
	}
	x, xok, err := number(a)
	if err != nil {
		return 0, err
	}
	y, yok, err := number(b)
	if err != nil {
		return 0, err
	}
	if !xok || !yok {
		return 0, fmt.Errorf("cannot compare %s with %s using %s", describe(a), describe(b), op)
	}
	switch {
	case x < y:
		return -1, nil
	case x > y:
		return 1, nil
	}
	return 0, nil
}

func arithmetic(c *evalCtx, a, b any, op string) (any, error) {
	if op == "+" {
		if x, ok := a.(string); ok {
			if y, ok := b.(string); ok {
				if err := c.spendString(len(x) + len(y)); err != nil {
					return nil, err
				}
				return x + y, nil
			}
		}
	}
	if op == "+" || op == "-" {
		if r, ok, err := temporalArithmetic(a, b, op); ok {
			return r, err
		}
	}
	x, xok, err := number(a)
	if err != nil {
		return nil, err
	}
	y, yok, err := number(b)
	if err != nil {
		return nil, err
	}
	if op == "*" || op == "/" {
		switch {
		case xok && isDuration(b) && op == "*":
			return scaleDuration(b, x, false)
		case yok && isDuration(a):
			return scaleDuration(a, y, op == "/")
		case op == "/" && isDuration(a) && isDuration(b):
			return durationRatio(a, b)
		}
	}
	if !xok || !yok {
		return nil, fmt.Errorf("cannot apply %s to %s and %s", op, describe(a), describe(b))
	}
	var r float64
	switch op {
	case "**":
		return power(c, x, y)
	case "+":
		r = x + y
	case "-":
		r = x - y
	case "*":
		r = x * y
	default:
		if y == 0 {
			return nil, errors.New("division by zero")
		}
		r = x / y
	}
	if math.IsInf(r, 0) {
		return nil, fmt.Errorf("result of %s overflows", op)
	}
	return noNegZero(r), nil
}

// power is x ** y for a whole y, by repeated squaring, one step per bit of
// y: IEEE multiplication gives the same bits on every platform, which
// math.Pow does not promise (a fractional exponent is refused for that).
func power(c *evalCtx, x, y float64) (any, error) {
	if y != math.Trunc(y) || math.IsInf(y, 0) {
		return nil, fmt.Errorf("the exponent must be a whole number, got %s", strconv.FormatFloat(y, 'g', -1, 64))
	}
	r, b := 1.0, x
	for n := math.Abs(y); n >= 1; n = math.Floor(n / 2) {
		if err := c.spend(1); err != nil {
			return nil, err
		}
		if math.Mod(n, 2) == 1 {
			r *= b
		}
		b *= b
	}
	if y < 0 {
		if r == 0 && x == 0 {
			return nil, errors.New("division by zero")
		}
		r = 1 / r
	}
	if math.IsInf(r, 0) {
		return nil, errors.New("result of ** overflows")
	}
	return noNegZero(r), nil
}

func isDuration(v any) bool {
	switch v.(type) {
	case ymDuration, dtDuration:
		return true
	}
	return false
}

// durationRatio is a / b for two durations of the same kind: a number.
func durationRatio(a, b any) (any, error) {
	switch x := a.(type) {
	case ymDuration:
		if y, ok := b.(ymDuration); ok {
			if y == 0 {
				return nil, errors.New("division by zero")
			}
			return noNegZero(float64(x) / float64(y)), nil
		}
	case dtDuration:
		if y, ok := b.(dtDuration); ok {
			if y == 0 {
				return nil, errors.New("division by zero")
			}
			return noNegZero(float64(x) / float64(y)), nil
		}
	}
	return nil, fmt.Errorf("cannot apply / to %s and %s", describe(a), describe(b))
}

// noNegZero maps -0 to 0: FEEL numbers are decimals, which have no
// negative zero, and "-0" must not leak into correlation keys or JSON.
func noNegZero(f float64) float64 {
	if f == 0 {
		return 0
	}
	return f
}

func boolean(v any, op string) (bool, error) {
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("%s needs a boolean operand, got %s", op, describe(v))
	}
	return b, nil
}

// get reads one step of a path. A path through null is null (so
// "order.total = null" works before order exists); on a list it reads the
// field of every item (feel-scala's projection); on a temporal value it
// reads a property; on anything else it is an error.
func get(c *evalCtx, v any, field string) (any, error) {
	switch m := v.(type) {
	case nil:
		return nil, nil
	case map[string]any:
		return m[field], nil
	case []any:
		if err := c.items(len(m)); err != nil {
			return nil, err
		}
		r := make([]any, len(m))
		for i, item := range m {
			var err error
			if r[i], err = get(c, item, field); err != nil {
				return nil, err
			}
		}
		return r, nil
	}
	if p, ok := property(v, field); ok {
		return p, nil
	}
	return nil, fmt.Errorf("cannot read .%s of %s", field, describe(v))
}

// jsonShape turns a result into JSON values: temporal values become their
// ISO 8601 strings. It charges the result's size as JSON would write it
// (each list item, context entry and string where it appears), so that a
// result built from shared parts cannot leave larger than the limits.
func jsonShape(c *evalCtx, v any) (any, error) {
	s, _, err := shape(c, v, 0)
	return s, err
}

// maxResultDepth bounds how deeply a result nests lists and contexts: a
// value built in a loop can nest as deep as the loop runs, and a JSON
// decoder refuses a document nested much deeper (Go's past 10000 levels),
// which would leave an instance whose variables hold one unreadable.
const maxResultDepth = 1000

// shape is jsonShape reporting whether it replaced anything; it copies only
// the lists and contexts that hold a temporal value, so a list from the
// variables comes back as it was.
func shape(c *evalCtx, v any, depth int) (any, bool, error) {
	switch v.(type) {
	case []any, map[string]any:
		if depth == maxResultDepth {
			return nil, false, fmt.Errorf("the result nests lists and contexts more than %d levels deep", maxResultDepth)
		}
	}
	switch x := v.(type) {
	case string:
		return v, false, c.alloc(len(x))
	case date, timeOfDay, dateTime, ymDuration, dtDuration, rangeVal:
		return x.(fmt.Stringer).String(), true, nil
	case closure:
		return nil, false, ErrFunctionResult
	case []any:
		if err := c.items(len(x)); err != nil {
			return nil, false, err
		}
		var r []any
		for i, item := range x {
			s, changed, err := shape(c, item, depth+1)
			if err != nil {
				return nil, false, err
			}
			if changed && r == nil {
				r = make([]any, len(x))
				copy(r, x)
			}
			if r != nil {
				r[i] = s
			}
		}
		if r != nil {
			return r, true, nil
		}
	case map[string]any:
		var r map[string]any
		for k, item := range x {
			if err := c.entry(k); err != nil {
				return nil, false, err
			}
			s, changed, err := shape(c, item, depth+1)
			if err != nil {
				return nil, false, err
			}
			if changed {
				if r == nil {
					r = make(map[string]any, len(x))
					for k, item := range x {
						r[k] = item
					}
				}
				r[k] = s
			}
		}
		if r != nil {
			return r, true, nil
		}
	}
	return v, false, nil
}

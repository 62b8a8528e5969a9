package feel

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/expr-lang/expr"
)

// The value model. Variables are JSON-shaped: nil, bool, string, numbers,
// []any and map[string]any. Numbers of any Go numeric type (and
// json.Number, for decoders that keep precision) are compared and computed
// as float64; an integer that float64 cannot hold exactly is an error
// rather than a silently rounded operand.

type kind int

const (
	kNull kind = iota
	kBool
	kNumber
	kString
	kList
	kContext
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
	}
	return 0, fmt.Errorf("unsupported value of Go type %T", v)
}

// describe names v's FEEL type for error messages.
func describe(v any) string {
	k, err := kindOf(v)
	if err != nil {
		return fmt.Sprintf("a value of Go type %T", v)
	}
	return [...]string{"null", "a boolean", "a number", "a string", "a list", "a context"}[k]
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

// equal is FEEL "=": null equals only null, values of different types are
// unequal, numbers compare by value, lists and contexts compare deeply.
func equal(a, b any) (bool, error) {
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
		return a.(string) == b.(string), nil
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
		for i := range x {
			if eq, err := equal(x[i], y[i]); err != nil || !eq {
				return false, err
			}
		}
		return true, nil
	default:
		x, y := a.(map[string]any), b.(map[string]any)
		if len(x) != len(y) {
			return false, nil
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok {
				return false, nil
			}
			if eq, err := equal(xv, yv); err != nil || !eq {
				return false, err
			}
		}
		return true, nil
	}
}

// compare orders two numbers or two strings. Anything else, null
// included, is an error: "null < 5" has no true answer, and reporting
// false would take a gateway branch on a missing variable.
func compare(a, b any, op string) (int, error) {
	if x, ok := a.(string); ok {
		if y, ok := b.(string); ok {
			return strings.Compare(x, y), nil
		}
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

func arithmetic(a, b any, op string) (any, error) {
	if op == "+" {
		if x, ok := a.(string); ok {
			if y, ok := b.(string); ok {
				return x + y, nil
			}
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
	if !xok || !yok {
		return nil, fmt.Errorf("cannot apply %s to %s and %s", op, describe(a), describe(b))
	}
	var r float64
	switch op {
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
// "order.total = null" works before order exists); through anything but a
// context it is an error.
func get(v any, field string) (any, error) {
	switch m := v.(type) {
	case nil:
		return nil, nil
	case map[string]any:
		return m[field], nil
	}
	return nil, fmt.Errorf("cannot read .%s of %s", field, describe(v))
}

func cmpHelper(op string, test func(int) bool) func(...any) (any, error) {
	return func(args ...any) (any, error) {
		c, err := compare(args[0], args[1], op)
		return test(c), err
	}
}

func arithHelper(op string) func(...any) (any, error) {
	return func(args ...any) (any, error) { return arithmetic(args[0], args[1], op) }
}

// helpers are the functions ast.go emits. The declared types let expr's
// checker type the boolean results; arguments stay any because FEEL types
// are only known at run time.
var helpers = []expr.Option{
	expr.Function("_get", func(args ...any) (any, error) {
		return get(args[0], args[1].(string))
	}, new(func(any, string) any)),
	expr.Function("_bool", func(args ...any) (any, error) {
		return boolean(args[0], args[1].(string))
	}, new(func(any, string) bool)),
	expr.Function("_eq", func(args ...any) (any, error) {
		return equal(args[0], args[1])
	}, new(func(any, any) bool)),
	expr.Function("_ne", func(args ...any) (any, error) {
		eq, err := equal(args[0], args[1])
		return !eq, err
	}, new(func(any, any) bool)),
	expr.Function("_lt", cmpHelper("<", func(c int) bool { return c < 0 }), new(func(any, any) bool)),
	expr.Function("_le", cmpHelper("<=", func(c int) bool { return c <= 0 }), new(func(any, any) bool)),
	expr.Function("_gt", cmpHelper(">", func(c int) bool { return c > 0 }), new(func(any, any) bool)),
	expr.Function("_ge", cmpHelper(">=", func(c int) bool { return c >= 0 }), new(func(any, any) bool)),
	expr.Function("_add", arithHelper("+"), new(func(any, any) any)),
	expr.Function("_sub", arithHelper("-"), new(func(any, any) any)),
	expr.Function("_mul", arithHelper("*"), new(func(any, any) any)),
	expr.Function("_div", arithHelper("/"), new(func(any, any) any)),
	expr.Function("_neg", func(args ...any) (any, error) {
		x, ok, err := number(args[0])
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("cannot negate %s", describe(args[0]))
		}
		return noNegZero(-x), nil
	}, new(func(any) any)),
}

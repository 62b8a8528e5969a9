package tasks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
)

// typedValue is a Camunda typed variable: {"value": …, "type": "String",
// "valueInfo": {}}.
type typedValue struct {
	Value     json.RawMessage `json:"value"`
	Type      string          `json:"type"`
	ValueInfo map[string]any  `json:"valueInfo"`
}

// fromTyped turns Camunda typed variables into instance variables (JSON
// values). Json (and Object serialized as application/json) values are
// parsed; Bytes, File and Java-serialized objects are refused: an instance's
// variables are JSON.
func fromTyped(vars map[string]typedValue) (map[string]any, error) {
	out := make(map[string]any, len(vars))
	for name, tv := range vars {
		v, err := tv.decode()
		if err != nil {
			return nil, fmt.Errorf("variable %q: %w", name, err)
		}
		out[name] = v
	}
	return out, nil
}

func (tv typedValue) decode() (any, error) {
	raw := bytes.TrimSpace(tv.Value)
	var v any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("value is not JSON: %w", err)
		}
	}
	typ := strings.ToLower(tv.Type)
	switch typ {
	case "", "null":
		if typ == "null" && v != nil {
			return nil, fmt.Errorf("a Null variable has value %s", raw)
		}
		return v, nil
	case "string", "date":
		if _, ok := v.(string); !ok && v != nil {
			return nil, fmt.Errorf("a %s variable needs a string value, got %s", tv.Type, raw)
		}
		return v, nil
	case "boolean":
		if _, ok := v.(bool); !ok && v != nil {
			return nil, fmt.Errorf("a Boolean variable needs true or false, got %s", raw)
		}
		return v, nil
	case "integer", "long", "short":
		f, ok := v.(float64)
		if v != nil && (!ok || f != math.Trunc(f)) {
			return nil, fmt.Errorf("an %s variable needs a whole number, got %s", tv.Type, raw)
		}
		return v, nil
	case "double":
		if _, ok := v.(float64); !ok && v != nil {
			return nil, fmt.Errorf("a Double variable needs a number, got %s", raw)
		}
		return v, nil
	case "json", "object":
		if typ == "object" {
			if f, _ := tv.ValueInfo["serializationDataFormat"].(string); f != "application/json" {
				return nil, fmt.Errorf("an Object variable must be serialized as application/json (valueInfo.serializationDataFormat), got %q", f)
			}
		}
		s, ok := v.(string)
		if !ok {
			return v, nil // already a JSON value
		}
		var parsed any
		if err := json.Unmarshal([]byte(s), &parsed); err != nil {
			return nil, fmt.Errorf("a %s variable's value is not JSON text: %w", tv.Type, err)
		}
		return parsed, nil
	}
	return nil, fmt.Errorf("type %q is not supported (String, Boolean, Integer, Long, Short, Double, Date, Json, Object as application/json, Null)", tv.Type)
}

// maxExactInt is the largest integer a float64 holds exactly.
const maxExactInt = 1 << 53

// toTyped turns instance variables into Camunda typed variables: numbers
// that are whole become Integer (32-bit) or Long, others Double; lists and
// contexts become Json with the JSON text as value, as Camunda sends them.
func toTyped(vars map[string]any, only []string) (map[string]typedValue, error) {
	out := make(map[string]typedValue, len(vars))
	add := func(name string, v any) error {
		tv, err := typed(v)
		if err != nil {
			return fmt.Errorf("variable %q: %w", name, err)
		}
		out[name] = tv
		return nil
	}
	if only != nil {
		for _, name := range only {
			if v, ok := vars[name]; ok {
				if err := add(name, v); err != nil {
					return nil, err
				}
			}
		}
		return out, nil
	}
	for name, v := range vars {
		if err := add(name, v); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func typed(v any) (typedValue, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return typedValue{}, err
	}
	tv := typedValue{Value: raw, ValueInfo: map[string]any{}}
	switch x := v.(type) {
	case nil:
		tv.Type = "Null"
	case bool:
		tv.Type = "Boolean"
	case string:
		tv.Type = "String"
	case float64:
		switch {
		case x == math.Trunc(x) && math.Abs(x) <= math.MaxInt32:
			tv.Type = "Integer"
		case x == math.Trunc(x) && math.Abs(x) <= maxExactInt:
			tv.Type = "Long"
		default:
			tv.Type = "Double"
		}
	default:
		text, err := json.Marshal(string(raw))
		if err != nil {
			return typedValue{}, err
		}
		tv.Type, tv.Value = "Json", text
	}
	return tv, nil
}

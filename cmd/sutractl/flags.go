package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// varsFlag collects name=json pairs (--var, and the arguments of
// "variables set"). The value must be JSON: guessing that "42" meant a
// string or a number would set the wrong type on a live instance.
type varsFlag map[string]any

func (v varsFlag) String() string { return "" }

func (v varsFlag) Set(s string) error {
	name, value, ok := strings.Cut(s, "=")
	switch {
	case !ok || name == "":
		return fmt.Errorf("%q: want name=json", s)
	case !json.Valid([]byte(value)):
		return fmt.Errorf("the value of %s is not JSON (a string needs quotes: %s='\"text\"')", name, name)
	}
	v[name] = json.RawMessage(value)
	return nil
}

// mapFlag collects element mappings OLD=NEW (--map).
type mapFlag map[string]string

func (m mapFlag) String() string { return "" }

func (m mapFlag) Set(s string) error {
	from, to, ok := strings.Cut(s, "=")
	if !ok || from == "" || to == "" {
		return fmt.Errorf("%q: want OldElementId=NewElementId", s)
	}
	m[from] = to
	return nil
}

// optBool is a boolean filter that is either asked for (--open,
// --open=false) or absent.
type optBool struct {
	set, v bool
}

func (b *optBool) String() string { return "" }

func (b *optBool) IsBoolFlag() bool { return true }

func (b *optBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("want true or false")
	}
	b.set, b.v = true, v
	return nil
}

// optInt is an integer flag that commands tell given from absent.
type optInt struct {
	set bool
	v   int
}

func (i *optInt) String() string { return "" }

func (i *optInt) Set(s string) error {
	v, err := strconv.Atoi(s)
	if err != nil {
		return errors.New("want a whole number")
	}
	i.set, i.v = true, v
	return nil
}

// optString is a string flag that commands tell given from absent (an
// empty one included).
type optString struct {
	set bool
	v   string
}

func (s *optString) String() string { return "" }

func (s *optString) Set(v string) error {
	s.set, s.v = true, v
	return nil
}

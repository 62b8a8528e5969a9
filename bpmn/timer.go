package bpmn

import (
	"errors"
	"fmt"
	"strings"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/iso8601"
)

// timer parses a timerEventDefinition. Static values are checked here so that
// a malformed one is refused at deploy; expressions are checked when armed.
func (p *parser) timer(id string, def *node) (*Timer, error) {
	var t *Timer
	for _, k := range def.Kids {
		if k.Name.Space != nsBPMN {
			continue
		}
		var kind TimerKind
		switch k.Name.Local {
		case "timeDuration":
			kind = TimerDuration
		case "timeDate":
			kind = TimerDate
		case "timeCycle":
			kind = TimerCycle
		default:
			continue
		}
		if t != nil {
			return nil, invalid("timer %q has more than one of timeDuration, timeDate, timeCycle", id)
		}
		src := strings.TrimSpace(k.Text.String())
		if src == "" {
			return nil, invalid("timer %q has an empty %s", id, k.Name.Local)
		}
		v, err := compile(id, k.Name.Local, src)
		if err != nil {
			return nil, err
		}
		if v.IsStatic() {
			if err := checkTimerValue(kind, src); err != nil {
				return nil, fault.Wrap(fault.BPMNInvalid, bare{err}, "timer %q: %s", id, k.Name.Local)
			}
		}
		t = &Timer{Kind: kind, Value: v}
	}
	if t == nil {
		return nil, invalid("timer %q has no timeDuration, timeDate or timeCycle", id)
	}
	return t, nil
}

// checkStartTimer checks the value of timer start event s of the process as
// Zeebe does when the process is deployed: it is evaluated without
// variables, since no instance exists yet. A value that reads the clock is
// left to the deploy itself (engine.NextStart at the deploy time).
func checkStartTimer(s *Element) error {
	v := s.Timer.Value
	if v.IsStatic() || v.UsesClock() {
		return nil // a static value was checked with the timer
	}
	val, err := v.Eval(nil)
	if err == nil {
		switch text, ok := val.(string); {
		case ok:
			err = checkTimerValue(s.Timer.Kind, text)
		case val == nil:
			err = errors.New("evaluates to null, want ISO-8601 text")
		default:
			err = fmt.Errorf("evaluates to %T, want ISO-8601 text", val)
		}
	}
	if err != nil {
		return fault.Wrap(fault.BPMNInvalid, bare{err}, "timer start event %q, evaluated without variables as at deploy", s.ID)
	}
	return nil
}

// checkTimerValue reports whether text is a valid value for a timer of kind.
func checkTimerValue(kind TimerKind, text string) error {
	var err error
	switch kind {
	case TimerDuration:
		_, err = iso8601.ParseDuration(text)
	case TimerDate:
		_, err = iso8601.ParseDateTime(text)
	case TimerCycle:
		_, err = iso8601.ParseCycle(text)
	}
	return err
}

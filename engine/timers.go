package engine

import (
	"fmt"
	"time"

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/iso8601"
)

// due evaluates a timer armed now: when it fires and, for a cycle, its period
// and how many more firings follow the first (-1 = unbounded).
func (s *stepper) due(t *bpmn.Timer) (due time.Time, interval string, left int, err error) {
	v, err := t.Value.Eval(s.vars)
	if err != nil {
		return time.Time{}, "", 0, err
	}
	text, ok := v.(string)
	if !ok {
		return time.Time{}, "", 0, fmt.Errorf("evaluates to %T, want ISO-8601 text", v)
	}
	switch t.Kind {
	case bpmn.TimerDuration:
		d, err := iso8601.ParseDuration(text)
		if err != nil {
			return time.Time{}, "", 0, err
		}
		return d.AddTo(s.now), "", 0, nil
	case bpmn.TimerDate:
		at, err := iso8601.ParseDateTime(text)
		return at, "", 0, err
	default:
		c, err := iso8601.ParseCycle(text)
		if err != nil {
			return time.Time{}, "", 0, err
		}
		left = c.Repeat - 1
		if c.Repeat < 0 {
			left = -1
		}
		return c.Next(s.now), c.Interval.String(), left, nil
	}
}

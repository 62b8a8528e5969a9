package engine

import (
	"fmt"
	"time"

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/iso8601"
)

// due evaluates the timer of el armed now for token over ctx: when it fires
// and, for a cycle, its period and how many more firings follow the first
// (-1 = unbounded).
func (s *stepper) due(el *bpmn.Element, token string, ctx map[string]any) (due time.Time, interval string, left int, err error) {
	t := el.Timer
	v, err := t.Value.EvalIn(ctx, s.env(t.Value, el, token))
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

// rearm closes a fired non-interrupting timer of token i (-1 = process
// level) and, while its cycle has firings left, arms the next one under the
// same (token, element).
func (s *stepper) rearm(i int, el *bpmn.Element, a Armed) {
	s.closeWaits(i, el.ID)
	if a.Left == 0 {
		return
	}
	id, _ := s.armedOf(i)
	due, interval, _, err := s.due(el, id, s.view(i))
	if err != nil {
		// The value evaluated when the timer was first armed; variables changed
		// since. The cycle stops rather than the firing being lost.
		return
	}
	left := a.Left
	if left > 0 {
		left--
	}
	s.eff.Timers = append(s.eff.Timers, Timer{TokenID: id, Element: el.ID, DueAt: due, Repeat: left, Interval: interval})
	s.addArmed(i, Armed{Element: el.ID, Left: left})
}

package engine

import (
	"fmt"
	"time"

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/feel"
	"github.com/sutra-run/worker/iso8601"
)

// due evaluates the timer of el armed now for token over ctx: when it fires
// and, for a cycle, its period and how many more firings follow the first
// (-1 = unbounded).
func (s *stepper) due(el *bpmn.Element, token string, ctx map[string]any) (due time.Time, interval string, left int, err error) {
	t := el.Timer
	text, err := timerText(t, ctx, s.env(t.Value, el, token))
	if err != nil {
		return time.Time{}, "", 0, err
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

// timerText evaluates a timer's value, which must be ISO-8601 text.
func timerText(t *bpmn.Timer, vars map[string]any, env feel.Env) (string, error) {
	v, err := t.Value.EvalIn(vars, env)
	if err != nil {
		return "", err
	}
	text, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("evaluates to %T, want ISO-8601 text", v)
	}
	return text, nil
}

// NextStart is the schedule of el, a timer start event of the process (see
// bpmn.Process.TimerStarts), each firing of which starts an instance with
// Trigger{Kind: TriggerStart, Element: el.ID}. The store calls it when the
// definition version is deployed, with after = the deploy time and fired =
// 0, for the first due time; and after each firing, with after = the due
// time that fired (not the time it was processed, so that a late poll does
// not shift the schedule) and fired = the firings so far, for the next one.
// ok is false when the timer fires no more: a timeDate or timeDuration
// fires once, a timeCycle R<n> n times. As Zeebe does, the value is
// evaluated without variables, now() reading after. Due times may lie in
// the past (a timeDate already passed at deploy, a cycle catching up after
// an outage): the timer is then due at once. An error (code
// fault.BPMNInvalid) at deploy means the deploy must be refused.
func NextStart(el *bpmn.Element, after time.Time, fired int) (due time.Time, ok bool, err error) {
	if el == nil || el.Kind != bpmn.KindStart || el.Parent != nil || el.Timer == nil {
		return time.Time{}, false, fault.New(fault.NoStartEvent, "%s is not a timer start event of a process", elementName(el))
	}
	t := el.Timer
	if t.Kind != bpmn.TimerCycle && fired > 0 {
		return time.Time{}, false, nil
	}
	text, err := timerText(t, nil, feel.Env{Now: after})
	if err != nil {
		return time.Time{}, false, fault.Wrap(fault.BPMNInvalid, err, "timer start event %s", el.ID)
	}
	switch t.Kind {
	case bpmn.TimerDuration:
		d, err := iso8601.ParseDuration(text)
		if err != nil {
			return time.Time{}, false, fault.Wrap(fault.BPMNInvalid, err, "timer start event %s", el.ID)
		}
		return d.AddTo(after), true, nil
	case bpmn.TimerDate:
		at, err := iso8601.ParseDateTime(text)
		if err != nil {
			return time.Time{}, false, fault.Wrap(fault.BPMNInvalid, err, "timer start event %s", el.ID)
		}
		return at, true, nil
	}
	c, err := iso8601.ParseCycle(text)
	if err != nil {
		return time.Time{}, false, fault.Wrap(fault.BPMNInvalid, err, "timer start event %s", el.ID)
	}
	if c.Repeat >= 0 && fired >= c.Repeat {
		return time.Time{}, false, nil
	}
	next := c.Next(after)
	return next, !next.IsZero(), nil
}

func elementName(el *bpmn.Element) string {
	if el == nil {
		return "nil"
	}
	return el.ID
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

package lanes

import (
	"fmt"
	"strconv"

	"github.com/sutra-run/worker/claims"
	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/store"
)

// The step history: each kind names itself for the history row its step
// writes (store.StepCause, store.HistoryStep). The method is part of
// Cause, so a new kind cannot leave its steps unnamed.

// extras are what the step's transaction writes beside the step: the
// kind's writes and its history row, unless the history is off.
func extras(l *lane, r *Resume, c loaded, res OpResult) claims.Extras {
	x := r.Cause.writes(l, r, c, res)
	if !l.pool.cfg.NoStepHistory {
		x.History = r.Cause.history()
	}
	return x
}

func (c Message) history() store.StepCause {
	return store.StepCause{Kind: "relay", Detail: "message " + c.Name}
}

func (c Correlate) history() store.StepCause {
	return store.StepCause{Kind: "relay", Detail: fmt.Sprintf("message %s, correlation key %q", c.Message, c.CorrelationKey)}
}

func (c messageStart) history() store.StepCause {
	return store.StepCause{Kind: "start", Detail: fmt.Sprintf("message %s at %s", c.Message, c.element)}
}

func (c Start) history() store.StepCause {
	if c.Parent != nil {
		return store.StepCause{Kind: "child_start", Detail: "called by " + c.Parent.InstanceID}
	}
	return store.StepCause{Kind: "start", Detail: "start relay"}
}

func (c TaskOutcome) history() store.StepCause {
	d := fmt.Sprintf("%s at %s", c.Trigger.Kind, c.Trigger.Element)
	if c.Trigger.ErrorCode != "" {
		d += ", error " + c.Trigger.ErrorCode
	}
	return store.StepCause{Kind: "task", Detail: d}
}

func (c ChildEnded) history() store.StepCause {
	return store.StepCause{Kind: "child_ended", Detail: string(c.Trigger.Kind)}
}

func (c CancelChild) history() store.StepCause {
	return store.StepCause{Kind: "cancel_child", Detail: "cancelled by its parent"}
}

// history: a fire's deferrals that were not failures are its claim
// refusals (and the rarer fenced commit, full lane or stop).
func (c TimerFire) history() store.StepCause {
	return store.StepCause{Kind: "timer", Detail: "timer at " + c.Element, Bounces: &c.Deferred}
}

func (c ScheduledStart) history() store.StepCause {
	n := c.Timer.Attempts - c.Timer.Failures
	return store.StepCause{Kind: "timer_start", Detail: "schedule at " + c.Timer.Element + ", fire " + strconv.Itoa(c.fired()+1), Bounces: &n}
}

func (c ScheduledStart) fired() int {
	if c.Timer.Start == nil {
		return 0
	}
	return c.Timer.Start.Fired
}

func (c AdminStep) history() store.StepCause {
	switch c.Trigger.Kind {
	case engine.TriggerRetry:
		return store.StepCause{Kind: "admin_retry", Detail: "incident of token " + c.Trigger.TokenID}
	case engine.TriggerCancel:
		return store.StepCause{Kind: "admin_cancel"}
	}
	return store.StepCause{Kind: "admin_" + string(c.Trigger.Kind)}
}

func (c AdminOp) history() store.StepCause {
	name := c.Name
	if name == "" {
		name = "op"
	}
	return store.StepCause{Kind: "admin_" + name, Detail: c.Detail, Bounces: c.Bounces}
}

func (c AdminStart) history() store.StepCause {
	d := "latest version"
	if c.Version > 0 {
		d = "version " + strconv.Itoa(c.Version)
	}
	return store.StepCause{Kind: "admin_start", Detail: d}
}

// history: a broadcast claims nothing and writes no step.
func (c SignalBroadcast) history() store.StepCause { return store.StepCause{} }

func (c Signal) history() store.StepCause {
	if c.Definition != "" {
		return store.StepCause{Kind: "start", Detail: "signal " + c.Name + " at " + c.Element}
	}
	return store.StepCause{Kind: "signal", Detail: "signal " + c.Name + " at " + c.Element}
}

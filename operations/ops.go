// Package operations holds the administrative operations on instances, as steps
// that run through the lanes under the replica's admin owner
// (claims.AdminOwner): cancel, merge variables, migrate, retry an incident,
// start; and the runner of bulk migrations. Each claims the instance first
// and is refused, having read and written nothing, when another owner holds
// it.
package operations

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/lanes"
)

// Operation names, as metrics labels and in CLAIM_HELD codes
// (SUTRA.ADMIN.<OP>.CLAIM_HELD).
const (
	OpStart     = "start"
	OpCancel    = "cancel"
	OpVariables = "variables"
	OpMigrate   = "migrate"
	OpRetry     = "retry"
	OpModify    = "modify"
)

// ClaimHeld is the code of op's refusal when another owner holds the
// instance: SUTRA.ADMIN.<OP>.CLAIM_HELD.
func ClaimHeld(op string) string { return "SUTRA.ADMIN." + strings.ToUpper(op) + ".CLAIM_HELD" }

// Run hands res to the lanes' admin lane and waits for its outcome, for
// every protocol that serves admin operations: nil when the step applied;
// ClaimHeld(op) when another owner holds the instance (a race to retry,
// never a wait); fault.Unavailable when the lanes ask to retry later; the
// step's own error otherwise. ctx ending ends the wait, not the step.
func Run(ctx context.Context, d Dispatcher, op string, res lanes.Resume) error {
	done := make(chan lanes.Result, 1)
	res.Done = func(o lanes.Result) { done <- o }
	d.Dispatch(res)
	var o lanes.Result
	select {
	case o = <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	switch o.Kind {
	case lanes.Applied:
		return nil
	case lanes.Refused:
		return fault.New(ClaimHeld(op), "%s: retry — another step or admin call holds the instance right now (a race, not a failure)", fault.Reason(o.Err))
	case lanes.Retry:
		return fault.New(fault.Unavailable, "%s: retry", o.Reason)
	}
	if o.Err == nil {
		return fault.New(fault.NotWaiting, "%s", o.Kind.String())
	}
	return o.Err
}

// Cancel is the resume that cancels instance id: every wait closed, its
// children cancelled, its open incidents resolved.
func Cancel(id string) lanes.Resume {
	return lanes.Resume{Cause: lanes.AdminStep{InstanceID: id, Trigger: engine.Trigger{Kind: engine.TriggerCancel}}}
}

// Variables is the resume that merges vars into instance id's variables.
func Variables(id string, vars map[string]any) lanes.Resume {
	op := func(_ context.Context, _ lanes.Definitions, _ *bpmn.Process, in engine.Instance, _ time.Time) (lanes.OpResult, error) {
		st := in.State
		if st.Status != engine.StatusActive {
			return lanes.OpResult{}, notActive(in)
		}
		merged := make(map[string]any, len(st.Variables)+len(vars))
		maps.Copy(merged, st.Variables)
		maps.Copy(merged, vars)
		st.Variables = merged
		return lanes.OpResult{State: st}, nil
	}
	return lanes.Resume{Cause: lanes.AdminOp{InstanceID: id, Op: op, Name: OpVariables, Detail: strings.Join(slices.Sorted(maps.Keys(vars)), ", ")}}
}

// Migrate is the resume that moves instance id to version target of its
// definition, with mapping naming the elements whose ids changed. The
// preflight runs inside the claim: a token that cannot land refuses the
// whole migration with fault.MigrateUnreachable, nothing written.
func Migrate(id string, target int, mapping map[string]string) lanes.Resume {
	return migrate(id, target, mapping, nil)
}

// migrateItem is Migrate for an instance of a bulk migration: its earlier
// tries, each put off by a held claim (or an outage), are the step
// history's bounces.
func migrateItem(id string, target int, mapping map[string]string, tries int) lanes.Resume {
	return migrate(id, target, mapping, &tries)
}

func migrate(id string, target int, mapping map[string]string, bounces *int) lanes.Resume {
	op := func(ctx context.Context, defs lanes.Definitions, from *bpmn.Process, in engine.Instance, now time.Time) (lanes.OpResult, error) {
		to, err := defs.Process(ctx, from.Key(), target)
		if err != nil {
			return lanes.OpResult{}, err
		}
		st, eff, err := engine.Migrate(from, to, in, mapping, now)
		if err != nil {
			return lanes.OpResult{}, err
		}
		return lanes.OpResult{State: st, Effects: eff, Process: to, DefinitionVersion: target}, nil
	}
	return lanes.Resume{Cause: lanes.AdminOp{InstanceID: id, Op: op, Name: OpMigrate, Detail: fmt.Sprintf("to version %d", target), Bounces: bounces}}
}

// Retry is the resume that retries the incident of token on instance id:
// vars merged first, a failed task re-created with retries (0: the
// definition's), a failed expression evaluated again.
func Retry(id, token string, vars map[string]any, retries int) lanes.Resume {
	return lanes.Resume{Cause: lanes.AdminStep{InstanceID: id,
		Trigger: engine.Trigger{Kind: engine.TriggerRetry, TokenID: token, Variables: vars, Retries: retries}}}
}

// Modify is the resume that modifies instance id: the tokens m cancels
// end, vars are merged, tokens start at the elements m activates.
func Modify(id string, m engine.Modification, vars map[string]any) lanes.Resume {
	return lanes.Resume{Cause: lanes.AdminStep{InstanceID: id,
		Trigger: engine.Trigger{Kind: engine.TriggerModify, Modification: &m, Variables: vars}}}
}

// Start is the resume that starts an instance of definition at version (0:
// the latest) under id.
func Start(id, definition string, version int, vars map[string]any) lanes.Resume {
	return lanes.Resume{Cause: lanes.AdminStart{InstanceID: id, Definition: definition, Version: version, Variables: vars}}
}

func notActive(in engine.Instance) error {
	return fault.New(fault.NotWaiting, "instance %s is %s", in.ID, in.State.Status)
}

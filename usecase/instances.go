package usecase

import (
	"context"

	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/lanes"
	"github.com/sutra-run/worker/operations"
)

// The admin operations on one instance. Each runs as a step on the admin
// lane under the admin owner (package operations) and is answered once
// that step committed; the call gives its database connection back while
// it waits. Refusals are operations.Run's: operations.ClaimHeld(op) when
// another owner holds the instance (a race, never a wait),
// fault.Unavailable, and the step's own (fault.NotFound, fault.NotWaiting,
// fault.InstanceExists, ...).

// StartInstance starts instance id of definition at version (0: the
// latest) with vars.
func (u *UseCases) StartInstance(ctx context.Context, conn Conn, id, definition string, version int, vars map[string]any) error {
	return u.operate(ctx, conn, operations.OpStart, operations.Start(id, definition, version, vars))
}

// CancelInstance cancels instance id: every wait closed, its children
// cancelled, its open incidents resolved.
func (u *UseCases) CancelInstance(ctx context.Context, conn Conn, id string) error {
	return u.operate(ctx, conn, operations.OpCancel, operations.Cancel(id))
}

// SetVariables merges vars into instance id's variables.
func (u *UseCases) SetVariables(ctx context.Context, conn Conn, id string, vars map[string]any) error {
	return u.operate(ctx, conn, operations.OpVariables, operations.Variables(id, vars))
}

// MigrateInstance moves instance id to version target of its definition,
// mapping naming the elements whose ids changed.
func (u *UseCases) MigrateInstance(ctx context.Context, conn Conn, id string, target int, mapping map[string]string) error {
	return u.operate(ctx, conn, operations.OpMigrate, operations.Migrate(id, target, mapping))
}

// ModifyInstance cancels tokens and activates elements of instance id in
// one step, with vars merged (Operate's "modify instance").
func (u *UseCases) ModifyInstance(ctx context.Context, conn Conn, id string, m engine.Modification, vars map[string]any) error {
	return u.operate(ctx, conn, operations.OpModify, operations.Modify(id, m, vars))
}

func (u *UseCases) operate(ctx context.Context, conn Conn, op string, res lanes.Resume) error {
	// The step runs on the admin lane with the lanes' connections.
	conn.idle()
	return operations.Run(ctx, u.deps.Lanes, op, res)
}

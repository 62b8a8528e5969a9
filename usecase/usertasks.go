package usecase

import (
	"context"
	"encoding/json"

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/store"
)

// AssignUserTask assigns user task id to assignee (nil or "": unassigns)
// for caller (its user, "user:<caller>", records the change): at once; or,
// when the task has assigning listeners, recorded durably with its relay
// (deferred), to take effect once their jobs are done, the task assigning
// meanwhile. store.ErrNotFound: no such task, or it is assigning, updating
// or completing.
func (u *UseCases) AssignUserTask(ctx context.Context, caller string, id int64, assignee *string) (deferred bool, err error) {
	var to any
	if assignee != nil && *assignee != "" {
		to = *assignee
	}
	return u.changeUserTask(ctx, caller, id, bpmn.ListenerAssigning, store.TaskAssign, map[string]any{"assignee": to},
		func() error { return u.deps.Store.AssignUserTask(ctx, id, assignee) })
}

// UpdateUserTask changes the candidates, dates or priority of user task id,
// as AssignUserTask assigns: at once, or after its updating listeners.
func (u *UseCases) UpdateUserTask(ctx context.Context, caller string, id int64, changes engine.UserTaskChanges) (deferred bool, err error) {
	var vars map[string]any
	b, err := json.Marshal(changes)
	if err == nil {
		err = json.Unmarshal(b, &vars)
	}
	if err != nil {
		return false, err
	}
	return u.changeUserTask(ctx, caller, id, bpmn.ListenerUpdating, store.TaskUpdate, vars,
		func() error { return u.deps.Store.UpdateUserTask(ctx, id, changes) })
}

// changeUserTask runs a change of user task id: when the task has
// listeners of event, the change is recorded as outcome kind with vars, to
// take effect once their jobs are done; otherwise apply runs it at once.
func (u *UseCases) changeUserTask(ctx context.Context, caller string, id int64, event, kind string, vars map[string]any,
	apply func() error) (bool, error) {
	listened, err := u.taskListeners(ctx, id, event)
	switch {
	case err != nil:
		return false, err
	case listened:
		_, err := u.RecordTaskOutcome(ctx, Conn{}, store.TaskReport{TaskID: id, Worker: "user:" + caller,
			Kind: kind, Variables: vars, Human: true, Override: true})
		return err == nil, err
	}
	return false, apply()
}

// taskListeners reports whether user task id has listeners of event.
func (u *UseCases) taskListeners(ctx context.Context, id int64, event string) (bool, error) {
	t, err := u.deps.Store.UserTaskByID(ctx, id)
	if err != nil {
		return false, err
	}
	p, err := u.deps.Store.Process(ctx, t.DefinitionKey, t.DefinitionVersion)
	if err != nil {
		return false, err
	}
	el := p.Element(t.Element)
	return el != nil && len(el.ListenersOf(event)) > 0, nil
}

package usecase

import (
	"context"
	"time"

	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/store"
)

// The reads every protocol lists and searches, each bounded by its
// filter's limit (the protocol caps it), and each answering what Camunda
// 8's clients need besides the store's rows: the Zeebe keys of instances
// and definitions.

// InstanceSummary is one process instance as a search lists it.
type InstanceSummary struct {
	ID                string
	Key               int64
	Definition        string
	DefinitionVersion int
	DefinitionKey     int64
	// DefinitionName is its process's name ("" when it has none).
	DefinitionName string
	Status         string
	HasIncident    bool
	CreatedAt      time.Time
	// EndedAt is when it ended; nil while it is live.
	EndedAt *time.Time
}

// SearchProcessInstances lists one page of instances (SearchInstances)
// with their definitions' keys and names, and the cursor of the next page
// ("" on the last).
func (u *UseCases) SearchProcessInstances(ctx context.Context, f store.InstanceFilter) ([]InstanceSummary, string, error) {
	p, err := u.SearchInstances(ctx, f)
	if err != nil {
		return nil, "", err
	}
	out := make([]InstanceSummary, 0, len(p.Instances))
	for _, in := range p.Instances {
		s := InstanceSummary{ID: in.ID, Key: in.ZeebeKey, Definition: in.DefinitionKey, DefinitionVersion: in.DefinitionVersion,
			Status: in.Status, HasIncident: in.HasIncident, CreatedAt: in.CreatedAt}
		if s.EndedAt = in.EndedAt; s.EndedAt == nil && !engine.Status(in.Status).Live() {
			end := in.UpdatedAt // a row written before the trigger of migration 0035
			s.EndedAt = &end
		}
		if err := u.keyAndName(ctx, &s); err != nil {
			return nil, "", err
		}
		out = append(out, s)
	}
	return out, p.Next, nil
}

// ProcessInstance reads the instance whose Zeebe key is key.
// store.ErrNotFound when there is none.
func (u *UseCases) ProcessInstance(ctx context.Context, key int64) (InstanceSummary, error) {
	k, err := u.deps.Store.InstanceByKey(ctx, key, false)
	if err != nil {
		return InstanceSummary{}, err
	}
	t, err := u.deps.Store.InstanceTimesOf(ctx, k.ID)
	if err != nil {
		return InstanceSummary{}, err
	}
	s := InstanceSummary{ID: k.ID, Key: k.Key, Definition: k.Definition, DefinitionVersion: k.DefinitionVersion, DefinitionKey: k.DefinitionKey,
		Status: k.Status, HasIncident: t.HasIncident, CreatedAt: t.CreatedAt}
	if !engine.Status(k.Status).Live() {
		end := t.UpdatedAt
		s.EndedAt = &end
	}
	return s, u.keyAndName(ctx, &s)
}

// keyAndName sets s's definition key (when unset) and name.
func (u *UseCases) keyAndName(ctx context.Context, s *InstanceSummary) error {
	if s.DefinitionKey == 0 {
		k, err := u.deps.Store.InstanceKeys(ctx, s.ID, false)
		if err != nil {
			return err
		}
		s.DefinitionKey = k.DefinitionKey
	}
	p, err := u.deps.Store.Process(ctx, s.Definition, s.DefinitionVersion)
	if err != nil {
		return err
	}
	s.DefinitionName = p.Name
	return nil
}

// KeyedIncident is an incident with its instance's Zeebe keys (zero when
// the instance is gone).
type KeyedIncident struct {
	store.Incident
	InstanceKey, DefinitionZeebeKey int64
}

// SearchIncidents lists one page of incidents (Incidents) with their
// instances' keys.
func (u *UseCases) SearchIncidents(ctx context.Context, f store.IncidentFilter) ([]KeyedIncident, error) {
	list, err := u.Incidents(ctx, f)
	if err != nil {
		return nil, err
	}
	out := make([]KeyedIncident, len(list))
	for i, inc := range list {
		out[i].Incident = inc
		k, err := u.deps.Store.InstanceKeys(ctx, inc.InstanceID, false)
		switch {
		case err == nil:
			out[i].InstanceKey, out[i].DefinitionZeebeKey = k.Key, k.DefinitionKey
		case err != store.ErrNotFound:
			return nil, err
		}
	}
	return out, nil
}

// KeyedUserTask is a user task with its instance's Zeebe keys and the
// names its definition gives it and its process.
type KeyedUserTask struct {
	store.UserTask
	InstanceKey, DefinitionZeebeKey int64
	Name, ProcessName               string
}

// SearchUserTasks lists one page of user tasks (store.ListUserTasks).
func (u *UseCases) SearchUserTasks(ctx context.Context, f store.UserTaskFilter) ([]KeyedUserTask, error) {
	list, err := u.deps.Store.ListUserTasks(ctx, f)
	if err != nil {
		return nil, err
	}
	out := make([]KeyedUserTask, len(list))
	for i, t := range list {
		if out[i], err = u.keyUserTask(ctx, t); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// UserTask reads user task id. store.ErrNotFound when there is none.
func (u *UseCases) UserTask(ctx context.Context, id int64) (KeyedUserTask, error) {
	t, err := u.deps.Store.UserTaskByID(ctx, id)
	if err != nil {
		return KeyedUserTask{}, err
	}
	return u.keyUserTask(ctx, t)
}

func (u *UseCases) keyUserTask(ctx context.Context, t store.UserTask) (KeyedUserTask, error) {
	out := KeyedUserTask{UserTask: t}
	k, err := u.deps.Store.InstanceKeys(ctx, t.InstanceID, false)
	if err != nil {
		return out, err
	}
	out.InstanceKey, out.DefinitionZeebeKey = k.Key, k.DefinitionKey
	p, err := u.deps.Store.Process(ctx, t.DefinitionKey, t.DefinitionVersion)
	if err != nil {
		return out, err
	}
	out.ProcessName = p.Name
	if el := p.Element(t.Element); el != nil {
		out.Name = el.Name
	}
	return out, nil
}

// InstanceVariables reads the variables of the instance whose Zeebe key is
// key. store.ErrNotFound when there is none.
func (u *UseCases) InstanceVariables(ctx context.Context, key int64) (store.KeyedInstance, error) {
	return u.deps.Store.InstanceByKey(ctx, key, true)
}

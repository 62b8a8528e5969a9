package usecase

import (
	"context"

	"github.com/sutra-run/worker/store"
)

// Search and read: what every protocol reads of definitions, decisions,
// instances and incidents, in the store's types (each protocol maps them
// to its own). None claims anything: an instance read while a step holds
// it shows its last committed step.

// Definitions lists every definition key with its versions.
func (u *UseCases) Definitions(ctx context.Context) ([]store.DefinitionVersions, error) {
	return u.deps.Store.ListDefinitions(ctx)
}

// Decisions lists deployed decisions by id, then version, a page at a
// time.
func (u *UseCases) Decisions(ctx context.Context, f store.DecisionFilter) ([]store.DecisionVersion, error) {
	return u.deps.Store.ListDecisions(ctx, f)
}

// Instance reads an instance with its waits, incidents and claim.
// store.ErrNotFound when there is none.
func (u *UseCases) Instance(ctx context.Context, id string) (store.InstanceDetail, error) {
	return u.deps.Store.Instance(ctx, id)
}

// SearchInstances pages through the instances f selects.
func (u *UseCases) SearchInstances(ctx context.Context, f store.InstanceFilter) (store.InstancePage, error) {
	return u.deps.Store.ListInstances(ctx, f)
}

// CountInstances counts the instances an instance list's filter matches,
// exactly up to store.InstanceCountCap of them, estimated past it.
func (u *UseCases) CountInstances(ctx context.Context, f store.InstanceFilter) (store.InstanceCount, error) {
	return u.deps.Store.CountInstances(ctx, f)
}

// Incidents pages through the incidents f selects.
func (u *UseCases) Incidents(ctx context.Context, f store.IncidentFilter) ([]store.Incident, error) {
	return u.deps.Store.ListIncidents(ctx, f)
}

// ElementStatistics counts, for each element of definition key@version,
// its active instances' tokens and open incidents there, over the next
// limit active instances after the cursor after (store.ElementStatistics).
// store.ErrNotFound when the version does not exist.
func (u *UseCases) ElementStatistics(ctx context.Context, key string, version int, after string, limit int) (
	elements []store.ElementCount, walked int, next string, err error) {
	// The version must exist: an unknown one is not an empty count.
	if _, err := u.deps.Store.DefinitionXML(ctx, key, version); err != nil {
		return nil, 0, "", err
	}
	return u.deps.Store.ElementStatistics(ctx, key, version, after, limit)
}

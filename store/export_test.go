package store

import (
	"context"
	"io/fs"
)

// MigrateWith migrates with the migrations of extra (under migrations/)
// beside the embedded ones.
func (s *Store) MigrateWith(ctx context.Context, extra fs.FS) error { return s.migrate(ctx, extra) }

// OnOutcomeGroups sets what hears the size of each group of outcomes before
// its statement runs, and the number of outcomes waiting after each joins;
// set before any outcome is recorded.
func (s *Store) OnOutcomeGroups(grouped func(n int), joined func(waiting int)) {
	s.outcomes.grouped, s.outcomes.joined = grouped, joined
}

// OnLockGroups is OnOutcomeGroups for the fetches of created tasks
// (LockCreated).
func (s *Store) OnLockGroups(grouped func(n int), joined func(waiting int)) {
	s.locks.grouped, s.locks.joined = grouped, joined
}

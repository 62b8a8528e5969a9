package store

import (
	"context"
	"fmt"
)

// Durability is whether the server's commits wait for a synchronous
// standby before they return: only then does a commit the worker acks or
// answers survive the loss of the primary.
type Durability struct {
	// SynchronousCommit is synchronous_commit as the worker's sessions
	// see it; StandbyNames is synchronous_standby_names.
	SynchronousCommit, StandbyNames string
	// SyncStandbys is the number of standbys streaming as sync or quorum
	// (pg_stat_replication), -1 when the role may not read it (it needs
	// pg_read_all_stats or to be a superuser).
	SyncStandbys int
}

// Synchronous reports whether commits wait for a standby: a standby is
// named and synchronous_commit is remote_write, on or remote_apply.
func (d Durability) Synchronous() bool {
	switch d.SynchronousCommit {
	case "on", "remote_write", "remote_apply":
		return d.StandbyNames != ""
	}
	return false
}

// Blocked reports whether commits wait for a synchronous standby and none
// is streaming: PostgreSQL holds every commit until one is back.
func (d Durability) Blocked() bool { return d.Synchronous() && d.SyncStandbys == 0 }

// String says it in a few words, for /readyz and the logs.
func (d Durability) String() string {
	switch {
	case d.Blocked():
		return fmt.Sprintf("commits wait for a synchronous standby (synchronous_standby_names %q) and none is streaming: they block until one is back", d.StandbyNames)
	case d.Synchronous() && d.SyncStandbys < 0:
		return fmt.Sprintf("commits wait for a synchronous standby (synchronous_standby_names %q, synchronous_commit %s)", d.StandbyNames, d.SynchronousCommit)
	case d.Synchronous():
		return fmt.Sprintf("commits wait for a synchronous standby (%d streaming, synchronous_commit %s)", d.SyncStandbys, d.SynchronousCommit)
	case d.StandbyNames == "":
		return "commits do not wait for a standby (synchronous_standby_names is empty): a failover can lose acked work"
	}
	return fmt.Sprintf("commits do not wait for a standby (synchronous_commit %s): a failover can lose acked work", d.SynchronousCommit)
}

// Durability reads whether commits wait for a synchronous standby.
func (s *Store) Durability(ctx context.Context) (Durability, error) {
	var d Durability
	err := s.pool.QueryRow(ctx, `SELECT current_setting('synchronous_commit'), current_setting('synchronous_standby_names'),
		(SELECT CASE WHEN count(*) > 0 AND bool_and(sync_state IS NULL) THEN -1
			ELSE count(*) FILTER (WHERE sync_state IN ('sync', 'quorum')) END FROM pg_stat_replication)`).
		Scan(&d.SynchronousCommit, &d.StandbyNames, &d.SyncStandbys)
	return d, translate(err, "reading synchronous replication settings")
}

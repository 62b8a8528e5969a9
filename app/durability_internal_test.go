package app

import (
	"strings"
	"testing"

	"github.com/sutra-run/worker/store"
)

// Commits that wait for a synchronous standby that is gone never return:
// the worker says so on /readyz instead of looking ready, while
// sutra_database_synchronous still says commits wait for a standby.
func TestADatabaseThatHoldsEveryCommitMakesTheWorkerNotReady(t *testing.T) {
	var d durabilityWatch
	if d.blocked() != nil || d.synchronous() != 0 || !strings.Contains(d.detail(), "not read yet") {
		t.Fatalf("before the first reading: blocked %v, synchronous %v, %q", d.blocked(), d.synchronous(), d.detail())
	}
	d.last.Store(&store.Durability{SynchronousCommit: "on", StandbyNames: "ANY 1 (pgautofailover_standby_2)", SyncStandbys: 1})
	if d.blocked() != nil || d.synchronous() != 1 || !strings.Contains(d.detail(), "1 streaming") {
		t.Errorf("a streaming synchronous standby: blocked %v, synchronous %v, %q", d.blocked(), d.synchronous(), d.detail())
	}
	d.last.Store(&store.Durability{SynchronousCommit: "on", StandbyNames: "ANY 1 (pgautofailover_standby_2)", SyncStandbys: 0})
	if err := d.blocked(); err == nil || err.Error() != "the database holds every commit until a synchronous standby is back" || d.synchronous() != 1 {
		t.Errorf("no standby streaming: blocked %v, synchronous %v", err, d.synchronous())
	}
	d.last.Store(&store.Durability{SynchronousCommit: "on"})
	if d.blocked() != nil || d.synchronous() != 0 || !strings.Contains(d.detail(), "can lose acked work") {
		t.Errorf("no standby named: blocked %v, synchronous %v, %q", d.blocked(), d.synchronous(), d.detail())
	}
}

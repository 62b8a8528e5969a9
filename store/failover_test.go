package store_test

import (
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/store"
)

// A primary that was demoted under the pool answers its connections'
// writes with SQLSTATE 25006: an outage, never a permanent failure, and the
// pool must not hand such a connection out again.
func TestAReadOnlyServerIsAnOutageAndItsConnectionIsDropped(t *testing.T) {
	t.Parallel()
	env, ctx, _ := open(t)
	st, err := store.Open(ctx, env.Config.DatabaseURL, store.Options{MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var pid int
	if err := st.Pool().QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	// The pool's one connection now talks to a server that refuses writes.
	if _, err := st.Pool().Exec(ctx, "SET default_transaction_read_only = on"); err != nil {
		t.Fatal(err)
	}
	_, err = st.AcquireLease(ctx, "failover", "r1", time.Minute)
	if fault.Code(err) != fault.Unavailable || !errors.Is(err, store.ErrReadOnly) {
		t.Fatalf("a write on a read-only server = %v, want %s and ErrReadOnly", err, fault.Unavailable)
	}
	var next int
	if err := st.Pool().QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&next); err != nil {
		t.Fatal(err)
	}
	if next == pid {
		t.Fatal("the pool handed out the read-only connection again")
	}
	if ok, err := st.AcquireLease(ctx, "failover", "r1", time.Minute); err != nil || !ok {
		t.Fatalf("a write on a new connection = %v, %v", ok, err)
	}
}

func TestPingTellsAReadOnlyServerFromOneThatTakesWrites(t *testing.T) {
	t.Parallel()
	env, ctx, st := open(t)
	if err := st.Ping(ctx); err != nil {
		t.Fatalf("ping of the primary: %v", err)
	}
	u, _ := url.Parse(env.Config.DatabaseURL)
	q := u.Query()
	q.Set("default_transaction_read_only", "on")
	u.RawQuery = q.Encode()
	ro, err := store.Open(ctx, u.String(), store.Options{MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	pid := func() (pid int) {
		if err := ro.Pool().QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			t.Fatal(err)
		}
		return pid
	}
	before := pid()
	if err := ro.Ping(ctx); fault.Code(err) != fault.Unavailable || !errors.Is(err, store.ErrReadOnly) {
		t.Fatalf("ping of a read-only server = %v, want %s and ErrReadOnly", err, fault.Unavailable)
	}
	if pid() == before {
		t.Fatal("the pool kept the connection to the read-only server")
	}
}

func TestDurabilityTellsWhetherCommitsWaitForAStandby(t *testing.T) {
	t.Parallel()
	env, ctx, st := open(t)
	d, err := st.Durability(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The test server has no standby: its commits are the primary's alone.
	if d.Synchronous() || d.StandbyNames != "" || d.SyncStandbys != 0 || d.Blocked() {
		t.Fatalf("the test server: %+v (%s), want no synchronous standby", d, d)
	}
	u, _ := url.Parse(env.Config.DatabaseURL)
	q := u.Query()
	q.Set("synchronous_commit", "local")
	u.RawQuery = q.Encode()
	local, err := store.Open(ctx, u.String(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	if d, err = local.Durability(ctx); err != nil || d.SynchronousCommit != "local" {
		t.Fatalf("synchronous_commit set to local: %+v, %v", d, err)
	}
	for _, tt := range []struct {
		d                    store.Durability
		synchronous, blocked bool
	}{
		{store.Durability{SynchronousCommit: "on", StandbyNames: "ANY 1 (pgautofailover_standby_2)", SyncStandbys: 1}, true, false},
		{store.Durability{SynchronousCommit: "remote_apply", StandbyNames: "s1", SyncStandbys: -1}, true, false},
		{store.Durability{SynchronousCommit: "on", StandbyNames: "s1", SyncStandbys: 0}, true, true},
		{store.Durability{SynchronousCommit: "local", StandbyNames: "s1", SyncStandbys: 1}, false, false},
		{store.Durability{SynchronousCommit: "off", StandbyNames: "s1", SyncStandbys: 1}, false, false},
		{store.Durability{SynchronousCommit: "on", StandbyNames: "", SyncStandbys: 0}, false, false},
	} {
		if tt.d.Synchronous() != tt.synchronous || tt.d.Blocked() != tt.blocked {
			t.Errorf("%+v: synchronous %v, blocked %v; want %v, %v", tt.d, tt.d.Synchronous(), tt.d.Blocked(), tt.synchronous, tt.blocked)
		}
	}
}

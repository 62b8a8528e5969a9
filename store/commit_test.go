package store_test

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sutra-run/worker/internal/testkit"
)

// Claims skip the synchronous WAL flush; the step commit must not, because
// the relay is acked once it returns.
func TestStepCommitIsDurableWhileClaimsAreNot(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	ctx := testkit.Ctx(t)
	cfg, err := pgxpool.ParseConfig(env.Config.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off" // as store.Open sets it
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	// The fence raises for a missing instance, so read the setting after it
	// in a batch whose fence matches: a row claimed by "me" at version 0.
	if _, err := conn.Exec(ctx, `INSERT INTO definitions (key, version, checksum, xml) VALUES ('d', 1, 'c', '');
		INSERT INTO instances (id, definition_key, definition_version, status, owner, claimed_at) VALUES ('i', 'd', 1, 'active', 'me', now())`); err != nil {
		t.Fatal(err)
	}
	var inCommit, after string
	b := &pgx.Batch{}
	b.Queue("SELECT sutra_commit('i', 'me', 0, 'active', '{}', '{}')")
	b.Queue("SELECT current_setting('synchronous_commit')").QueryRow(func(r pgx.Row) error { return r.Scan(&inCommit) })
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, "SELECT current_setting('synchronous_commit')").Scan(&after); err != nil {
		t.Fatal(err)
	}
	if inCommit != "on" || after != "off" {
		t.Fatalf("synchronous_commit in the commit %q, after it %q; want on, off", inCommit, after)
	}
}

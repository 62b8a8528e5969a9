package store

import (
	"context"
	"embed"
	"fmt"
	"hash/fnv"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/sutra-run/worker/fault"
)

//go:embed migrations/*.sql
var migrations embed.FS

// extraMigrations, when set, adds migrations to the embedded ones: the
// upgrade test's contract step (migrate_upgradetest.go).
var extraMigrations fs.FS

// contractHeader starts the line by which a migration declares itself a
// contract step (docs/operations.md, "Upgrading"):
//
//	-- sutra:contract min-schema=32
//
// It is applied only when every live replica registered a schema version of
// at least min-schema; a replica that registered none (a release before
// v0.2.0) counts as older than any.
const contractHeader = "-- sutra:contract"

// A migration is one file of migrations/.
type migration struct {
	Name    string
	Version int
	Body    string
	// MinSchema is, for a contract step, the oldest schema version a live
	// replica may run for it to be applied; 0 for an expand step.
	MinSchema int
}

// loadMigrations reads the embedded migrations and those of extra (nil:
// none) in the order of their versions.
func loadMigrations(extra fs.FS) ([]migration, error) {
	var ms []migration
	for _, fsys := range []fs.FS{migrations, extra} {
		if fsys == nil {
			continue
		}
		files, err := fs.Glob(fsys, "migrations/*.sql")
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			body, err := fs.ReadFile(fsys, f)
			if err != nil {
				return nil, err
			}
			m, err := parseMigration(strings.TrimPrefix(f, "migrations/"), string(body))
			if err != nil {
				return nil, err
			}
			ms = append(ms, m)
		}
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	for i := 1; i < len(ms); i++ {
		if ms[i].Version == ms[i-1].Version {
			return nil, fmt.Errorf("migrations %s and %s share a version", ms[i-1].Name, ms[i].Name)
		}
	}
	return ms, nil
}

func parseMigration(name, body string) (migration, error) {
	v, err := strconv.Atoi(strings.SplitN(name, "_", 2)[0])
	if err != nil {
		return migration{}, fmt.Errorf("migration %s: name must start with a number", name)
	}
	m := migration{Name: name, Version: v, Body: body}
	for _, line := range strings.Split(body, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), contractHeader)
		if !ok {
			continue
		}
		arg, ok := strings.CutPrefix(strings.TrimSpace(rest), "min-schema=")
		if m.MinSchema, err = strconv.Atoi(arg); !ok || err != nil || m.MinSchema <= 0 {
			return migration{}, fmt.Errorf("migration %s: want %q, got %q", name, contractHeader+" min-schema=N", strings.TrimSpace(line))
		}
	}
	return m, nil
}

// SchemaVersion is the version of the newest migration this build carries:
// the schema version a replica registers.
func SchemaVersion() int {
	ms, err := loadMigrations(extraMigrations)
	if err != nil || len(ms) == 0 {
		return 0 // the migration files are checked by Migrate and by store's tests
	}
	return ms[len(ms)-1].Version
}

// Migrate applies the embedded migrations that are not applied yet, under an
// advisory lock so that replicas starting together apply each exactly once.
//
// A contract step is applied only when no live replica is older than it
// allows (olderReplicas). Otherwise it is left for a later Migrate and the
// migrations after it are applied all the same (a release's code never
// depends on its own contract steps); Migrate then returns an error coded
// fault.MigrateContractWaiting that names the step and the replicas.
func (s *Store) Migrate(ctx context.Context) error { return s.migrate(ctx, extraMigrations) }

func (s *Store) migrate(ctx context.Context, extra fs.FS) error {
	ms, err := loadMigrations(extra)
	if err != nil {
		return err
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return translate(err, "acquiring connection for migrations")
	}
	defer conn.Release()
	var schema string
	if err := conn.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		return translate(err, "reading current schema")
	}
	h := fnv.New64a()
	h.Write([]byte("sutra.migrate." + schema))
	lock := int64(h.Sum64())
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lock); err != nil {
		return translate(err, "taking migration lock")
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", lock)

	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return translate(err, "creating schema_migrations")
	}
	if err := repairRenamedMigrations(ctx, conn.Conn()); err != nil {
		return err
	}
	var waiting []string
	for _, m := range ms {
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			var done bool
			if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1)", m.Version).Scan(&done); err != nil || done {
				return err
			}
			if m.MinSchema > 0 {
				older, err := olderReplicas(ctx, tx, m.MinSchema)
				if err != nil {
					return err
				}
				if len(older) > 0 {
					waiting = append(waiting, fmt.Sprintf("%s waits for %s (it needs schema %d or newer)", m.Name, strings.Join(older, ", "), m.MinSchema))
					return nil
				}
			}
			if _, err := tx.Exec(ctx, m.Body); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version) VALUES ($1)", m.Version)
			return err
		})
		if err != nil {
			return translate(err, "applying migration "+m.Name)
		}
	}
	if len(waiting) > 0 {
		return fault.New(fault.MigrateContractWaiting, "contract step not applied while older replicas run: %s; the other migrations are applied",
			strings.Join(waiting, "; "))
	}
	return nil
}

// repairRenamedMigrations recognises a migration a database applied under
// a name it no longer has, and records it under its name of today.
//
// 0028_definition_version_tags.sql was named 0029 until commit 8728ef4. A
// database migrated by a build of before then recorded version 29 for it
// and has no 28; every build that carries 0029_task_updating.sql applies
// 0028 first, so version 29 without 28 can only be the old name. Recording
// it as 28 lets 0029_task_updating apply next, as it never did.
func repairRenamedMigrations(ctx context.Context, conn *pgx.Conn) error {
	_, err := conn.Exec(ctx, `UPDATE schema_migrations SET version = 28
		 WHERE version = 29 AND NOT EXISTS (SELECT 1 FROM schema_migrations WHERE version = 28)
		   AND EXISTS (SELECT 1 FROM information_schema.columns
		                WHERE table_schema = current_schema() AND table_name = 'definitions' AND column_name = 'version_tag')`)
	return translate(err, "repairing migration 0028_definition_version_tags.sql, applied as 0029")
}

// olderReplicas names the live replicas (registered under a lease
// "replica/<id>") whose schema version is below minSchema, or who
// registered none: a release before v0.2.0, the oldest of all.
func olderReplicas(ctx context.Context, q pgx.Tx, minSchema int) ([]string, error) {
	rows, err := q.Query(ctx, `
		SELECT substr(l.name, length('replica/') + 1) || ' (' || COALESCE(v.release || ', schema ' || v.schema_version, 'a release before v0.2.0') || ')'
		  FROM leases l LEFT JOIN replica_versions v ON v.holder = l.holder
		 WHERE starts_with(l.name, 'replica/') AND l.expires_at > now()
		   AND (v.schema_version IS NULL OR v.schema_version < $1)
		 ORDER BY l.name`, minSchema)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

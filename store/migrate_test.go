package store_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/store"
)

// migrationChecksums holds the sha256 of every migration file on main. A
// migration, once on main, never changes name or content: databases have
// applied it under that name (issue 38: 8728ef4 renamed 0029 to 0028 and
// every database migrated before it was stuck). A new migration is added
// here; a changed one is a new migration instead.
var migrationChecksums = map[string]string{
	"0001_init.sql":                           "49861c8bb5e0e32134f1218bc39f7b60dbf83521450f8b5fb4069ecd96470167",
	"0002_timers_sweep_buffering.sql":         "70df02478bbfa3869067db1c6ebdfea64c9c62f69469322eb8291c78fac9fc99",
	"0003_task_headers.sql":                   "1c4b87d5eb99268e2b7a076be29ee5922f3b3ad0d47bb461456c75706649f3f7",
	"0004_commit_durable.sql":                 "1bda3b5d7d9e882652a3be78549119464a44d042b754f1fdeecc9e257b740ddc",
	"0005_outbox_publisher.sql":               "abcf47e62a2bdac2f59382634a1c84d572f42f354298c8b39355588583d01231",
	"0006_pull_tasks.sql":                     "26b803f80c139bfd458bdd56e5bd58dbcb2a971fa3cb5440eea1b3df8060e8fb",
	"0007_bpmn_coverage.sql":                  "ef99e4b10f45b5e20925cde31b46e6be0e0a3f58f7d693648185b2175b1404e1",
	"0008_admin.sql":                          "b7caa70aefa0a9733a4bd5745a279189a7a0b1bc17427495e3ba0e5ba8f61f9a",
	"0009_timer_starts.sql":                   "a36b8884e8ab0f0941bac8a3eb45f85cb1d29f0187ecf82394c9054f386ed588",
	"0010_instances_fillfactor.sql":           "8ee3866806c9ee19b91b632d5c099e792572990ad37bd9706f34af50b2e0b8a4",
	"0011_batch_fence.sql":                    "0debf811f7be93af957deccd95d9f998e2671e504b05055498c027d8edeb212d",
	"0012_task_fetch.sql":                     "a7be4dc2d156ed0125e794ffa80161514cbf2ef9f55bc12efdc36ee0a23e7b3b",
	"0013_buffered_look.sql":                  "6744ceaacbb6af5d43928b4825195ed42b8592cf2cf68225d1c1835ecc91e1e9",
	"0014_outbox_instance_probes.sql":         "ac74ca886c400fc0eaa1227ad6fddb0cceb4666afdc7b29797ca09b5c72e5ceb",
	"0015_deployed_files.sql":                 "1f9e751f2dc03e24fd043b7811ddbb3fca42c2e54c96ed745092c4f9d62d3cd2",
	"0016_outbox_classes_parked.sql":          "8328214c6f4af3b3318728f4c5be8813b9eea5b4e35a9ef1644658633faff1ab",
	"0017_timer_incidents_relay_attempts.sql": "ca9404e31c915b5683ecddfeaf863cc73fdb0930362d74e94c60095b1b23666b",
	"0018_buffered_found_by_id.sql":           "927a12111ddede65eaceaf49d8512a0880ee07a8b02216329616b45c1a57d1e8",
	"0019_zeebe_keys.sql":                     "c8955351f78f75180d0af68e56f9e4e307f75cf68a464bc707d44f18f491b85f",
	"0020_decisions.sql":                      "79450c03072817d99a93eb061f32430cff5baa27178102ce119589dffe76e751",
	"0021_decision_keys.sql":                  "e61081c943d3eb1da8372ab0c21ba2732f5ac31f6aa292bc23f65577e832e30b",
	"0022_console_indexes.sql":                "354467bac81abce82cc8be342887ca14bfcc863759243a90df6bfe1ee3e38722",
	"0023_incident_jobs.sql":                  "d70218fddb1149e838240b8687b1a6654f1258eb17d6a22e882022f08f928e82",
	"0024_signals.sql":                        "88ec8a0cc5ff02a3a6bd85eff1bf0591e75840e2d025d0e49bd9716f829c0cc7",
	"0025_step_history.sql":                   "cd1461e5aa123a46b284ecff64b309517851bd20ca5f3e1c4afd86249aeb7cca",
	"0026_claims_table.sql":                   "8fd07e6c463a6751ddd099f78578746e819a976bc1d2cea222157c12a8961811",
	"0027_task_assigning.sql":                 "576ed00130a46e67e247dc977a5e9f641ca7311e82889f68cbe60286b43db318",
	"0028_definition_version_tags.sql":        "157b8afd9f4fde1348b6736deb773699cd6028524844adb03f2f34bc9b78aef4",
	"0029_task_updating.sql":                  "71d8d627d670de2f3fe93ff4bd0c81839434c7d9ad28e2352403d0e6e82a4365",
	"0030_step_history_passed.sql":            "cbc3ea6e8ee6a36d554bfafd3354404cbb9d4d73be268671ce752e0faa69011f",
	"0031_instance_cancelling.sql":            "1d1eb55a70137a0f8e81ea3a5927e2aac0c604b7c678ada8a26da6ade226d0bf",
	"0032_replica_versions.sql":               "e4493b186ed605994d81561eab7f1eb4e1241edbf247793e0aab91d912424178",
	"0033_console_operations.sql":             "3210abb0ab01332b2a5c82bc09cb4636b14f3f71ffb1b58f1e48b7c6e4d4474c",
	"0034_day_partitions.sql":                 "dc0072b6e495d58c07ccd87142a4a00b330424a1720ba11b78e12ab5de0f945b",
	"0035_instance_list_order.sql":            "596c318b59ee9cc67f9e41c6972d03ff84ce98469e7311b491fbb9e2c43cfd1f",
	"0036_day_partitions_contract.sql":        "42526796da5d6c9e3029c64dcaa69621c1bf9f4709e655909fc184f8e39b5f8d",
}

func TestMigrationFilesNeverChange(t *testing.T) {
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(body)
		name := filepath.Base(f)
		names = append(names, name)
		want, ok := migrationChecksums[name]
		switch {
		case !ok:
			t.Errorf("%s is not in migrationChecksums: add it with its checksum %s (a renamed migration is a new one: databases applied the old name)", name, hex.EncodeToString(sum[:]))
		case want != hex.EncodeToString(sum[:]):
			t.Errorf("%s changed (sha256 %s, was %s): a migration on main never changes; write a new one", name, hex.EncodeToString(sum[:]), want)
		}
	}
	for name := range migrationChecksums {
		if !slices.Contains(names, name) {
			t.Errorf("migration %s is gone (renamed or deleted): databases applied it under that name", name)
		}
	}
}

// recreate empties env's schema: a test then builds the state it needs.
func recreate(t *testing.T, ctx context.Context, env *testkit.Env) {
	t.Helper()
	if _, err := env.DB.Exec(ctx, fmt.Sprintf("DROP SCHEMA %[1]s CASCADE; CREATE SCHEMA %[1]s", env.Schema)); err != nil {
		t.Fatal(err)
	}
}

// applyAs applies migration files in the order given, recording each under
// the version given, as a build of that time did.
func applyAs(t *testing.T, ctx context.Context, db *pgxpool.Pool, files map[int]string) {
	t.Helper()
	if _, err := db.Exec(ctx, `CREATE TABLE schema_migrations (
		version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		t.Fatal(err)
	}
	var versions []int
	for v := range files {
		versions = append(versions, v)
	}
	slices.Sort(versions)
	for _, v := range versions {
		body, err := os.ReadFile(filepath.Join("migrations", files[v]))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(ctx, string(body)); err != nil {
			t.Fatalf("applying %s as %d: %v", files[v], v, err)
		}
		if _, err := db.Exec(ctx, "INSERT INTO schema_migrations (version) VALUES ($1)", v); err != nil {
			t.Fatal(err)
		}
	}
}

// schemaOf describes a schema's tables, columns, constraints, indexes and
// functions, without the schema's name, to compare two schemas.
func schemaOf(t *testing.T, ctx context.Context, db *pgxpool.Pool, schema string) []string {
	t.Helper()
	rows, err := db.Query(ctx, `
		SELECT 'column ' || table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || COALESCE(column_default, '')
		  FROM information_schema.columns WHERE table_schema = $1
		UNION ALL
		SELECT 'constraint ' || c.conrelid::regclass::text || ' ' || c.conname || ' ' || pg_get_constraintdef(c.oid)
		  FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname = $1
		UNION ALL
		SELECT 'index ' || indexname || ' ' || indexdef FROM pg_indexes WHERE schemaname = $1
		UNION ALL
		SELECT 'function ' || p.proname || ' ' || md5(p.prosrc)
		  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1
		UNION ALL
		SELECT 'migration ' || version FROM schema_migrations`, schema)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		got[i] = strings.ReplaceAll(got[i], schema+".", "")
	}
	slices.Sort(got)
	return got
}

// A database migrated before 8728ef4 applied 0028_definition_version_tags
// as 0029 (and had no 0028, nor 0029_task_updating): migrate recognises it,
// applies what it lacks and leaves the schema a fresh database has.
func TestMigrateRepairsADatabaseThatAppliedVersionTagsAs0029(t *testing.T) {
	for _, last := range []int{25, 27} { // built before migration 0026; after 0027
		t.Run(fmt.Sprintf("through %04d", last), func(t *testing.T) {
			fresh, ctx, freshStore := open(t)
			recreate(t, ctx, fresh) // without the claim audit
			if err := freshStore.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			want := schemaOf(t, ctx, fresh.DB, fresh.Schema)

			env, _, st := open(t)
			recreate(t, ctx, env)
			files, err := filepath.Glob("migrations/*.sql")
			if err != nil {
				t.Fatal(err)
			}
			old := map[int]string{29: "0028_definition_version_tags.sql"}
			for _, f := range files {
				var v int
				fmt.Sscanf(filepath.Base(f), "%d_", &v)
				if v <= last {
					old[v] = filepath.Base(f)
				}
			}
			applyAs(t, ctx, env.DB, old)
			if err := st.Migrate(ctx); err != nil {
				t.Fatalf("migrating a database of before the rename: %v", err)
			}
			if got := schemaOf(t, ctx, env.DB, env.Schema); !slices.Equal(got, want) {
				t.Errorf("the repaired schema differs from a fresh one:\nonly repaired: %v\nonly fresh: %v", minus(got, want), minus(want, got))
			}
			if err := st.Migrate(ctx); err != nil {
				t.Fatalf("migrating again: %v", err)
			}
		})
	}
}

func minus(a, b []string) []string {
	var d []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			d = append(d, s)
		}
	}
	return d
}

// contractFS is a contract step after every real migration: it drops a
// table only this test uses.
func contractFS(minSchema int) fstest.MapFS {
	return fstest.MapFS{
		"migrations/9001_contract.sql": {Data: []byte(fmt.Sprintf("-- sutra:contract min-schema=%d\nDROP TABLE contract_old;\n", minSchema))},
		"migrations/9002_expand.sql":   {Data: []byte("CREATE TABLE expand_after (id int);\n")},
	}
}

func applied(t *testing.T, ctx context.Context, db *pgxpool.Pool, version int) bool {
	t.Helper()
	var ok bool
	if err := db.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1)", version).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// A contract step waits while a live replica runs an older schema, or
// registered none (a release before v0.2.0); the migrations after it are
// applied all the same; it is applied once those replicas have left.
func TestContractStepWaitsForOlderReplicas(t *testing.T) {
	env, ctx, st := open(t)
	if _, err := env.DB.Exec(ctx, "CREATE TABLE contract_old (id int)"); err != nil {
		t.Fatal(err)
	}
	ttl := time.Minute
	// old: a replica of v0.1.0 (a lease, no version); older: schema 31;
	// current: schema 9002, which the step allows.
	for id, schema := range map[string]int{"old": 0, "older": 31, "current": 9002} {
		if ok, err := st.AcquireLease(ctx, "replica/"+id, id+"#1", ttl); err != nil || !ok {
			t.Fatalf("registering %s: %v %v", id, ok, err)
		}
		if schema > 0 {
			if err := st.RecordReplicaVersion(ctx, id+"#1", store.ReplicaVersion{ID: id, Release: "v0.2.0", Revision: "abc", Schema: schema}); err != nil {
				t.Fatal(err)
			}
		}
	}
	err := st.MigrateWith(ctx, contractFS(32))
	if fault.Code(err) != fault.MigrateContractWaiting {
		t.Fatalf("Migrate = %v, want %s", err, fault.MigrateContractWaiting)
	}
	for _, want := range []string{"9001_contract.sql", "old (a release before v0.2.0)", "older (v0.2.0, schema 31)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not name %q: %v", want, err)
		}
	}
	if strings.Contains(err.Error(), "current") {
		t.Errorf("the refusal names a replica the step allows: %v", err)
	}
	if applied(t, ctx, env.DB, 9001) || !applied(t, ctx, env.DB, 9002) {
		t.Fatalf("want the contract step waiting and the expand step after it applied")
	}

	// The old replica leaves; the older one still runs.
	if err := st.ReleaseLease(ctx, "replica/old", "old#1"); err != nil {
		t.Fatal(err)
	}
	if err := st.MigrateWith(ctx, contractFS(32)); fault.Code(err) != fault.MigrateContractWaiting || strings.Contains(err.Error(), "old (") {
		t.Fatalf("Migrate = %v, want it waiting for older alone", err)
	}
	// A lapsed registration is not a live replica.
	if _, err := env.DB.Exec(ctx, "UPDATE leases SET expires_at = now() - interval '1 second' WHERE name = 'replica/older'"); err != nil {
		t.Fatal(err)
	}
	if err := st.MigrateWith(ctx, contractFS(32)); err != nil {
		t.Fatalf("Migrate with no older replica live = %v", err)
	}
	if !applied(t, ctx, env.DB, 9001) {
		t.Fatal("the contract step was not applied")
	}
}

// A malformed contract header is refused, never read as an expand step.
func TestContractHeaderMustNameMinSchema(t *testing.T) {
	_, ctx, st := open(t)
	bad := fstest.MapFS{"migrations/9001_bad.sql": {Data: []byte("-- sutra:contract min-release=v0.1.0\nSELECT 1;\n")}}
	if err := st.MigrateWith(ctx, bad); err == nil || !strings.Contains(err.Error(), "min-schema=N") {
		t.Fatalf("Migrate = %v, want the header refused", err)
	}
}

// The registration's version row goes with it; a crashed holder's row is
// forgotten at the next registration.
func TestReplicaVersionsFollowTheirRegistration(t *testing.T) {
	env, ctx, st := open(t)
	v := store.ReplicaVersion{ID: "a", Release: "v0.2.0", Revision: "abc", Schema: store.SchemaVersion()}
	if err := st.RecordReplicaVersion(ctx, "crashed#1", v); err != nil { // no lease: its process is gone
		t.Fatal(err)
	}
	if _, err := st.AcquireLease(ctx, "replica/a", "a#1", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := st.RecordReplicaVersion(ctx, "a#1", v); err != nil {
		t.Fatal(err)
	}
	rows, _ := env.DB.Query(ctx, "SELECT holder FROM replica_versions ORDER BY holder")
	holders, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || !slices.Equal(holders, []string{"a#1"}) {
		t.Fatalf("replica_versions holders = %v (%v), want [a#1]", holders, err)
	}
	if err := st.ForgetReplicaVersion(ctx, "a#1"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := env.DB.QueryRow(ctx, "SELECT count(*) FROM replica_versions").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows left after the registration was given up (%v)", n, err)
	}
}

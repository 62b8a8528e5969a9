package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sutra-run/worker/tools/bench"
)

// writePlans writes the generic plan of every hot statement
// (bench.HotStatements) to dir, one <name>.txt each, on the large data set,
// and to dir/new on a new schema (K instances, nothing analyzed), the plans
// a connection keeps when it prepares its statements on a new database, so
// that a change of plan shows in review (bench/plans).
func (b *bencher) writePlans(ctx context.Context, dir string) error {
	const data = "large"
	env, err := bench.NewEnv(ctx, b.o.db, b.o.amqp, "plans", b.o.instances, bench.ProcessXML)
	if err != nil {
		return err
	}
	defer env.Close()
	if err := explainAll(ctx, env, filepath.Join(dir, "new"), fmt.Sprintf("%d benchmark instances in a new schema, not analyzed", env.Instances),
		func(s bench.Statement) string { return s.KnownEmpty }); err != nil {
		return err
	}
	began := time.Now()
	if err := env.Seed(ctx, bench.DataSets[data]); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "seeded %s in %v\n", bench.DataSets[data], time.Since(began).Round(time.Second))
	return explainAll(ctx, env, dir, fmt.Sprintf("%d benchmark instances and %s, analyzed", env.Instances, bench.DataSets[data]),
		func(s bench.Statement) string { return s.Known })
}

// explainAll writes every hot statement's plan in env to dir; tables says
// what the tables hold, known what excuses a fault.
func explainAll(ctx context.Context, env *bench.Env, dir, tables string, known func(bench.Statement) string) error {
	conn, err := pgx.Connect(ctx, env.Config.Database.URL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var version string
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, s := range bench.HotStatements {
		plan, err := bench.Explain(ctx, conn, s)
		if err != nil {
			return err
		}
		var out strings.Builder
		fmt.Fprintf(&out, "-- %s: generic plan (force_generic_plan), PostgreSQL %s,\n-- %s.\n", s.Name, version, tables)
		fmt.Fprintf(&out, "-- Written by `make bench-plans` (bench.HotStatements).\n")
		if s.Setup != "" {
			fmt.Fprintf(&out, "%s;\n", s.Setup)
		}
		fmt.Fprintf(&out, "%s;\n\n%s\n", strings.TrimSpace(s.SQL), plan)
		if faults := s.Faults(plan); len(faults) > 0 {
			fmt.Fprintf(os.Stderr, "%s/%s: %s\n", dir, s.Name, strings.Join(faults, ", "))
			fmt.Fprintf(&out, "\n-- %s", strings.Join(faults, ", "))
			if k := known(s); k != "" {
				fmt.Fprintf(&out, " (known: %s)", k)
			}
			out.WriteString("\n")
		}
		if err := os.WriteFile(filepath.Join(dir, s.Name+".txt"), []byte(out.String()), 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "wrote %d plans to %s\n", len(bench.HotStatements), dir)
	return nil
}

// Command worker runs the Sutra worker. See `worker help`.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/kelseyhightower/envconfig"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/buildinfo"
	"github.com/sutra-run/worker/store"
)

const usage = `Usage: worker [command]

Commands:
  run                 consume relays and run steps (default)
  migrate             create the database if missing and apply migrations;
                      a contract step waits while an older replica runs
                      (exit status 2, the replicas named)
  version             print the release, commit and schema version
  deploy FILE|DIR...  deploy BPMN and DMN files (a directory: every *.dmn,
                      then every *.bpmn in it); prints each process's key
                      and version, and each decision's id and version
  help                show this help

Exit status: 0 done; 1 failed (the reason on stderr); 2 a configuration
value that cannot work (the variable named), or a contract migration that
must wait for older replicas to leave (SUTRA.RUNTIME.MIGRATE.CONTRACT_WAITING).

Configuration (environment variables):
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	cmd := "run"
	if len(args) > 0 {
		cmd = args[0]
	}
	if cmd == "help" || cmd == "--help" || cmd == "-h" {
		printHelp(stdout)
		return 0
	}
	if cmd == "version" {
		bi := buildinfo.Read()
		fmt.Fprintf(stdout, "release %s\ncommit %s\nschema %d\ngo %s\n", bi.Version, bi.Revision, store.SchemaVersion(), bi.GoVersion)
		return 0
	}
	cfg := app.Defaults() // the environment's variables over the defaults
	if err := envconfig.Process("sutra", &cfg); err != nil {
		fmt.Fprintln(stderr, "worker: configuration:", err)
		return 2
	}
	if cfg.ReplicaID == "" {
		cfg.ReplicaID = app.DefaultReplicaID()
	}
	if err := cfg.Validate(); err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintln(stderr, "worker: configuration:", line)
		}
		return 2
	}
	log, err := newLogger(cfg, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "worker:", err)
		return 2
	}
	warnUnknown := func() {
		for _, name := range app.UnknownVariables(os.Environ()) {
			log.Warn("unknown variable ignored: is it a typo? (worker help lists every variable)", "variable", name)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cmd != "run" {
		warnUnknown()
	}
	switch cmd {
	case "run":
		err = runWorker(ctx, stop, cfg, log, warnUnknown)
	case "migrate":
		cfg.Migrate = true
		var w interface{ Close() }
		if w, err = app.OpenStore(ctx, cfg); err == nil {
			w.Close()
			fmt.Fprintln(stdout, "migrations applied")
		}
	case "deploy":
		if len(args) < 2 {
			fmt.Fprintln(stderr, "usage: worker deploy FILE.bpmn|FILE.dmn|DIR...")
			return 2
		}
		err = deploy(ctx, cfg, args[1:], stdout)
	default:
		fmt.Fprintf(stderr, "worker: unknown command %q\n\n", cmd)
		printHelp(stderr)
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "worker:", err)
		if c := fault.Code(err); c == fault.ConfigInvalid || c == fault.MigrateContractWaiting {
			return 2
		}
		return 1
	}
	return 0
}

// runWorker runs until the first signal, then stops within
// SUTRA_SHUTDOWN_TIMEOUT (plus a short grace for final writes); a second
// signal exits at once. It fails when another process took the replica id.
func runWorker(ctx context.Context, stopSignals context.CancelFunc, cfg app.Config, log *slog.Logger, warnUnknown func()) error {
	bi := buildinfo.Read()
	log.Info("worker starting", "version", bi.Version, "revision", bi.Revision, "schema", store.SchemaVersion(), "go_version", bi.GoVersion,
		"database", app.Redact(cfg.Database.URL), "broker", app.Redact(cfg.Broker.URL), "lanes", cfg.Lanes.Count, "prefetch", cfg.Consumer.Prefetch,
		"http", cfg.HTTPAddr, "api", cfg.API.Addr, "shutdown_timeout", cfg.ShutdownTimeout)
	warnUnknown()
	w, err := app.Start(ctx, cfg, app.Options{Logger: log})
	if err != nil {
		return err
	}
	var lost error
	select {
	case <-ctx.Done():
	case <-w.Lost():
		lost = fault.New(fault.ReplicaIDInUse, "replica id %q was taken over by another process", cfg.ReplicaID)
	}
	stopSignals() // restore default handling: a second signal kills the process
	log.Info("stopping: draining in-flight steps", "timeout", cfg.ShutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := w.Stop(sctx); err != nil {
		log.Warn("stopped at the deadline", "err", err)
	} else {
		log.Info("stopped")
	}
	return lost
}

// deploy deploys every file named, and every *.dmn then *.bpmn file of
// every directory named, one after another; it stops at the first refusal.
// Decisions go first so that a process calling them with bindingType
// deployment finds them (docs/dmn.md).
func deploy(ctx context.Context, cfg app.Config, paths []string, stdout io.Writer) error {
	var files []string
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			files = append(files, p)
			continue
		}
		var found []string
		for _, ext := range []string{"*.dmn", "*.bpmn"} {
			m, err := filepath.Glob(filepath.Join(p, ext))
			if err != nil {
				return err
			}
			found = append(found, m...)
		}
		if len(found) == 0 {
			return fmt.Errorf("%s holds no .bpmn or .dmn file", p)
		}
		files = append(files, found...)
	}
	st, err := app.OpenStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	for _, f := range files {
		xml, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		ds, err := st.Deploy(ctx, xml)
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		for _, d := range ds {
			note := "deployed"
			if !d.Created {
				note = "unchanged"
			}
			if d.Kind == store.KindDMN {
				note = "decision " + note
			}
			fmt.Fprintf(stdout, "%s %d %s\n", d.Key, d.Version, note)
		}
	}
	return nil
}

// newLogger is the one logger of the process: JSON by default (text on a
// terminal or by SUTRA_LOG_FORMAT), every line naming the replica, durations
// as text ("30s") rather than nanoseconds, and an error's code only in the
// code attribute, not again at the start of its message.
func newLogger(cfg app.Config, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		return nil, fmt.Errorf("SUTRA_LOG_LEVEL: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		switch v := a.Value.Any().(type) {
		case time.Duration:
			return slog.String(a.Key, v.String())
		case error:
			if fault.Code(v) != "" {
				return slog.String(a.Key, fault.Reason(v))
			}
		}
		return a
	}}
	format := cfg.LogFormat
	if format == "" {
		format = "json"
		if f, ok := w.(*os.File); ok {
			if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
				format = "text"
			}
		}
	}
	var h slog.Handler
	switch format {
	case "json":
		h = slog.NewJSONHandler(w, opts)
	case "text":
		h = slog.NewTextHandler(w, opts)
	default:
		return nil, errors.New("SUTRA_LOG_FORMAT must be json or text")
	}
	return slog.New(h).With("replica", cfg.ReplicaID), nil
}

func printHelp(w io.Writer) {
	fmt.Fprint(w, usage)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	for _, v := range app.Variables() {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", v.Name, v.Default, v.Description)
	}
	tw.Flush()
	fmt.Fprintln(w, strings.TrimSpace(`
Relays: publish JSON to the relay exchange with a message_id; see README.md.`))
}

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
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/kelseyhightower/envconfig"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/fault"
)

const usage = `Usage: worker [command]

Commands:
  run              consume relays and run steps (default)
  migrate          create the database if missing and apply migrations
  deploy FILE      deploy a BPMN file; prints key and version
  help             show this help

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
	var cfg app.Config
	if err := envconfig.Process("sutra", &cfg); err != nil {
		fmt.Fprintln(stderr, "worker: configuration:", err)
		return 2
	}
	log, err := newLogger(cfg, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "worker:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch cmd {
	case "run":
		err = runWorker(ctx, stop, cfg, log)
	case "migrate":
		cfg.Migrate = true
		var w interface{ Close() }
		if w, err = app.OpenStore(ctx, cfg); err == nil {
			w.Close()
			fmt.Fprintln(stdout, "migrations applied")
		}
	case "deploy":
		if len(args) != 2 {
			fmt.Fprintln(stderr, "usage: worker deploy FILE.bpmn")
			return 2
		}
		err = deploy(ctx, cfg, args[1], stdout)
	default:
		fmt.Fprintf(stderr, "worker: unknown command %q\n\n", cmd)
		printHelp(stderr)
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "worker:", err)
		return 1
	}
	return 0
}

// runWorker runs until the first signal, then stops within
// SUTRA_SHUTDOWN_TIMEOUT (plus a short grace for final writes); a second
// signal exits at once. It fails when another process took the replica id.
func runWorker(ctx context.Context, stopSignals context.CancelFunc, cfg app.Config, log *slog.Logger) error {
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

func deploy(ctx context.Context, cfg app.Config, path string, stdout io.Writer) error {
	xml, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	st, err := app.OpenStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	ds, err := st.Deploy(ctx, xml)
	if err != nil {
		return err
	}
	for _, d := range ds {
		note := "deployed"
		if !d.Created {
			note = "unchanged"
		}
		fmt.Fprintf(stdout, "%s %d %s\n", d.Key, d.Version, note)
	}
	return nil
}

func newLogger(cfg app.Config, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		return nil, fmt.Errorf("SUTRA_LOG_LEVEL: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	format := cfg.LogFormat
	if format == "" {
		format = "json"
		if f, ok := w.(*os.File); ok {
			if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
				format = "text"
			}
		}
	}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return nil, errors.New("SUTRA_LOG_FORMAT must be json or text")
}

func printHelp(w io.Writer) {
	fmt.Fprint(w, usage)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	_ = envconfig.Usagef("sutra", &app.Config{}, tw, `{{range .}}  {{usage_key .}}	{{usage_default .}}	{{usage_description .}}
{{end}}`)
	tw.Flush()
	fmt.Fprintln(w, strings.TrimSpace(`
Relays: publish JSON to the relay exchange with a message_id; see README.md.`))
}

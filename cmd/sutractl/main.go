// Command sutractl is the on-call tool over a Sutra worker's admin API
// (docs/admin.md): look at instances and incidents, cancel, set variables,
// migrate, retry, deploy, publish messages and work user tasks.
//
// It reads SUTRA_API_URL (default http://127.0.0.1:8080), SUTRA_ADMIN_TOKEN
// (the worker's admin token, sent as a Bearer token) and SUTRA_CALLER (who
// calls, default the OS user). It never sends SUTRA_API_TOKEN, the task
// workers' token, which the admin API refuses. Exit status: 0 done, 1 the API refused, 2 usage error, 3 the API
// cannot be reached.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"slices"
	"strings"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}

const (
	exitRefused     = 1
	exitUsage       = 2
	exitUnreachable = 3
	defaultURL      = "http://127.0.0.1:8080"
)

// cli is one invocation: its outputs, its common flags and its API client.
type cli struct {
	// out collects what a command prints, written to stdout at the end.
	out            bytes.Buffer
	stdout, stderr io.Writer
	output         string // table or json
	caller         string
	api            *client
	// taskTokenOnly: the environment has SUTRA_API_TOKEN, not
	// SUTRA_ADMIN_TOKEN (a refusal says which one to set).
	taskTokenOnly bool
}

func (c *cli) json() bool { return c.output == "json" }

// command is one sutractl command.
type command struct {
	name     string // the words after sutractl, e.g. "instances list"
	synopsis string // its arguments and flags
	summary  string
	minArgs  int
	maxArgs  int // -1: any number
	// setup registers the command's flags and returns what it does with
	// its positional arguments once they are parsed.
	setup func(fs *flag.FlagSet) action
}

type action func(ctx context.Context, c *cli, args []string) error

// usageError is a mistake in the command line (exit 2).
type usageError struct {
	msg string
	cmd *command // the command whose usage to show, if known
}

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// errHelpShown ends a run that printed the help it was asked for (exit 0).
var errHelpShown = errors.New("help shown")

func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	c := &cli{stdout: stdout, stderr: stderr, output: "table", caller: getenv("SUTRA_CALLER"),
		taskTokenOnly: getenv("SUTRA_ADMIN_TOKEN") == "" && getenv("SUTRA_API_TOKEN") != ""}
	if c.caller == "" {
		c.caller = osUser(getenv)
	}
	cmd, act, pos, err := c.parse(args)
	if err == nil && c.output != "table" && c.output != "json" {
		err = &usageError{msg: fmt.Sprintf("-o %q: want table or json", c.output), cmd: cmd}
	}
	if err == nil {
		base := getenv("SUTRA_API_URL")
		if base == "" {
			base = defaultURL
		}
		if c.api, err = newClient(base, getenv("SUTRA_ADMIN_TOKEN"), c.caller); err == nil {
			err = act(ctx, c, pos)
			var ue *usageError
			if errors.As(err, &ue) {
				ue.cmd = cmd
			}
		}
	}
	code := c.report(err)
	if _, werr := c.stdout.Write(c.out.Bytes()); werr != nil && code == 0 {
		fmt.Fprintf(c.stderr, "sutractl: %v\n", werr)
		code = exitRefused
	}
	return code
}

// osUser names the person running sutractl when SUTRA_CALLER does not.
func osUser(getenv func(string) string) string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if name := getenv("USER"); name != "" {
		return name
	}
	return "unknown"
}

// parse finds the command and parses its flags and positional arguments
// (flags may come before or after them, and the common flags before the
// command too).
func (c *cli) parse(args []string) (*command, action, []string, error) {
	top := flag.NewFlagSet("sutractl", flag.ContinueOnError)
	top.SetOutput(io.Discard)
	c.commonFlags(top)
	if err := top.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			c.mainUsage(&c.out)
			return nil, nil, nil, errHelpShown
		}
		return nil, nil, nil, usagef("%v", err)
	}
	args = top.Args()
	if len(args) > 0 && args[0] == "help" {
		if len(args) == 1 {
			c.mainUsage(&c.out)
			return nil, nil, nil, errHelpShown
		}
		args = append(slices.Clone(args[1:]), "--help")
	}
	if len(args) == 0 {
		return nil, nil, nil, usagef("no command")
	}
	cmd, rest := find(args)
	if cmd == nil {
		subs := group(args[0])
		switch {
		case len(subs) > 0 && len(args) > 1 && isHelp(args[1]):
			c.groupUsage(&c.out, args[0], subs)
			return nil, nil, nil, errHelpShown
		case len(subs) > 0:
			return nil, nil, nil, usagef("%s needs one of: %s", args[0], strings.Join(subs, ", "))
		}
		return nil, nil, nil, usagef("unknown command %q", strings.Join(args[:min(2, len(args))], " "))
	}
	fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.commonFlags(fs)
	act := cmd.setup(fs)
	pos, err := parseInterspersed(fs, rest)
	switch {
	case errors.Is(err, flag.ErrHelp):
		c.commandUsage(&c.out, cmd, fs)
		return cmd, nil, nil, errHelpShown
	case err != nil:
		return cmd, nil, nil, &usageError{msg: err.Error(), cmd: cmd}
	case len(pos) < cmd.minArgs || (cmd.maxArgs >= 0 && len(pos) > cmd.maxArgs):
		return cmd, nil, nil, &usageError{msg: "wrong number of arguments", cmd: cmd}
	}
	return cmd, act, pos, nil
}

// commonFlags are accepted before the command and by every command. Each
// flag set starts from the values parsed so far.
func (c *cli) commonFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.output, "o", c.output, "output `FORMAT`: table, or json (the API's JSON as it came, indented)")
	fs.StringVar(&c.caller, "caller", c.caller, "the `NAME` of who calls, sent as X-Sutra-Caller and logged by the worker (default $SUTRA_CALLER, else the OS user)")
}

// parseInterspersed parses flags wherever they are among the positional
// arguments, which it returns; after "--" everything is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help"
}

// find returns the command named by the first words of args, and the rest.
func find(args []string) (*command, []string) {
	for i := range commands {
		words := strings.Fields(commands[i].name)
		if len(args) >= len(words) && slices.Equal(args[:len(words)], words) {
			return &commands[i], args[len(words):]
		}
	}
	return nil, nil
}

// group lists the subcommands of a command group such as "instances".
func group(name string) []string {
	var subs []string
	for _, cmd := range commands {
		if g, sub, ok := strings.Cut(cmd.name, " "); ok && g == name {
			subs = append(subs, sub)
		}
	}
	return subs
}

func (c *cli) mainUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: sutractl [-o table|json] [--caller NAME] COMMAND [ARGS]

The on-call tool over a Sutra worker's admin API (docs/admin.md).

Commands:
`)
	t := newTable(w, "COMMAND", "WHAT IT DOES")
	for _, cmd := range commands {
		t.row(cmd.name, cmd.summary)
	}
	t.flush()
	fmt.Fprint(w, `
Environment:
  SUTRA_API_URL      the worker's API listener (default `+defaultURL+`)
  SUTRA_ADMIN_TOKEN  the worker's admin token, sent as a Bearer token
  SUTRA_CALLER       who calls (default the OS user), logged with every admin action

Exit status: 0 done, 1 the API refused, 2 usage error, 3 the API cannot be reached.
Run 'sutractl COMMAND --help' for a command's flags.
`)
}

func (c *cli) groupUsage(w io.Writer, name string, subs []string) {
	fmt.Fprintf(w, "Usage: sutractl %s COMMAND\n\nCommands:\n", name)
	t := newTable(w, "COMMAND", "WHAT IT DOES")
	for _, sub := range subs {
		cmd, _ := find([]string{name, sub})
		t.row(cmd.name+" "+cmd.synopsis, cmd.summary)
	}
	t.flush()
}

func (c *cli) commandUsage(w io.Writer, cmd *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: sutractl %s %s\n\n%s\n\nFlags:\n", cmd.name, cmd.synopsis, cmd.summary)
	fs.VisitAll(func(f *flag.Flag) {
		dash := "--"
		if len(f.Name) == 1 {
			dash = "-"
		}
		value, usage := flag.UnquoteUsage(f)
		if value != "" {
			value = " " + value
		}
		fmt.Fprintf(w, "  %s%s%s\n      %s\n", dash, f.Name, value, usage)
	})
}

// report prints what went wrong and returns the exit status.
func (c *cli) report(err error) int {
	var ue *usageError
	var unreachable *unreachableError
	var refused *apiError
	switch {
	case err == nil, errors.Is(err, errHelpShown):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(c.stderr, "sutractl: %s\n", ue.msg)
		if ue.cmd != nil {
			fmt.Fprintf(c.stderr, "usage: sutractl %s %s\n(run 'sutractl %s --help' for details)\n", ue.cmd.name, ue.cmd.synopsis, ue.cmd.name)
		} else {
			fmt.Fprintln(c.stderr, "(run 'sutractl --help' for the commands)")
		}
		return exitUsage
	case errors.As(err, &unreachable):
		fmt.Fprintf(c.stderr, "sutractl: %v\n(SUTRA_API_URL names the worker's API listener)\n", err)
		return exitUnreachable
	case errors.As(err, &refused):
		c.printRefusal(refused)
		return exitRefused
	}
	fmt.Fprintf(c.stderr, "sutractl: %v\n", err)
	return exitRefused
}

// printRefusal prints a refusal's code and detail, and what to do about it
// when that is known.
func (c *cli) printRefusal(e *apiError) {
	fmt.Fprintf(c.stderr, "sutractl: %v\n", e)
	if e.instanceID != "" {
		fmt.Fprintf(c.stderr, "  instance: %s\n", e.instanceID)
	}
	if e.elementID != "" {
		fmt.Fprintf(c.stderr, "  element: %s\n", e.elementID)
	}
	switch {
	case e.status == 409 && strings.HasSuffix(e.code, ".CLAIM_HELD"):
		fmt.Fprintln(c.stderr, "the instance is busy right now (a step or another admin call holds it): retry — this is a race, not a failure")
	case e.status == 401 && c.taskTokenOnly:
		fmt.Fprintln(c.stderr, "SUTRA_ADMIN_TOKEN is not set: sutractl sends the worker's admin token, not SUTRA_API_TOKEN (the task workers' token, which the admin API refuses)")
	case e.status == 401:
		fmt.Fprintln(c.stderr, "the token is missing or wrong: set SUTRA_ADMIN_TOKEN to the worker's admin token")
	case e.code == "SUTRA.API.FORBIDDEN":
		fmt.Fprintln(c.stderr, "this token is the task workers' (SUTRA_API_TOKEN): set SUTRA_ADMIN_TOKEN to the worker's admin token")
	case e.code == "SUTRA.ADMIN.DISABLED":
		fmt.Fprintln(c.stderr, "the worker has no SUTRA_ADMIN_TOKEN, so its admin API is off: give it one (or SUTRA_ADMIN_INSECURE=true on a trusted network)")
	case e.status == 503 && e.retryAfter != "":
		fmt.Fprintf(c.stderr, "the worker cannot serve right now: retry in %s s\n", e.retryAfter)
	}
}

package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/sutra-run/worker/api/admin/wire"
)

// commands, in the order the help lists them.
var commands = []command{
	{name: "instances get", synopsis: "ID", summary: "Show an instance: tokens, waits, incidents, claim, variables.", minArgs: 1, maxArgs: 1,
		setup: func(*flag.FlagSet) action { return instancesGet }},
	{name: "instances list", synopsis: "[--definition KEY] [--status STATUS] [--has-incident] [--limit N] [--after CURSOR] [--all]",
		summary: "List instances in id order.", maxArgs: 0, setup: instancesList},
	{name: "instances history", synopsis: "ID [--limit N] [--after STEP] [--all]",
		summary: "List an instance's steps, newest first: what advanced it, when, under which owner.", minArgs: 1, maxArgs: 1,
		setup: instancesHistory},
	{name: "instances start", synopsis: "--definition KEY [--version VERSION] [--id ID] [--var NAME=JSON ...]",
		summary: "Start an instance at its none start event.", maxArgs: 0, setup: instancesStart},
	{name: "cancel", synopsis: "ID", summary: "Cancel an active instance.", minArgs: 1, maxArgs: 1,
		setup: func(*flag.FlagSet) action { return cancel }},
	{name: "variables set", synopsis: "ID NAME=JSON ...", summary: "Merge variables into an instance (values are JSON: n=42, s='\"text\"').",
		minArgs: 2, maxArgs: -1, setup: func(*flag.FlagSet) action { return variablesSet }},
	{name: "migrate", synopsis: "ID --to VERSION [--map OLD=NEW ...] [--check]",
		summary: "Move an active instance to another version of its definition (--check: only ask the preflight where its tokens would land).",
		minArgs: 1, maxArgs: 1, setup: migrate},
	{name: "migrations start", synopsis: "--definition KEY --from VERSION --to VERSION [--map OLD=NEW ...]",
		summary: "Migrate every active instance of a version, in the background.", maxArgs: 0, setup: migrationsStart},
	{name: "migrations get", synopsis: "ID", summary: "Show a bulk migration's progress and refusals.", minArgs: 1, maxArgs: 1,
		setup: func(*flag.FlagSet) action { return migrationsGet }},
	{name: "incidents list", synopsis: "[--open] [--instance ID] [--limit N] [--after CURSOR] [--all]",
		summary: "List incidents, oldest first.", maxArgs: 0, setup: incidentsList},
	{name: "incidents retry", synopsis: "ID [--var NAME=JSON ...] [--retries N]", summary: "Resolve an incident and run its element again.",
		minArgs: 1, maxArgs: 1, setup: incidentsRetry},
	{name: "deploy", synopsis: "FILE", summary: "Deploy a BPMN or DMN file (each process or decision becomes a new version unless unchanged).",
		minArgs: 1, maxArgs: 1, setup: func(*flag.FlagSet) action { return deploy }},
	{name: "definitions list", synopsis: "", summary: "List deployed definitions and their versions.", maxArgs: 0,
		setup: func(*flag.FlagSet) action { return definitionsList }},
	{name: "definitions get", synopsis: "KEY VERSION", summary: "Print the BPMN XML of a deployed version.", minArgs: 2, maxArgs: 2,
		setup: func(*flag.FlagSet) action { return definitionsGet }},
	{name: "decisions list", synopsis: "[--limit N] [--after CURSOR] [--all]", summary: "List deployed decisions by id and version.",
		maxArgs: 0, setup: decisionsList},
	{name: "decisions evaluate", synopsis: "ID [--version VERSION] [--var NAME=JSON ...]",
		summary: "Evaluate a deployed decision: its output and the rules that matched.", minArgs: 1, maxArgs: 1, setup: decisionsEvaluate},
	{name: "messages publish", synopsis: "--message NAME [--key KEY | --instance ID] [--var NAME=JSON ...] [--ttl DURATION] [--id ID]",
		summary: "Publish a BPMN message (by correlation key, to an instance, or by name to a message start).", maxArgs: 0, setup: messagesPublish},
	{name: "signals broadcast", synopsis: "--name NAME [--var NAME=JSON ...]",
		summary: "Broadcast a BPMN signal to every instance waiting for it and every process it starts.", maxArgs: 0, setup: signalsBroadcast},
	{name: "user-tasks list", synopsis: "[--assignee USER] [--candidate-group GROUP] [--candidate-user USER] [--state STATE] [--limit N] [--after CURSOR] [--all]",
		summary: "List open user tasks, oldest first.", maxArgs: 0, setup: userTasksList},
	{name: "user-tasks get", synopsis: "ID", summary: "Show a user task.", minArgs: 1, maxArgs: 1,
		setup: func(*flag.FlagSet) action { return userTasksGet }},
	{name: "user-tasks assign", synopsis: "ID (USER | --unassign)", summary: "Assign a user task, or unassign it.", minArgs: 1, maxArgs: 2,
		setup: userTasksAssign},
	{name: "user-tasks update", synopsis: "ID [--candidate-groups A,B] [--candidate-users A,B] [--due-date TIME] [--follow-up-date TIME] [--priority N]",
		summary: "Change a user task's candidates, dates or priority (\"\" clears a list or date).", minArgs: 1, maxArgs: 1, setup: userTasksUpdate},
	{name: "user-tasks complete", synopsis: "ID [--var NAME=JSON ...] [--override]", summary: "Complete a user task with result variables (as its assignee, or with --override).",
		minArgs: 1, maxArgs: 1, setup: userTasksComplete},
	{name: "outbox parked", synopsis: "[--instance ID] [--limit N] [--after CURSOR] [--all]",
		summary: "List BPMN messages parked because no queue was bound for their name.", maxArgs: 0, setup: outboxParked},
	{name: "outbox retry", synopsis: "ID", summary: "Put a parked message back in the outbox (bind a queue for its name first).",
		minArgs: 1, maxArgs: 1, setup: func(*flag.FlagSet) action { return outboxSettle("retry") }},
	{name: "outbox discard", synopsis: "ID", summary: "Delete a parked message; it is never published.",
		minArgs: 1, maxArgs: 1, setup: func(*flag.FlagSet) action { return outboxSettle("discard") }},
}

func instancesGet(ctx context.Context, c *cli, args []string) error {
	data, err := c.api.call(ctx, http.MethodGet, "/v1/instances/"+seg(args[0]), nil, nil, "")
	if err != nil || c.json() {
		return c.done(data, err)
	}
	var in wire.Instance
	if err := decode(data, &in); err != nil {
		return err
	}
	claim := ""
	if in.Claim != nil {
		claim = fmt.Sprintf("%s (%.1fs)", in.Claim.Owner, in.Claim.AgeSeconds)
	}
	w := &c.out
	t := newTable(w, "INSTANCE", "DEFINITION", "STATUS", "STEP", "CLAIM", "PARENT", "CREATED", "UPDATED")
	t.row(in.ID, defRef(in.Definition), in.Status, strconv.FormatInt(in.Version, 10), claim, deref(in.ParentID), stamp(in.CreatedAt), stamp(in.UpdatedAt))
	t.flush()
	if len(in.Tokens) > 0 {
		t = section(w, "TOKENS", "ID", "ELEMENT", "WAIT", "SCOPE")
		for _, tk := range in.Tokens {
			t.row(tk.ID, tk.Element, tk.Wait, tk.Scope)
		}
		t.flush()
	}
	if len(in.Compensable) > 0 {
		t = section(w, "COMPENSABLE", "ELEMENT", "SCOPE", "IN", "TIMES")
		for _, c := range in.Compensable {
			t.row(c.Element, c.Scope, strings.Join(c.In, ","), strconv.Itoa(c.Times))
		}
		t.flush()
	}
	if subs := in.Waits.Subscriptions; len(subs) > 0 {
		t = section(w, "SUBSCRIPTIONS", "TOKEN", "ELEMENT", "MESSAGE", "CORRELATION_KEY", "CREATED")
		for _, s := range subs {
			t.row(s.Token, s.Element, s.Message, s.CorrelationKey, stamp(s.CreatedAt))
		}
		t.flush()
	}
	if signals := in.Waits.Signals; len(signals) > 0 {
		t = section(w, "SIGNALS", "TOKEN", "ELEMENT", "SIGNAL", "CREATED")
		for _, s := range signals {
			t.row(s.Token, s.Element, s.Signal, stamp(s.CreatedAt))
		}
		t.flush()
	}
	if timers := in.Waits.Timers; len(timers) > 0 {
		t = section(w, "TIMERS", "TOKEN", "ELEMENT", "DUE", "ATTEMPTS")
		for _, tm := range timers {
			t.row(tm.Token, tm.Element, stamp(tm.DueAt), strconv.Itoa(tm.Attempts))
		}
		t.flush()
	}
	if tasks := in.Waits.Tasks; len(tasks) > 0 {
		t = section(w, "TASKS", "ID", "TOKEN", "ELEMENT", "KIND", "TOPIC", "RETRIES", "LOCKED_BY", "LOCK_EXPIRES")
		for _, tk := range tasks {
			kind := "service"
			if tk.UserTask {
				kind = "user"
			}
			t.row(tk.ID, tk.Token, tk.Element, kind, tk.Topic, strconv.Itoa(tk.Retries), deref(tk.LockedBy), stampOf(tk.LockExpiresAt))
		}
		t.flush()
	}
	if len(in.Incidents) > 0 {
		t = section(w, "INCIDENTS", "ID", "TOKEN", "ELEMENT", "CODE", "CREATED", "RESOLVED", "MESSAGE")
		for _, i := range in.Incidents {
			t.row(strconv.FormatInt(i.ID, 10), i.Token, i.Element, i.Code, stamp(i.CreatedAt), stampOf(i.ResolvedAt), i.Message)
		}
		t.flush()
	}
	if len(in.Variables) > 0 {
		t = section(w, "VARIABLES", "NAME", "VALUE")
		variablesTable(t, in.Variables)
		t.flush()
	}
	return nil
}

// pageFlags are the flags of every listing.
type pageFlags struct {
	limit optInt
	after string
	all   bool
}

func (p *pageFlags) register(fs *flag.FlagSet) {
	fs.Var(&p.limit, "limit", "`N` items per page (the API's default 50, at most 500)")
	fs.StringVar(&p.after, "after", "", "start after this `CURSOR` (the next of the previous page)")
	fs.BoolVar(&p.all, "all", false, "follow the pages to the last one")
}

func (p *pageFlags) query(q url.Values) {
	if p.limit.set {
		q.Set("limit", strconv.Itoa(p.limit.v))
	}
	if p.after != "" {
		q.Set("after", p.after)
	}
}

// list fetches one page of a listing whose items are under key, or every
// page with --all. With -o json it prints the page as it came (with --all,
// every item in one page whose next is null) and returns no items.
func (c *cli) list(ctx context.Context, path, key string, q url.Values, p *pageFlags) ([]json.RawMessage, error) {
	p.query(q)
	items := []json.RawMessage{} // [] in JSON, never null
	for {
		data, err := c.api.call(ctx, http.MethodGet, path, q, nil, "")
		if err != nil {
			return nil, err
		}
		var page map[string]json.RawMessage
		var got []json.RawMessage
		var next *string
		if err := decode(data, &page); err != nil {
			return nil, err
		}
		if err := decode(page[key], &got); err != nil {
			return nil, err
		}
		if err := decode(page["next"], &next); err != nil {
			return nil, err
		}
		items = append(items, got...)
		switch {
		case next != nil && p.all:
			q.Set("after", *next)
			continue
		case c.json() && !p.all:
			return nil, printJSON(&c.out, data)
		case c.json():
			whole, err := json.Marshal(items)
			if err != nil {
				return nil, err
			}
			return nil, printJSON(&c.out, []byte(`{"`+key+`":`+string(whole)+`,"next":null}`))
		case next != nil:
			fmt.Fprintf(c.stderr, "more: --after %s (or --all)\n", *next)
		}
		return items, nil
	}
}

func instancesList(fs *flag.FlagSet) action {
	var p pageFlags
	p.register(fs)
	definition := fs.String("definition", "", "only instances of this definition `KEY`")
	status := fs.String("status", "", "only instances in this `STATUS`: active, cancelling, completed, terminated, cancelled")
	var hasIncident optBool
	fs.Var(&hasIncident, "has-incident", "only instances with an open incident (--has-incident=false: without)")
	return func(ctx context.Context, c *cli, _ []string) error {
		q := url.Values{}
		if *definition != "" {
			q.Set("definition", *definition)
		}
		if *status != "" {
			q.Set("status", *status)
		}
		if hasIncident.set {
			q.Set("has_incident", strconv.FormatBool(hasIncident.v))
		}
		items, err := c.list(ctx, "/v1/instances", "instances", q, &p)
		if err != nil || c.json() {
			return err
		}
		t := newTable(&c.out, "INSTANCE", "DEFINITION", "STATUS", "STEP", "INCIDENT", "UPDATED")
		for _, raw := range items {
			var in wire.InstanceSummary
			if err := decode(raw, &in); err != nil {
				return err
			}
			t.row(in.ID, defRef(in.Definition), in.Status, strconv.FormatInt(in.Version, 10), yesNo(in.HasIncident), stamp(in.UpdatedAt))
		}
		t.flush()
		return nil
	}
}

func instancesStart(fs *flag.FlagSet) action {
	definition := fs.String("definition", "", "the definition `KEY` (required)")
	var version optInt
	fs.Var(&version, "version", "the definition `VERSION` (default the latest)")
	id := fs.String("id", "", "the instance `ID` (default: the worker picks one)")
	vars := varsFlag{}
	fs.Var(vars, "var", "a start variable `NAME=JSON` (repeatable)")
	return func(ctx context.Context, c *cli, _ []string) error {
		if *definition == "" {
			return usagef("--definition is required")
		}
		body := wire.StartRequest{Definition: *definition, Version: version.v, InstanceID: *id, Variables: vars}
		data, err := c.api.callJSON(ctx, http.MethodPost, "/v1/instances", nil, body)
		if err != nil || c.json() {
			return c.done(data, err)
		}
		var out wire.Started
		if err := decode(data, &out); err != nil {
			return err
		}
		t := newTable(&c.out, "INSTANCE")
		t.row(out.InstanceID)
		t.flush()
		return nil
	}
}

func cancel(ctx context.Context, c *cli, args []string) error {
	data, err := c.api.call(ctx, http.MethodPost, "/v1/instances/"+seg(args[0])+"/cancel", nil, nil, "")
	if err != nil || c.json() {
		return c.done(data, err)
	}
	var out wire.Cancelled
	if err := decode(data, &out); err != nil {
		return err
	}
	t := newTable(&c.out, "INSTANCE", "STATUS")
	t.row(out.InstanceID, out.Status)
	t.flush()
	if out.Status == "cancelling" {
		// 202: user tasks in it run their canceling listeners first.
		fmt.Fprintf(&c.out, "instance %s ends cancelled once the canceling listeners of its user tasks are done\n", out.InstanceID)
	}
	return nil
}

func variablesSet(ctx context.Context, c *cli, args []string) error {
	vars := varsFlag{}
	for _, kv := range args[1:] {
		if err := vars.Set(kv); err != nil {
			return usagef("%v", err)
		}
	}
	data, err := c.api.callJSON(ctx, http.MethodPatch, "/v1/instances/"+seg(args[0])+"/variables", nil, vars)
	if err != nil || c.json() {
		return c.done(data, err)
	}
	var out wire.VariablesSet
	if err := decode(data, &out); err != nil {
		return err
	}
	t := newTable(&c.out, "NAME", "VALUE")
	variablesTable(t, out.Variables)
	t.flush()
	return nil
}

func migrate(fs *flag.FlagSet) action {
	var to optInt
	fs.Var(&to, "to", "the target `VERSION` (required)")
	mapping := mapFlag{}
	fs.Var(mapping, "map", "map element `OLD=NEW` (repeatable; an element not named keeps its id)")
	check := fs.Bool("check", false, "change nothing: print where each token would land, or the refusal the migration would meet")
	return func(ctx context.Context, c *cli, args []string) error {
		if !to.set {
			return usagef("--to is required")
		}
		body := wire.MigrateRequest{TargetVersion: to.v, Mapping: mapping}
		if *check {
			return migrateCheck(ctx, c, args[0], body)
		}
		data, err := c.api.callJSON(ctx, http.MethodPost, "/v1/instances/"+seg(args[0])+"/migrate", nil, body)
		if err != nil || c.json() {
			return c.done(data, err)
		}
		var out wire.Migrated
		if err := decode(data, &out); err != nil {
			return err
		}
		t := newTable(&c.out, "INSTANCE", "DEFINITION")
		t.row(out.InstanceID, defRef(out.Definition))
		t.flush()
		return nil
	}
}

// migrateCheck asks the migration's preflight; a migration it finds
// refused is reported as that refusal would be (exit 1).
func migrateCheck(ctx context.Context, c *cli, id string, body wire.MigrateRequest) error {
	data, err := c.api.callJSON(ctx, http.MethodPost, "/v1/instances/"+seg(id)+"/migrate/preflight", nil, body)
	if err != nil || c.json() {
		return c.done(data, err)
	}
	var p wire.MigrationPreflight
	if err := decode(data, &p); err != nil {
		return err
	}
	if !p.OK {
		return &apiError{status: p.Status, code: p.Code, detail: "the migration would be refused: " + p.Detail, instanceID: p.InstanceID}
	}
	t := newTable(&c.out, "TOKEN", "FROM", "TO", "WAIT")
	for _, tk := range p.Tokens {
		t.row(tk.ID, tk.From, tk.To, tk.Wait)
	}
	t.flush()
	return nil
}

func migrationsStart(fs *flag.FlagSet) action {
	definition := fs.String("definition", "", "the definition `KEY` (required)")
	var from, to optInt
	fs.Var(&from, "from", "migrate the active instances of this `VERSION` (required)")
	fs.Var(&to, "to", "to this `VERSION` (required)")
	mapping := mapFlag{}
	fs.Var(mapping, "map", "map element `OLD=NEW` (repeatable; an element not named keeps its id)")
	return func(ctx context.Context, c *cli, _ []string) error {
		if *definition == "" || !from.set || !to.set {
			return usagef("--definition, --from and --to are required")
		}
		body := wire.MigrationRequest{Definition: *definition, FromVersion: from.v, ToVersion: to.v, Mapping: mapping}
		data, err := c.api.callJSON(ctx, http.MethodPost, "/v1/migrations", nil, body)
		if err != nil || c.json() {
			return c.done(data, err)
		}
		var out wire.MigrationStarted
		if err := decode(data, &out); err != nil {
			return err
		}
		t := newTable(&c.out, "MIGRATION")
		t.row(out.ID)
		t.flush()
		fmt.Fprintf(c.stderr, "follow it with: sutractl migrations get %s\n", out.ID)
		return nil
	}
}

func migrationsGet(ctx context.Context, c *cli, args []string) error {
	data, err := c.api.call(ctx, http.MethodGet, "/v1/migrations/"+seg(args[0]), nil, nil, "")
	if err != nil || c.json() {
		return c.done(data, err)
	}
	var m wire.Migration
	if err := decode(data, &m); err != nil {
		return err
	}
	t := newTable(&c.out, "MIGRATION", "DEFINITION", "FROM", "TO", "STATE", "TOTAL", "MIGRATED", "RETRYING", "REFUSED", "UPDATED")
	t.row(m.ID, m.Definition, strconv.Itoa(m.FromVersion), strconv.Itoa(m.ToVersion), m.State, strconv.Itoa(m.Total),
		strconv.Itoa(m.Migrated), strconv.Itoa(m.Retrying), strconv.Itoa(len(m.Refused)), stamp(m.UpdatedAt))
	t.flush()
	if len(m.Refused) > 0 {
		t = section(&c.out, "REFUSED", "INSTANCE", "CODE", "DETAIL")
		for _, r := range m.Refused {
			t.row(r.InstanceID, r.Code, r.Detail)
		}
		t.flush()
	}
	return nil
}

func instancesHistory(fs *flag.FlagSet) action {
	var p pageFlags
	p.register(fs)
	return func(ctx context.Context, c *cli, args []string) error {
		items, err := c.list(ctx, "/v1/instances/"+seg(args[0])+"/history", "steps", url.Values{}, &p)
		if err != nil || c.json() {
			return err
		}
		t := newTable(&c.out, "STEP", "COMMITTED", "CAUSE", "OWNER", "RELAY", "BOUNCES", "DETAIL")
		for _, raw := range items {
			var s wire.HistoryStep
			if err := decode(raw, &s); err != nil {
				return err
			}
			bounces := "-"
			if s.Bounces != nil {
				bounces = strconv.Itoa(*s.Bounces)
			}
			t.row(strconv.FormatInt(s.Version, 10), stamp(s.CommittedAt), s.Cause, s.Owner, deref(s.MessageID), bounces, s.Detail)
		}
		t.flush()
		return nil
	}
}

func incidentsList(fs *flag.FlagSet) action {
	var p pageFlags
	p.register(fs)
	var open optBool
	fs.Var(&open, "open", "only open incidents (--open=false: only resolved ones)")
	instanceID := fs.String("instance", "", "only the incidents of this instance `ID`")
	return func(ctx context.Context, c *cli, _ []string) error {
		q := url.Values{}
		if open.set {
			q.Set("open", strconv.FormatBool(open.v))
		}
		if *instanceID != "" {
			q.Set("instance_id", *instanceID)
		}
		items, err := c.list(ctx, "/v1/incidents", "incidents", q, &p)
		if err != nil || c.json() {
			return err
		}
		t := newTable(&c.out, "ID", "INSTANCE", "TOKEN", "ELEMENT", "CODE", "CREATED", "RESOLVED", "MESSAGE")
		for _, raw := range items {
			var i wire.Incident
			if err := decode(raw, &i); err != nil {
				return err
			}
			t.row(strconv.FormatInt(i.ID, 10), i.InstanceID, i.Token, i.Element, i.Code, stamp(i.CreatedAt), stampOf(i.ResolvedAt), i.Message)
		}
		t.flush()
		return nil
	}
}

func incidentsRetry(fs *flag.FlagSet) action {
	vars := varsFlag{}
	fs.Var(vars, "var", "merge variable `NAME=JSON` before the retry (repeatable)")
	var retries optInt
	fs.Var(&retries, "retries", "`N` attempts a failed task gets again (default: the retries its model gives it)")
	return func(ctx context.Context, c *cli, args []string) error {
		body := wire.RetryRequest{Variables: vars, Retries: retries.v}
		data, err := c.api.callJSON(ctx, http.MethodPost, "/v1/incidents/"+seg(args[0])+"/retry", nil, body)
		if err != nil || c.json() {
			return c.done(data, err)
		}
		var out wire.IncidentRetried
		if err := decode(data, &out); err != nil {
			return err
		}
		t := newTable(&c.out, "INCIDENT", "INSTANCE", "RESOLVED")
		t.row(strconv.FormatInt(out.IncidentID, 10), out.InstanceID, yesNo(out.Resolved))
		t.flush()
		return nil
	}
}

func outboxParked(fs *flag.FlagSet) action {
	var p pageFlags
	p.register(fs)
	instanceID := fs.String("instance", "", "only the parked messages of this instance `ID`")
	return func(ctx context.Context, c *cli, _ []string) error {
		q := url.Values{}
		if *instanceID != "" {
			q.Set("instance_id", *instanceID)
		}
		items, err := c.list(ctx, "/v1/outbox/parked", "parked", q, &p)
		if err != nil || c.json() {
			return err
		}
		t := newTable(&c.out, "ID", "INSTANCE", "ELEMENT", "MESSAGE", "CORRELATION_KEY", "ATTEMPTS", "PARKED", "REASON")
		for _, raw := range items {
			var m wire.ParkedMessage
			if err := decode(raw, &m); err != nil {
				return err
			}
			t.row(m.ID, m.InstanceID, m.ElementID, m.Message, m.CorrelationKey, strconv.Itoa(m.Attempts), stamp(m.ParkedAt), m.Reason)
		}
		t.flush()
		return nil
	}
}

// outboxSettle retries or discards a parked message (op: retry, discard).
func outboxSettle(op string) action {
	return func(ctx context.Context, c *cli, args []string) error {
		data, err := c.api.callJSON(ctx, http.MethodPost, "/v1/outbox/parked/"+seg(args[0])+"/"+op, nil, struct{}{})
		if err != nil || c.json() {
			return c.done(data, err)
		}
		var out wire.ParkedSettled
		if err := decode(data, &out); err != nil {
			return err
		}
		t := newTable(&c.out, "ID", "STATUS")
		t.row(out.ID, out.Status)
		t.flush()
		return nil
	}
}

func deploy(ctx context.Context, c *cli, args []string) error {
	xml, err := os.ReadFile(args[0])
	if err != nil {
		return usagef("%v", err)
	}
	data, err := c.api.call(ctx, http.MethodPost, "/v1/definitions", nil, xml, "application/xml")
	if err != nil || c.json() {
		return c.done(data, err)
	}
	var out wire.Deployment
	if err := decode(data, &out); err != nil {
		return err
	}
	result := func(unchanged bool) string {
		if unchanged {
			return "unchanged"
		}
		return "deployed"
	}
	if out.Kind == "dmn" {
		t := newTable(&c.out, "DECISION", "VERSION", "VERSION_TAG", "RESULT")
		for _, d := range out.Decisions {
			t.row(d.DecisionID, strconv.Itoa(d.Version), d.VersionTag, result(d.Unchanged))
		}
		t.flush()
		return nil
	}
	t := newTable(&c.out, "DEFINITION", "VERSION", "RESULT")
	for _, d := range out.Definitions {
		t.row(d.Key, strconv.Itoa(d.Version), result(d.Unchanged))
	}
	t.flush()
	return nil
}

func decisionsList(fs *flag.FlagSet) action {
	var p pageFlags
	p.register(fs)
	return func(ctx context.Context, c *cli, _ []string) error {
		items, err := c.list(ctx, "/v1/decisions", "decisions", url.Values{}, &p)
		if err != nil || c.json() {
			return err
		}
		t := newTable(&c.out, "DECISION", "VERSION", "VERSION_TAG", "NAME", "DEPLOYED")
		for _, raw := range items {
			var d wire.Decision
			if err := decode(raw, &d); err != nil {
				return err
			}
			tag := ""
			if d.VersionTag != nil {
				tag = *d.VersionTag
			}
			t.row(d.DecisionID, strconv.Itoa(d.Version), tag, d.Name, stamp(d.DeployedAt))
		}
		t.flush()
		return nil
	}
}

func decisionsEvaluate(fs *flag.FlagSet) action {
	vars := varsFlag{}
	fs.Var(vars, "var", "an input variable `NAME=JSON` (repeatable)")
	var version optInt
	fs.Var(&version, "version", "evaluate this `VERSION` (default: the latest)")
	return func(ctx context.Context, c *cli, args []string) error {
		body := wire.EvaluationRequest{Variables: vars, Version: version.v}
		data, err := c.api.callJSON(ctx, http.MethodPost, "/v1/decisions/"+seg(args[0])+"/evaluation", nil, body)
		if err != nil || c.json() {
			return c.done(data, err)
		}
		var out wire.Evaluation
		if err := decode(data, &out); err != nil {
			return err
		}
		t := newTable(&c.out, "DECISION", "OUTPUT", "MATCHED_RULES")
		for _, d := range out.Decisions {
			output, err := json.Marshal(d.Output)
			if err != nil {
				return err
			}
			rules := make([]string, len(d.MatchedRules))
			for i, r := range d.MatchedRules {
				rules[i] = r.RuleID
			}
			t.row(d.DecisionID, string(output), strings.Join(rules, ","))
		}
		t.flush()
		return nil
	}
}

func definitionsList(ctx context.Context, c *cli, _ []string) error {
	data, err := c.api.call(ctx, http.MethodGet, "/v1/definitions", nil, nil, "")
	if err != nil || c.json() {
		return c.done(data, err)
	}
	var out wire.Definitions
	if err := decode(data, &out); err != nil {
		return err
	}
	t := newTable(&c.out, "DEFINITION", "LATEST", "VERSIONS")
	for _, d := range out.Definitions {
		versions := make([]string, len(d.Versions))
		for i, v := range d.Versions {
			versions[i] = strconv.Itoa(v)
		}
		t.row(d.Key, strconv.Itoa(d.Latest), strings.Join(versions, ","))
	}
	t.flush()
	return nil
}

// definitionsGet prints the XML as it came, whatever -o says: it is the
// file, not a table.
func definitionsGet(ctx context.Context, c *cli, args []string) error {
	if _, err := strconv.Atoi(args[1]); err != nil {
		return usagef("VERSION %q is not a number", args[1])
	}
	data, err := c.api.call(ctx, http.MethodGet, "/v1/definitions/"+seg(args[0])+"/versions/"+args[1], nil, nil, "")
	if err != nil {
		return err
	}
	c.out.Write(data)
	return nil
}

func messagesPublish(fs *flag.FlagSet) action {
	message := fs.String("message", "", "the BPMN message `NAME` (required)")
	var key, instanceID optString
	fs.Var(&key, "key", "correlate by this correlation `KEY`")
	fs.Var(&instanceID, "instance", "deliver to this instance `ID`")
	vars := varsFlag{}
	fs.Var(vars, "var", "a message variable `NAME=JSON` (repeatable)")
	ttl := fs.String("ttl", "", "buffer the message for this ISO 8601 `DURATION` (PT10M) until a subscription matches")
	id := fs.String("id", "", "the message `ID`, its dedupe key (default: the worker makes one)")
	return func(ctx context.Context, c *cli, _ []string) error {
		switch {
		case *message == "":
			return usagef("--message is required")
		case key.set && instanceID.set:
			return usagef("--key and --instance exclude each other")
		}
		body := wire.MessageRequest{Message: *message, CorrelationKey: key.v, InstanceID: instanceID.v, Variables: vars,
			TTL: *ttl, MessageID: *id}
		data, err := c.api.callJSON(ctx, http.MethodPost, "/v1/messages", nil, body)
		if err != nil || c.json() {
			return c.done(data, err)
		}
		var out wire.MessagePublished
		if err := decode(data, &out); err != nil {
			return err
		}
		t := newTable(&c.out, "MESSAGE_ID")
		t.row(out.MessageID)
		t.flush()
		return nil
	}
}

func signalsBroadcast(fs *flag.FlagSet) action {
	name := fs.String("name", "", "the BPMN signal `NAME` (required)")
	vars := varsFlag{}
	fs.Var(vars, "var", "a signal variable `NAME=JSON` (repeatable)")
	return func(ctx context.Context, c *cli, _ []string) error {
		if *name == "" {
			return usagef("--name is required")
		}
		data, err := c.api.callJSON(ctx, http.MethodPost, "/v1/signals", nil, wire.SignalRequest{Name: *name, Variables: vars})
		if err != nil || c.json() {
			return c.done(data, err)
		}
		var out wire.SignalBroadcast
		if err := decode(data, &out); err != nil {
			return err
		}
		t := newTable(&c.out, "SIGNAL_ID", "SUBSCRIPTIONS", "STARTS")
		t.row(out.SignalID, strconv.Itoa(out.Subscriptions), strconv.Itoa(out.Starts))
		t.flush()
		return nil
	}
}

func userTasksList(fs *flag.FlagSet) action {
	var p pageFlags
	p.register(fs)
	filters := []struct{ flag, param, usage string }{
		{"assignee", "assignee", "only tasks assigned to this `USER`"},
		{"candidate-group", "candidate_group", "only tasks this `GROUP` may claim"},
		{"candidate-user", "candidate_user", "only tasks this `USER` may claim"},
		{"state", "state", "only tasks in this `STATE`: created, completing"},
	}
	values := make([]*string, len(filters))
	for i, f := range filters {
		values[i] = fs.String(f.flag, "", f.usage)
	}
	return func(ctx context.Context, c *cli, _ []string) error {
		q := url.Values{}
		for i, f := range filters {
			if *values[i] != "" {
				q.Set(f.param, *values[i])
			}
		}
		items, err := c.list(ctx, "/v1/user-tasks", "user_tasks", q, &p)
		if err != nil || c.json() {
			return err
		}
		t := newTable(&c.out, "ID", "INSTANCE", "ELEMENT", "STATE", "ASSIGNEE", "CANDIDATE_GROUPS", "CANDIDATE_USERS", "PRIORITY", "DUE", "CREATED")
		for _, raw := range items {
			var u wire.UserTask
			if err := decode(raw, &u); err != nil {
				return err
			}
			t.row(u.ID, u.InstanceID, u.Element, u.State, deref(u.Assignee), strings.Join(u.CandidateGroups, ","),
				strings.Join(u.CandidateUsers, ","), strconv.Itoa(u.Priority), deref(u.DueDate), stamp(u.CreatedAt))
		}
		t.flush()
		return nil
	}
}

func userTasksGet(ctx context.Context, c *cli, args []string) error {
	data, err := c.api.call(ctx, http.MethodGet, "/v1/user-tasks/"+seg(args[0]), nil, nil, "")
	if err != nil || c.json() {
		return c.done(data, err)
	}
	var u wire.UserTask
	if err := decode(data, &u); err != nil {
		return err
	}
	form := deref(u.FormKey)
	if form == "" {
		form = deref(u.FormID)
	}
	t := newTable(&c.out, "ID", "INSTANCE", "ELEMENT", "DEFINITION", "STATE", "ASSIGNEE", "CANDIDATE_GROUPS", "CANDIDATE_USERS", "PRIORITY", "DUE", "FORM", "CREATED")
	t.row(u.ID, u.InstanceID, u.Element, defRef(u.Definition), u.State, deref(u.Assignee), strings.Join(u.CandidateGroups, ","),
		strings.Join(u.CandidateUsers, ","), strconv.Itoa(u.Priority), deref(u.DueDate), form, stamp(u.CreatedAt))
	t.flush()
	if len(u.Variables) > 0 {
		t = section(&c.out, "VARIABLES", "NAME", "VALUE")
		variablesTable(t, u.Variables)
		t.flush()
	}
	return nil
}

func userTasksAssign(fs *flag.FlagSet) action {
	unassign := fs.Bool("unassign", false, "remove the assignee")
	return func(ctx context.Context, c *cli, args []string) error {
		var assignee *string
		switch {
		case *unassign && len(args) == 2:
			return usagef("USER and --unassign exclude each other")
		case !*unassign && len(args) == 1:
			return usagef("name the USER, or --unassign")
		case !*unassign:
			assignee = &args[1]
		}
		body := wire.AssignmentRequest{Assignee: assignee}
		data, err := c.api.callJSON(ctx, http.MethodPost, "/v1/user-tasks/"+seg(args[0])+"/assignment", nil, body)
		if err != nil {
			return err
		}
		// 204: assigned; 202 {"state": "assigning"}: recorded, to take
		// effect once the task's assigning listeners are done.
		var accepted wire.AssignmentAccepted
		pending := len(data) > 0 && json.Unmarshal(data, &accepted) == nil && accepted.State == "assigning"
		if c.json() {
			if pending {
				return c.done(data, nil)
			}
			return nil // 204: no JSON to print
		}
		if pending {
			fmt.Fprintf(&c.out, "user task %s is assigning: the assignment takes effect once its assigning listeners are done\n", args[0])
			return nil
		}
		if assignee == nil {
			fmt.Fprintf(&c.out, "user task %s unassigned\n", args[0])
		} else {
			fmt.Fprintf(&c.out, "user task %s assigned to %s\n", args[0], *assignee)
		}
		return nil
	}
}

func userTasksUpdate(fs *flag.FlagSet) action {
	var u wire.UserTaskUpdate
	names := func(dst **[]string) func(string) error {
		return func(v string) error {
			list := []string{}
			if v != "" {
				list = strings.Split(v, ",")
			}
			*dst = &list
			return nil
		}
	}
	date := func(dst **string) func(string) error {
		return func(v string) error { *dst = &v; return nil }
	}
	fs.Func("candidate-groups", "set the candidate groups to `A,B` (\"\" clears them)", names(&u.CandidateGroups))
	fs.Func("candidate-users", "set the candidate users to `A,B` (\"\" clears them)", names(&u.CandidateUsers))
	fs.Func("due-date", "set the due date to `TIME` (RFC 3339; \"\" clears it)", date(&u.DueDate))
	fs.Func("follow-up-date", "set the follow-up date to `TIME` (RFC 3339; \"\" clears it)", date(&u.FollowUpDate))
	fs.Func("priority", "set the priority to `N` (0 to 100)", func(v string) error {
		n, err := strconv.Atoi(v)
		u.Priority = &n
		return err
	})
	return func(ctx context.Context, c *cli, args []string) error {
		if u == (wire.UserTaskUpdate{}) {
			return usagef("name at least one field to change")
		}
		data, err := c.api.callJSON(ctx, http.MethodPatch, "/v1/user-tasks/"+seg(args[0]), nil, u)
		if err != nil {
			return err
		}
		// 204: updated; 202 {"state": "updating"}: recorded, to take effect
		// once the task's updating listeners are done.
		var accepted wire.UpdateAccepted
		pending := len(data) > 0 && json.Unmarshal(data, &accepted) == nil && accepted.State == "updating"
		switch {
		case c.json() && pending:
			return c.done(data, nil)
		case c.json():
			return nil // 204: no JSON to print
		case pending:
			fmt.Fprintf(&c.out, "user task %s is updating: the update takes effect once its updating listeners are done\n", args[0])
		default:
			fmt.Fprintf(&c.out, "user task %s updated\n", args[0])
		}
		return nil
	}
}

func userTasksComplete(fs *flag.FlagSet) action {
	vars := varsFlag{}
	fs.Var(vars, "var", "a result variable `NAME=JSON` (repeatable)")
	override := fs.Bool("override", false, "complete a task assigned to someone other than the caller")
	return func(ctx context.Context, c *cli, args []string) error {
		body := wire.CompletionRequest{Variables: vars, Override: *override}
		if _, err := c.api.callJSON(ctx, http.MethodPost, "/v1/user-tasks/"+seg(args[0])+"/completion", nil, body); err != nil {
			return err
		}
		if !c.json() {
			fmt.Fprintf(&c.out, "user task %s completed\n", args[0])
		}
		return nil
	}
}

// done ends a command whose -o json output is the answer itself.
func (c *cli) done(data []byte, err error) error {
	if err != nil {
		return err
	}
	return printJSON(&c.out, data)
}

// decode reads an answer into v; a shape the API should never send is an
// error, not a table of zeros.
func decode(data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("the API's answer is not what docs/openapi.yaml describes: %w", err)
	}
	return nil
}

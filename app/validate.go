package app

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"

	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sutra-run/worker/api"
	"github.com/sutra-run/worker/api/tasks"
	"github.com/sutra-run/worker/broker"
	"github.com/sutra-run/worker/fault"
)

// Validate refuses values that cannot work, naming the variable: a worker
// started with them would run differently than configured (a zero that
// silently became a default) or not at all.
func (c Config) Validate() error {
	var errs []error
	bad := func(name, format string, args ...any) {
		errs = append(errs, fault.New(fault.ConfigInvalid, "SUTRA_%s: %s", name, fmt.Sprintf(format, args...)))
	}
	between := func(name string, v, lo, hi int) {
		if v < lo || v > hi {
			bad(name, "%d is not between %d and %d", v, lo, hi)
		}
	}
	positive := func(name string, d time.Duration) {
		if d <= 0 {
			bad(name, "%s is not a positive duration", d)
		}
	}
	between("LANES", c.Lanes.Count, 1, 1024)
	between("MAX_COMMIT_BYTES", c.MaxCommitBytes, 1<<20, 256<<20)
	between("SIGNAL_BROADCAST_PAGE", c.SignalBroadcastPage, 1, 100_000)
	between("MAX_VARIABLES_BYTES", c.MaxVariablesBytes, 1024, c.MaxCommitBytes)
	between("FEEL_MAX_STEPS", c.FeelMaxSteps, 1000, 1<<30)
	between("FEEL_MAX_BYTES", c.FeelMaxBytes, 64<<10, 1<<30)
	between("PREFETCH", c.Prefetch, 1, 65535)
	between("BATCH_MAX", c.BatchMax, 1, 1024)
	between("RELAY_MAX_RETRIES", c.Consumer.MaxRetries, 1, 1_000_000)
	between("TIMER_BATCH", c.Timers.Batch, 1, 10_000)
	between("TIMER_MAX_IN_FLIGHT", c.Timers.MaxInFlight, 1, 100_000)
	between("TIMER_MAX_ATTEMPTS", c.Timers.MaxAttempts, 1, 1_000_000)
	between("OUTBOX_MAX_ATTEMPTS", c.Outbox.MaxAttempts, 1, 1_000_000)
	between("API_MAX_TASKS", c.Tasks.MaxTasks, 1, 10_000)
	between("API_MAX_TOPICS", c.Tasks.MaxTopics, 1, 10_000)
	between("API_MAX_LONG_POLLS", c.Tasks.MaxLongPolls, 1, 1_000_000)
	between("API_MAX_CONNS", c.API.MaxConns, 1, 1_000_000)
	between("API_MAX_DB_CONNS", c.API.MaxDBConns, 1, 256)
	for name, v := range map[string]int64{"API_MAX_BODY": c.API.MaxBody, "API_MAX_DEPLOY_BODY": c.API.MaxDeployBody} {
		if v < 1024 || v > c.API.MaxBytesInFlight {
			bad(name, "%d is not between 1024 and SUTRA_API_MAX_BYTES_IN_FLIGHT (%d)", v, c.API.MaxBytesInFlight)
		}
	}
	if fetch := tasks.FetchBodyLimit(c.Tasks.MaxTopics); fetch > c.API.MaxBytesInFlight {
		bad("API_MAX_TOPICS", "%d allows fetchAndLock bodies of %d bytes, over SUTRA_API_MAX_BYTES_IN_FLIGHT (%d)", c.Tasks.MaxTopics, fetch, c.API.MaxBytesInFlight)
	}
	for name, d := range map[string]time.Duration{
		"CLAIM_TIMEOUT": c.ClaimTimeout, "SHUTDOWN_TIMEOUT": c.ShutdownTimeout, "STEP_TIMEOUT": c.StepTimeout,
		"REQUEUE_BACKOFF": c.RequeueBackoff, "REQUEUE_BACKOFF_MAX": c.RequeueBackoffMax,
		"TIMER_POLL_INTERVAL": c.Timers.PollInterval, "TIMER_LEASE": c.Timers.Lease,
		"TIMER_BACKOFF": c.Timers.Backoff, "TIMER_BACKOFF_MAX": c.Timers.BackoffMax,
		"SWEEP_INTERVAL": c.Sweeper.Interval, "LEASE_TTL": c.LeaseTTL, "INBOX_RETENTION": c.InboxRetention, "STEP_HISTORY_RETENTION": c.StepHistoryRetention,
		"API_MAX_LOCK_DURATION": c.Tasks.MaxLockDuration, "TASK_POLL_INTERVAL": c.Tasks.PollInterval, "API_MAX_RETRY_TIMEOUT": c.Tasks.MaxRetryTimeout,
		"AMQP_WRITE_TIMEOUT": c.Broker.WriteTimeout, "AMQP_CHANNEL_TIMEOUT": c.Broker.ChannelTimeout,
	} {
		positive(name, d)
	}
	if c.OAuthTokenTTL < time.Second || c.OAuthTokenTTL%time.Second != 0 {
		// expires_in is whole seconds, and so is the token's expiry.
		bad("OAUTH_TOKEN_TTL", "%s is not a whole number of seconds, at least 1s", c.OAuthTokenTTL)
	}
	if c.StepTimeout >= c.ClaimTimeout {
		// The sweep would take the claim of a step still within its deadline.
		bad("STEP_TIMEOUT", "%s is not below SUTRA_CLAIM_TIMEOUT (%s)", c.StepTimeout, c.ClaimTimeout)
	}
	if c.BatchWait < 0 || c.BatchWait > 100*time.Millisecond {
		// Every relay of a steady load may wait this long, twice.
		bad("BATCH_WAIT", "%s is not between 0 and 100ms", c.BatchWait)
	}
	if c.Timers.Batch > c.Timers.MaxInFlight {
		bad("TIMER_BATCH", "%d is above SUTRA_TIMER_MAX_IN_FLIGHT (%d)", c.Timers.Batch, c.Timers.MaxInFlight)
	}
	if c.RequeueBackoffMax < c.RequeueBackoff {
		bad("REQUEUE_BACKOFF_MAX", "%s is below SUTRA_REQUEUE_BACKOFF (%s)", c.RequeueBackoffMax, c.RequeueBackoff)
	}
	if c.Timers.BackoffMax < c.Timers.Backoff {
		bad("TIMER_BACKOFF_MAX", "%s is below SUTRA_TIMER_BACKOFF (%s)", c.Timers.BackoffMax, c.Timers.Backoff)
	}
	if _, err := pgconn.ParseConfig(c.Database.URL); err != nil {
		bad("DATABASE_URL", "%q is not a PostgreSQL URL (postgres://user@host:5432/db) or key=value string", Redact(c.Database.URL))
	}
	if _, err := broker.Nodes(c.Broker.URL); err != nil {
		bad("AMQP_URL", "%q is not an amqp:// or amqps:// URL or a comma-separated list of the URLs of one cluster's nodes: %s", Redact(c.Broker.URL), redactIn(err.Error(), c.Broker.URL))
	}
	if c.ReplicaID != "" && strings.ContainsAny(c.ReplicaID, "/ \t\n") {
		bad("REPLICA_ID", "%q contains a slash or white space (it is a part of claim owners <replica>/lane/<n>)", c.ReplicaID)
	}
	switch {
	case (c.API.TLSCert == "") != (c.API.TLSKey == ""):
		bad("API_TLS_CERT", "set SUTRA_API_TLS_CERT and SUTRA_API_TLS_KEY together, or neither")
	case c.API.TLSCert != "":
		if _, err := tls.LoadX509KeyPair(c.API.TLSCert, c.API.TLSKey); err != nil {
			bad("API_TLS_CERT", "the certificate and SUTRA_API_TLS_KEY do not load: %v", err)
		}
	}
	return errors.Join(errs...)
}

// apiAuth refuses credentials that would open the API listener wider than
// asked: a task API with no token (anyone who reaches the port could lock
// tasks and read their variables) unless SUTRA_API_INSECURE says so, an
// admin token equal to the task token (a task worker's credential would
// cancel instances), and SUTRA_ADMIN_INSECURE beside a token (an admin API
// open to every caller next to a guarded one is a setting left over, not a
// choice: before SUTRA_ADMIN_TOKEN it did nothing beside SUTRA_API_TOKEN).
// app.Start checks it first, before it opens anything (cmd/worker exits 2),
// so that no embedding of the worker opens the API by omission; Validate
// does not, because migrate and deploy listen on nothing and run without a
// token.
func (c Config) apiAuth() error {
	if c.API.Addr == "" {
		return nil
	}
	switch {
	case c.API.Token == "" && !c.API.Insecure:
		return fault.New(fault.ConfigInvalid, "SUTRA_API_TOKEN is not set and the API listener is on (SUTRA_API_ADDR=%s): "+
			"set SUTRA_API_TOKEN, or SUTRA_API_INSECURE=true to serve every caller on a trusted network, or SUTRA_API_ADDR= to turn the listener off", c.API.Addr)
	case c.AdminToken != "" && c.AdminToken == c.API.Token:
		return fault.New(fault.ConfigInvalid, "SUTRA_ADMIN_TOKEN is SUTRA_API_TOKEN: every task worker could cancel instances; "+
			"give the admin API a token of its own")
	case c.AdminInsecure && c.AdminToken != "":
		return fault.New(fault.ConfigInvalid, "SUTRA_ADMIN_INSECURE=true and SUTRA_ADMIN_TOKEN are both set: "+
			"keep the token (the admin API then takes it), or unset it to open the admin API to every caller on a trusted network")
	case c.AdminInsecure && c.API.Token != "":
		return fault.New(fault.ConfigInvalid, "SUTRA_ADMIN_INSECURE=true would open the admin API to every caller while the task API takes SUTRA_API_TOKEN: "+
			"set SUTRA_ADMIN_TOKEN instead (the admin API no longer takes SUTRA_API_TOKEN)")
	}
	return nil
}

// PoolSize is the database pool a worker opens: a connection per lane, two
// for the timer poller, the sweeper, the outbox publisher, the replica
// registration and the admin lane (each holds one for a statement at a
// time), and the API's share, which it never exceeds (SUTRA_API_MAX_DB_CONNS).
func (c Config) PoolSize() int {
	n := c.API.MaxDBConns
	if n == 0 {
		n = api.DefaultMaxDBConns
	}
	return c.Lanes.Count + 2 + n
}

// Redact hides the password of a URL, or of each URL of a broker's list.
func Redact(raw string) string {
	if strings.Count(raw, "://") < 2 {
		return redactURL(raw)
	}
	urls := strings.Split(raw, ",") // a broker's list of nodes
	for i, u := range urls {
		urls[i] = redactURL(u)
	}
	return strings.Join(urls, ",")
}

// userPassword is the password of a URL that url.Parse refuses (a libpq
// multi-host URL: postgres://user:password@h1:5432,h2:5432/db).
var userPassword = regexp.MustCompile(`(://[^:/@]*:)[^@/]*@`)

func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return userPassword.ReplaceAllString(raw, "${1}xxxxx@")
	}
	if u.User == nil {
		return raw
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// redactIn hides in msg the passwords of the URLs of list.
func redactIn(msg, list string) string {
	for _, raw := range strings.Split(list, ",") {
		if u, err := url.Parse(strings.TrimSpace(raw)); err == nil && u.User != nil {
			if p, ok := u.User.Password(); ok && p != "" {
				msg = strings.ReplaceAll(msg, p, "xxxxx")
			}
		}
	}
	return msg
}

// UnknownVariables lists the SUTRA_* variables of environ that the worker
// does not read (a typo like SUTRA_LANE=4 is otherwise silently ignored).
// SUTRA_TEST_* are the test suite's and are left out.
func UnknownVariables(environ []string) []string {
	known := map[string]bool{}
	for _, v := range Variables() {
		known[v.Name] = true
	}
	var unknown []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "SUTRA_") && !strings.HasPrefix(name, "SUTRA_TEST_") && !known[name] {
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	return unknown
}

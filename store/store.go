// Package store owns the PostgreSQL pool, the embedded migrations and every
// query. Driver errors are translated here into fault codes and sentinels so
// that callers never inspect pgx errors.
package store

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/defaults"
)

// Store is the worker's handle on PostgreSQL.
type Store struct {
	pool       *pgxpool.Pool
	syncClaims bool
	// outboxWritten, when set, hears of every commit that wrote outbox rows
	// (NotifyOutbox).
	outboxWritten func()
	// processes caches parsed definitions by key+version; they are immutable.
	processes sync.Map // defKey → *bpmn.Process
	// drgs caches parsed DMN files by checksum; they are immutable.
	drgs sync.Map // checksum → *dmn.Definitions
	// maxVariablesBytes and maxCommitBytes are the limits of a step (limits.go).
	maxVariablesBytes, maxCommitBytes int
	// broadcastPage is how many signal subscriptions one transaction of a
	// broadcast reads (BroadcastSignal).
	broadcastPage int
	// origin names this store in its notices of tasks created
	// (queueTasksNotice), so that it skips its own (ListenTasks).
	origin string
	// outcomes is the group commit of task outcomes (RecordOutcome);
	// locks the group of the fetches of created tasks (LockCreated).
	outcomes *group[TaskReport, *Recorded]
	locks    *group[lockAsk, []LockedTask]
}

// Options tunes Open.
type Options struct {
	MaxConns int32
	// SyncClaims makes claims and releases wait for the WAL flush too
	// (for measuring what skipping it saves).
	SyncClaims bool
	// MaxVariablesBytes and MaxCommitBytes are the limits of what one step
	// may write (limits.go); zero: DefaultMaxVariablesBytes,
	// DefaultMaxCommitBytes.
	MaxVariablesBytes, MaxCommitBytes int
	// BroadcastPage is how many signal subscriptions one transaction of a
	// signal broadcast reads; zero: DefaultBroadcastPage.
	BroadcastPage int
}

// DefaultBroadcastPage is the default Options.BroadcastPage.
const DefaultBroadcastPage = 1000

// asyncCommit makes the rest of the current transaction commit without
// waiting for the WAL flush. Only claims and releases run it: they are soft
// state that the commit fence re-checks, so losing one in a database crash
// is safe. Every other write keeps the server's synchronous_commit, so what
// the worker acks or answers with success is durable by construction.
const asyncCommit = "SELECT set_config('synchronous_commit', 'off', true)"

// commitPlans are the planner settings of every commit, local to its
// transaction. Generic plans: each statement runs the cached generic plan
// tools/bench/plans checks; left to choose, PostgreSQL planned the delete that
// closes a step's subscriptions anew on every step (its generic estimate for
// an unnest is ten rows), which cost more than running it, while every other
// statement of a commit already ran its generic plan (pg_prepared_statements,
// counted in make bench). By key: every statement of a commit reads its rows
// by key, and the joins of its parameter arrays with the wait tables,
// planned once per connection from that estimate while a table is small,
// would read the table whole on every commit ever after (tools/bench/plans/new).
const commitPlans = "SELECT " + genericPlansSetting + ", " + byKeySetting

const (
	genericPlansSetting = "set_config('plan_cache_mode', 'force_generic_plan', true)"
	byKeySetting        = "set_config('enable_seqscan', 'off', true)"
)

// Open connects a pool to url.
func Open(ctx context.Context, url string, opt Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parsing database URL: %w", err)
	}
	if opt.MaxConns > 0 {
		cfg.MaxConns = opt.MaxConns
	}
	followPrimary(cfg.ConnConfig)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fault.Wrap(fault.Unavailable, err, "opening database pool")
	}
	defaults.Set(&opt.MaxVariablesBytes, DefaultMaxVariablesBytes)
	defaults.Set(&opt.MaxCommitBytes, DefaultMaxCommitBytes)
	defaults.Set(&opt.BroadcastPage, DefaultBroadcastPage)
	s := &Store{pool: pool, syncClaims: opt.SyncClaims, maxVariablesBytes: opt.MaxVariablesBytes, maxCommitBytes: opt.MaxCommitBytes,
		broadcastPage: opt.BroadcastPage, origin: newOrigin()}
	s.outcomes, s.locks = s.newOutcomeGroup(), s.newLockGroup()
	return s, nil
}

// Pool exposes the pool to packages that run their own typed queries here.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close closes the pool.
func (s *Store) Close() { s.pool.Close() }

// Ping reports whether the database answers and takes writes: a server
// that answers read-only (a standby, a demoted primary) is ErrReadOnly
// with fault.Unavailable, and the connection that asked is closed so that
// the pool's next one looks for the primary again.
func (s *Store) Ping(ctx context.Context) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return translate(err, "pinging database")
	}
	defer conn.Release()
	var readOnly bool
	if err := conn.QueryRow(ctx, "SELECT pg_is_in_recovery() OR current_setting('transaction_read_only')::bool").Scan(&readOnly); err != nil {
		return translate(err, "pinging database")
	}
	if readOnly {
		_ = conn.Conn().PgConn().Close(ctx) // released closed: the pool drops it
		return fault.Wrap(fault.Unavailable, ErrReadOnly, "pinging database")
	}
	return nil
}

// EnsureDatabase creates the database named in url when it does not exist,
// connecting to the server's postgres database to do so.
func EnsureDatabase(ctx context.Context, url string) error {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return fmt.Errorf("parsing database URL: %w", err)
	}
	name := cfg.Database
	if name == "" || name == "postgres" {
		return nil
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err == nil {
		return conn.Close(ctx)
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "3D000" { // invalid_catalog_name
		return translate(err, "connecting to database "+name)
	}
	cfg.Database = "postgres"
	conn, err = pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return translate(err, "connecting to database postgres")
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	if errors.As(err, &pgErr) && pgErr.Code == "42P04" { // created meanwhile by another replica
		return nil
	}
	return translate(err, "creating database "+name)
}

// ConnectionLimit is the server's connection limit and the replicas that
// share it.
type ConnectionLimit struct {
	// Max is max_connections; Reserved its slots kept for superusers.
	Max, Reserved int
	// Replicas counts the live replica registrations, this replica's
	// included whether it registered yet or not.
	Replicas int
}

// ConnectionLimit reads the server's connection limit and counts the live
// leases named prefix+<id> other than self (the replica registrations), in
// one round trip.
func (s *Store) ConnectionLimit(ctx context.Context, prefix, self string) (ConnectionLimit, error) {
	var l ConnectionLimit
	err := s.pool.QueryRow(ctx, `SELECT current_setting('max_connections')::int, current_setting('superuser_reserved_connections')::int,
		       1 + (SELECT count(*) FROM leases WHERE starts_with(name, $1) AND name <> $2 AND expires_at > now())::int`, prefix, self).
		Scan(&l.Max, &l.Reserved, &l.Replicas)
	return l, translate(err, "reading max_connections")
}

package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sutra-run/worker/fault"
)

// Every SQLSTATE the worker knows is named here, with what it becomes at the
// store boundary. Callers branch on fault codes and sentinels, never on pgx
// errors.
//
//	SU001 (sutra_commit)            fault.StepFenced: the claim was swept or stolen
//	SU002 (sutra_consume_timer)     fault.NotWaiting: the fire's timer row is gone
//	SU003 (sutra_buffered_found)    *BufferedMatch: a buffered message matches an opened subscription
//	SU004 (sutra_consume_buffered)  ErrBufferedGone
//	SU005 (sutra_batch_fence)       raised only by the previous build's group write (a rollout)
//	23505 on a known constraint     ErrDuplicate / ErrConflict where the caller expects it
//	no rows                         ErrNotFound
//
// Everything else is classified by whether retrying can cure it:
//
//	unavailable  connection lost or refused, 08xxx, 53xxx (resources),
//	             57P01-57P03 (server shutting down), 58xxx (system I/O),
//	             25006 (read-only: a standby, a demoted primary; the
//	             connection is closed, see followPrimary), 40001 raised
//	             by a recovery conflict is transient below,
//	             a per-call deadline passed     → fault.Unavailable: an outage,
//	             not this work's fault; retried with backoff, never capped
//	transient    40001 serialization, 40P01 deadlock, 55P03 lock not
//	             available, 57014 statement timeout or cancel
//	                                            → fault.Transient: retried with
//	             backoff, capped per relay (SUTRA_RELAY_MAX_RETRIES)
//	permanent    everything else: 22xxx (bad data, e.g. "\u0000" in jsonb),
//	             23xxx other than the known conflicts, 42xxx, P0001, …
//	                                            → no code: the work can never
//	             apply (a relay is dead-lettered with fault.StepFailed)
const (
	sqlstateFenced        = "SU001"
	sqlstateTimerGone     = "SU002"
	sqlstateBufferedMatch = "SU003"
	sqlstateBufferedGone  = "SU004"
	sqlstateUnique        = "23505"
	sqlstateNotNull       = "23502"
	sqlstateReadOnly      = "25006" // read_only_sql_transaction
)

// Sentinel errors callers branch on with errors.Is.
var (
	ErrNotFound = errors.New("store: not found")
	ErrConflict = errors.New("store: conflict")
	// ErrReadOnly is a server that refuses writes: during a failover, the
	// old primary or a standby (always with fault.Unavailable).
	ErrReadOnly = errors.New("store: the database is read-only")
)

// translate maps driver errors to the worker's errors at the store boundary.
func translate(err error, what string) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == sqlstateFenced:
			return fault.Wrap(fault.StepFenced, err, "%s", what)
		case pgErr.Code == sqlstateUnique:
			return fmt.Errorf("%s: %w: %s", what, ErrConflict, pgErr.Message)
		case pgErr.Code == sqlstateReadOnly:
			return fault.Wrap(fault.Unavailable, fmt.Errorf("%w: %w", ErrReadOnly, err), "%s", what)
		case unavailableSQLState(pgErr.Code):
			return fault.Wrap(fault.Unavailable, err, "%s", what)
		case transientSQLState(pgErr.Code):
			return fault.Wrap(fault.Transient, err, "%s", what)
		}
		return fmt.Errorf("%s: %w", what, err) // permanent
	}
	switch {
	case errors.Is(err, context.Canceled):
		// The caller gave up (a stop): the caller's own context tells it so.
		return fmt.Errorf("%s: %w", what, err)
	case errors.Is(err, context.DeadlineExceeded):
		return fault.Wrap(fault.Unavailable, err, "%s: the database did not answer in time", what)
	}
	var syntax *pgconn.ParseConfigError
	var scan pgx.ScanArgError
	if errors.As(err, &syntax) || errors.As(err, &scan) {
		return fmt.Errorf("%s: %w", what, err) // a bad URL, a row that does not decode: no retry cures it
	}
	// Anything else is the connection: refused, reset, closed, timed out.
	return fault.Wrap(fault.Unavailable, err, "%s", what)
}

// unavailableSQLState tells server errors that mean the database cannot
// serve anyone right now.
func unavailableSQLState(code string) bool {
	switch {
	case strings.HasPrefix(code, "08"), // connection exception
		strings.HasPrefix(code, "53"),                     // insufficient resources
		strings.HasPrefix(code, "58"),                     // system error (I/O)
		code == "57P01", code == "57P02", code == "57P03": // admin/crash shutdown, cannot connect now
		return true
	}
	return false
}

// transientSQLState tells server errors that one more try of the same work
// may cure.
func transientSQLState(code string) bool {
	switch code {
	case "40001", "40P01", "55P03", "57014": // serialization, deadlock, lock not available, statement timeout/cancel
		return true
	}
	return false
}

// followPrimary makes a pool follow a primary that moves. A connection
// whose server answers read-only (SQLSTATE 25006: the primary it reached
// was demoted, or it reached a standby) is closed on that error, and the
// pool drops it on release instead of handing it out again. A URL naming
// several hosts connects only to the one that takes writes (libpq's
// target_session_attrs=read-write) unless it asks for a primary in another
// way: the worker writes, so "any" would be no choice.
func followPrimary(cfg *pgx.ConnConfig) {
	next := cfg.OnPgError
	cfg.OnPgError = func(c *pgconn.PgConn, pgErr *pgconn.PgError) bool {
		if pgErr.Code == sqlstateReadOnly {
			return false // closes the connection
		}
		return next == nil || next(c, pgErr)
	}
	if cfg.ValidateConnect != nil {
		return
	}
	for _, f := range cfg.Fallbacks { // also each host's TLS and plain attempt
		if f.Host != cfg.Host || f.Port != cfg.Port {
			cfg.ValidateConnect = pgconn.ValidateConnectTargetSessionAttrsReadWrite
			return
		}
	}
}

func isSQLState(err error, code string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == code
}

func isUniqueViolation(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == sqlstateUnique && pgErr.ConstraintName == constraint
}

// isInboxDuplicate tells a relay's inbox row that a copy recorded first
// refused: a unique violation in a partition of inbox_days, or of inbox_pkey
// (the table of before the partitioning, through the view inbox).
func isInboxDuplicate(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == sqlstateUnique &&
		(pgErr.ConstraintName == "inbox_pkey" || strings.HasPrefix(pgErr.TableName, InboxDays.Name+"_"))
}

func isNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }

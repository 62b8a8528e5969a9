// Package usecase holds each operation the protocols offer, once, beneath
// them: api/tasks (Camunda 7's external tasks), api/admin (/v1) and
// api/zeebe (the Zeebe gateway) decode a call, call a use case here and map
// the fault codes it answers to their protocol, each in one table. Nothing
// here knows a protocol: no HTTP, no gRPC, no wire type.
//
// A use case never claims an instance (DESIGN.md): it records what it must
// durably, then hands the work to the lanes' one resume core, through
// package operations for the admin operations.
package usecase

import (
	"context"
	"log/slog"

	"github.com/sutra-run/worker/api/taskwait"
	"github.com/sutra-run/worker/metrics"
	"github.com/sutra-run/worker/operations"
	"github.com/sutra-run/worker/store"
)

// Store is what the use cases need from the database (*store.Store).
type Store interface {
	FetchAndLock(ctx context.Context, worker string, topics []store.TopicLock, max int, byPriority bool) ([]store.LockedTask, error)
	IncidentByID(ctx context.Context, id int64) (store.Incident, error)
	JobRetries(ctx context.Context, incidentID int64) (int, error)
	RetryTimer(ctx context.Context, incidentID int64) error
}

// Deps are the use cases' collaborators.
type Deps struct {
	Store   Store
	Metrics *metrics.Metrics
	Logger  *slog.Logger
	// Lanes run the admin operations' steps (on the admin lane).
	Lanes operations.Dispatcher
	// Waiters are where activations wait for tasks (api/taskwait).
	Waiters *taskwait.Waiters
}

// UseCases are the operations every protocol calls.
type UseCases struct {
	deps Deps
}

// New builds the use cases on deps.
func New(deps Deps) *UseCases { return &UseCases{deps: deps} }

// Conn is how a call holds one of the database connections API calls may
// use (SUTRA_API_MAX_DB_CONNS) while a use case runs: Use takes one (or
// keeps the one the call holds) around each statement, Idle gives the
// call's back before a wait. The zero Conn does neither: a caller with no
// such budget (a test, a background runner).
type Conn struct {
	Use  func(ctx context.Context) (release func(), err error)
	Idle func()
}

func (c Conn) use(ctx context.Context) (func(), error) {
	if c.Use == nil {
		return func() {}, nil
	}
	return c.Use(ctx)
}

func (c Conn) idle() {
	if c.Idle != nil {
		c.Idle()
	}
}

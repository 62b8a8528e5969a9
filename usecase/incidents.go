package usecase

import (
	"context"
	"errors"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/operations"
	"github.com/sutra-run/worker/store"
)

// ErrIncidentResolved is in the chain of a retry refused because its
// incident is resolved (code fault.NotWaiting): a protocol that answers it
// as "no such incident" tells it from a retry whose token no longer waits.
var ErrIncidentResolved = errors.New("the incident is resolved")

// resolvedError refuses the retry of resolved incident id.
type resolvedError struct{ refusal *fault.Error }

func (e resolvedError) Error() string        { return e.refusal.Error() }
func (e resolvedError) Unwrap() error        { return e.refusal }
func (e resolvedError) Is(target error) bool { return target == ErrIncidentResolved }

func resolved(id int64) error {
	return resolvedError{fault.New(fault.NotWaiting, "incident %d is resolved", id)}
}

// IncidentRetry asks to resolve an incident by running its element again.
type IncidentRetry struct {
	ID int64
	// Variables are merged into the instance first.
	Variables map[string]any
	// Retries are a failed task's when it is created again: nil, those
	// UpdateJobRetries set on the failed job (else its definition's); 0,
	// its definition's.
	Retries *int
}

// ResolveIncident retries an incident: a timer incident's timer is armed
// again; any other incident's element runs again in a step on the admin
// lane (operations.Retry), answered once it committed. It returns the
// incident it read (with the error, once read). Refusals: the incident's
// store.ErrNotFound; fault.NotWaiting with ErrIncidentResolved; a timer
// incident asked for variables or retries, fault.APIInvalid; the step's
// (operations.Run: operations.ClaimHeld(operations.OpRetry), and
// fault.NotWaiting when its token no longer waits).
func (u *UseCases) ResolveIncident(ctx context.Context, conn Conn, r IncidentRetry) (store.Incident, error) {
	inc, retries, err := u.incident(ctx, conn, r)
	switch {
	case err != nil:
		return inc, err
	case inc.ResolvedAt != nil:
		return inc, resolved(r.ID)
	case inc.Code == fault.IncidentTimerFailed:
		if len(r.Variables) > 0 || r.Retries != nil && *r.Retries > 0 {
			return inc, fault.New(fault.APIInvalid, "a timer incident's retry arms the timer again and takes no variables or retries: set variables with PATCH /v1/instances/{id}/variables first")
		}
		return inc, u.retryTimer(ctx, conn, inc.ID)
	}
	return inc, u.operate(ctx, conn, operations.OpRetry, operations.Retry(inc.InstanceID, inc.Token, r.Variables, retries))
}

// incident reads r's incident and the retries its task is created with.
func (u *UseCases) incident(ctx context.Context, conn Conn, r IncidentRetry) (store.Incident, int, error) {
	release, err := conn.use(ctx)
	if err != nil {
		return store.Incident{}, 0, err
	}
	defer release()
	inc, err := u.deps.Store.IncidentByID(ctx, r.ID)
	if err != nil || r.Retries != nil {
		return inc, derefOr(r.Retries), err
	}
	retries, err := u.deps.Store.JobRetries(ctx, r.ID)
	return inc, retries, err
}

func derefOr(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// retryTimer arms the timer parked in incident id to fire now: the fire
// then runs as any timer's does, through the claim, so no claim is taken
// here. An incident resolved meanwhile is refused as resolved.
func (u *UseCases) retryTimer(ctx context.Context, conn Conn, id int64) error {
	release, err := conn.use(ctx)
	if err != nil {
		return err
	}
	defer release()
	err = u.deps.Store.RetryTimer(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return resolved(id)
	}
	return err
}

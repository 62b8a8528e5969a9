// Package claims is the one claim helper every resume path uses: owner ids,
// the compare-and-set claim that loads the row, release, and the commit fence.
//
// A claim is ownership of one instance row. It is taken before anything is
// read, refused (never waited for) when another owner holds it, and released
// by the step's commit or, on every other exit, by Release.
package claims

import (
	"context"
	"fmt"
	"time"

	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/store"
)

// LaneOwner is the owner id of lane n of a replica. Owners are lane-scoped:
// two lanes never share one, so re-entrant claims never cross lanes.
func LaneOwner(replica string, n int) string { return fmt.Sprintf("%s/lane/%d", replica, n) }

// AdminOwner is the owner id of a replica's admin operations; no lane can
// produce it, so an admin claim never re-enters a lane's claim.
func AdminOwner(replica string) string { return replica + "/admin" }

// Claimer takes claims for one owner.
type Claimer struct {
	store   *store.Store
	owner   string
	timeout time.Duration
}

// New returns a Claimer for owner; claims older than timeout are stale and
// may be taken over.
func New(s *store.Store, owner string, timeout time.Duration) *Claimer {
	return &Claimer{store: s, owner: owner, timeout: timeout}
}

// Owner is the owner id this Claimer claims as.
func (c *Claimer) Owner() string { return c.owner }

// Request names what to claim.
type Request struct {
	InstanceID string
	// InboxID refuses the claim with store.ErrDuplicate if that relay was applied.
	InboxID string
	// StartKey creates the instance from that definition if it does not exist.
	StartKey string
}

// Claim takes the claim and loads the row. Errors: *store.ClaimHeldError
// (fault.ClaimHeld), fault.NotFound, store.ErrDuplicate, fault.UnknownDefinition,
// fault.Unavailable.
func (c *Claimer) Claim(ctx context.Context, r Request) (*Held, error) {
	inst, err := c.store.Claim(ctx, store.ClaimRequest{
		InstanceID: r.InstanceID, Owner: c.owner, Timeout: c.timeout,
		InboxID: r.InboxID, StartKey: r.StartKey,
	})
	if err != nil {
		return nil, err
	}
	return &Held{store: c.store, owner: c.owner, Instance: inst}, nil
}

// Held is a claim this owner holds. It ends exactly once: by Commit or Release.
type Held struct {
	store    *store.Store
	owner    string
	Instance store.Instance
	done     bool
}

// Owner is the owner id holding the claim.
func (h *Held) Owner() string { return h.owner }

// Extras are path-specific writes of the commit transaction.
type Extras struct {
	InboxID string
	TimerID int64
	// Consumed are buffered messages the step applied after its trigger.
	Consumed []store.Consumed
	// SkipBufferCheck commits without looking for buffered messages that the
	// subscriptions the step opened match.
	SkipBufferCheck bool
}

// Commit writes the step and releases the claim in one transaction, fenced on
// owner and the version read at claim time. A fenced commit (claim swept or
// stolen) writes nothing and returns an error with fault.StepFenced; the claim
// is then no longer ours, so it counts as ended either way.
func (h *Held) Commit(ctx context.Context, st engine.State, eff engine.Effects, x Extras) error {
	err := h.store.CommitStep(ctx, store.Commit{
		InstanceID: h.Instance.ID, Owner: h.owner, Version: h.Instance.Version,
		State: st, Effects: eff, InboxID: x.InboxID, TimerID: x.TimerID, Consumed: x.Consumed, SkipBufferCheck: x.SkipBufferCheck,
	})
	if err == nil {
		h.done = true
	}
	return err
}

// Release gives the claim up without a step. It is safe after Commit (a no-op)
// and runs even when ctx is cancelled, because leaving a claim behind would
// hold the instance until the sweep.
func (h *Held) Release(ctx context.Context) error {
	if h.done {
		return nil
	}
	h.done = true
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return h.store.Release(ctx, h.Instance.ID, h.owner)
}

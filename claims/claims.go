// Package claims is the one claim helper every resume path uses: owner ids,
// the compare-and-set claim that loads the row, release, and the commit fence.
//
// A claim is ownership of one instance, its row in the claims table (apart
// from the instance row, so that a step's update of that row is HOT). It is
// taken before anything is read, refused (never waited for) when another
// owner holds it, and released by the step's commit or, on every other exit,
// by Release. A claim whose
// outcome is unknown (the client failed after the statement was sent) is
// treated as maybe held and released at once, so a lane never leaves behind
// a claim it would then keep refreshing by re-entry.
package claims

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/startstop"
	"github.com/sutra-run/worker/store"
)

// LaneOwner is the owner id of lane n of a replica. Owners are lane-scoped:
// two lanes never share one, so re-entrant claims never cross lanes.
func LaneOwner(replica string, n int) string { return fmt.Sprintf("%s/lane/%d", replica, n) }

// AdminOwner is the owner id of a replica's admin operations; no lane can
// produce it, so an admin claim never re-enters a lane's claim.
func AdminOwner(replica string) string { return replica + "/admin" }

// Store is what claims need from the database (*store.Store).
type Store interface {
	Claim(ctx context.Context, r store.ClaimRequest) (store.Instance, error)
	Release(ctx context.Context, id, owner string) error
	WriteStep(ctx context.Context, c store.StepWrites) error
}

// BatchStore is a Store that also claims and commits in batches
// (*store.Store); a Claimer over a Store without them claims one at a time.
type BatchStore interface {
	Store
	ClaimBatch(ctx context.Context, r store.ClaimBatchRequest) ([]store.Claimed, error)
	WriteGroup(ctx context.Context, cs []store.StepWrites) []error
}

// Claimer takes claims for one owner.
type Claimer struct {
	store   Store
	owner   string
	timeout time.Duration
	guard   func() error
}

// New returns a Claimer for owner; claims older than timeout are stale and
// may be taken over. guard, when not nil, runs before every claim and
// refuses it with its error: the replica's registration must be valid for
// its owner ids to be its own (see package replica).
func New(s Store, owner string, timeout time.Duration, guard func() error) *Claimer {
	return &Claimer{store: s, owner: owner, timeout: timeout, guard: guard}
}

// Batches reports whether the Claimer's store claims and commits in batches.
func (c *Claimer) Batches() bool {
	_, ok := c.store.(BatchStore)
	return ok
}

// Owner is the owner id this Claimer claims as.
func (c *Claimer) Owner() string { return c.owner }

// Request names what to claim.
type Request struct {
	InstanceID string
	// InboxID refuses the claim with store.ErrDuplicate if that relay was applied.
	InboxID string
	// StartKey creates the instance from that definition (at StartVersion,
	// 0: the latest) if it does not exist.
	StartKey     string
	StartVersion int
	// StartCorrelationKey and ParentID go with a created instance (see
	// store.ClaimRequest).
	StartCorrelationKey string
	ParentID            string
}

// Claim takes the claim and loads the row. Refusals, with nothing taken:
// *store.ClaimHeldError (fault.ClaimHeld), fault.NotFound, store.ErrDuplicate,
// fault.UnknownDefinition, and the guard's error. Any other error means the
// claim may have been taken: it is released before Claim returns.
func (c *Claimer) Claim(ctx context.Context, r Request) (*Held, error) {
	if c.guard != nil {
		if err := c.guard(); err != nil {
			return nil, err
		}
	}
	inst, err := c.store.Claim(ctx, store.ClaimRequest{
		InstanceID: r.InstanceID, Owner: c.owner, Timeout: c.timeout,
		InboxID: r.InboxID, StartKey: r.StartKey, StartVersion: r.StartVersion, StartCorrelationKey: r.StartCorrelationKey, ParentID: r.ParentID,
	})
	if err != nil {
		if maybeHeld(err) {
			h := &Held{store: c.store, owner: c.owner, Instance: store.Instance{ID: r.InstanceID}}
			if rerr := h.Release(ctx); rerr != nil {
				err = fmt.Errorf("%w (and releasing the claim that may have been taken: %v)", err, rerr)
			}
		}
		return nil, err
	}
	return &Held{store: c.store, owner: c.owner, Instance: inst}, nil
}

// maybeHeld tells a claim error after which the claim may be held: every
// error but the refusals that the claim statement itself decided.
func maybeHeld(err error) bool {
	var held *store.ClaimHeldError
	switch {
	case errors.As(err, &held), errors.Is(err, store.ErrDuplicate), errors.Is(err, store.ErrStartKeyActive):
		return false
	}
	switch fault.Code(err) {
	case fault.NotFound, fault.UnknownDefinition:
		return false
	}
	return true
}

// Held is a claim this owner holds. It ends exactly once: by WriteStep or Release.
type Held struct {
	store    Store
	owner    string
	Instance store.Instance
	done     bool
}

// Owner is the owner id holding the claim.
func (h *Held) Owner() string { return h.owner }

// Extras are the writes of a step's transaction that depend on its kind.
type Extras struct {
	InboxID string
	// FromOutbox: InboxID is one of the worker's own outbox relay rows,
	// which the commit marks published (store.StepWrites.FromOutbox).
	FromOutbox bool
	TimerID    int64
	// RearmAt moves the timer row to its next fire instead of consuming it
	// (a timer start event's schedule).
	RearmAt time.Time
	// Consumed are buffered messages the step applied after its trigger.
	Consumed []store.Consumed
	// SkipBufferCheck commits without looking for buffered messages that the
	// subscriptions the step opened match.
	SkipBufferCheck bool
	// DefinitionVersion moves the instance to that version of its
	// definition (a migration); 0 keeps it.
	DefinitionVersion int
	// CloseTables names the tables of each closed wait
	// (store.StepWrites.CloseTables); nil: every table.
	CloseTables []engine.WaitTables
	// History is why the step ran (store.StepWrites.History).
	History store.StepCause
	// Earlier are the resumes of this claim computed before the step, in
	// order (store.StepWrites.Earlier): only WriteGroup commits them.
	Earlier []store.EarlierStep
}

// WriteStep writes the step and releases the claim in one transaction, fenced on
// owner and the version read at claim time. A fenced commit (claim swept or
// stolen) writes nothing and returns an error with fault.StepFenced; the claim
// is then no longer ours, so it counts as ended either way.
func (h *Held) WriteStep(ctx context.Context, st engine.State, eff engine.Effects, x Extras) error {
	err := h.store.WriteStep(ctx, h.writes(st, eff, x))
	if err == nil {
		h.done = true
	}
	return err
}

// writes are the store writes of a step under this claim.
func (h *Held) writes(st engine.State, eff engine.Effects, x Extras) store.StepWrites {
	return store.StepWrites{
		InstanceID: h.Instance.ID, Owner: h.owner, Version: h.Instance.Version,
		State: st, Effects: eff, InboxID: x.InboxID, FromOutbox: x.FromOutbox, TimerID: x.TimerID, RearmAt: x.RearmAt, Consumed: x.Consumed, SkipBufferCheck: x.SkipBufferCheck,
		DefinitionVersion: x.DefinitionVersion, CloseTables: x.CloseTables, History: x.History, Earlier: x.Earlier,
	}
}

// Release gives the claim up without a step. It is safe after WriteStep (a no-op)
// and runs even when ctx is cancelled (bounded by startstop.Grace), because
// leaving a claim behind would hold the instance until the sweep. A
// database that cannot serve it for a moment (fault.Unavailable: a killed
// connection's replacement refused for want of slots, a restart) is asked
// again within that bound.
func (h *Held) Release(ctx context.Context) error {
	if h.done {
		return nil
	}
	h.done = true
	ctx, cancel := startstop.FinalContext(ctx)
	defer cancel()
	for delay := 25 * time.Millisecond; ; delay = min(2*delay, 400*time.Millisecond) {
		err := h.store.Release(ctx, h.Instance.ID, h.owner)
		if err == nil || fault.Code(err) != fault.Unavailable {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
	}
}

// BatchRequest names one instance of a batch claim: a relay to a known
// instance (no start, no lookup).
type BatchRequest struct {
	InstanceID string
	InboxID    string
}

// Batch is one Claimer's part of a batch claim.
type Batch struct {
	Claimer  *Claimer
	Requests []BatchRequest
}

// ClaimBatch takes the claims of several distinct instances in one statement,
// each for its Batch's Claimer (the lanes of one replica, over one store that
// batches), and loads their rows. An instance asked for twice (which lane
// hashing rules out) is claimed for its first asker only. The result is aligned with bs, and each
// Batch's Helds with its Requests: a nil Held was not claimed, and nothing
// says why (held by another owner, missing, relay already applied, or a row
// that cannot be decoded, whose claim is released here): claim it on its own
// with Claim to learn it. An error for a Batch (its Claimer's guard refused,
// or the statement failed) leaves its Requests to be claimed on their own;
// any claim the failed statement may have taken is released first.
func ClaimBatch(ctx context.Context, bs []Batch) ([][]*Held, []error) {
	helds, errs := make([][]*Held, len(bs)), make([]error, len(bs))
	type row struct{ batch, req int }
	var rows []row
	asked := map[string]bool{}
	var st Store
	req := store.ClaimBatchRequest{}
	for b, batch := range bs {
		c := batch.Claimer
		if st == nil {
			st, req.Timeout = c.store, c.timeout
		} else if c.store != st {
			panic("claims: a batch claims only over one store")
		}
		if c.guard != nil {
			if errs[b] = c.guard(); errs[b] != nil {
				continue
			}
		}
		helds[b] = make([]*Held, len(batch.Requests))
		for r, q := range batch.Requests {
			if asked[q.InstanceID] {
				continue // its nil Held sends it to claim alone
			}
			asked[q.InstanceID] = true
			rows = append(rows, row{b, r})
			req.InstanceIDs, req.Owners, req.InboxIDs = append(req.InstanceIDs, q.InstanceID), append(req.Owners, c.owner), append(req.InboxIDs, q.InboxID)
		}
	}
	if len(rows) == 0 {
		return helds, errs
	}
	claimed, err := st.(BatchStore).ClaimBatch(ctx, req)
	if err != nil {
		failed := make([]error, len(bs))
		for i, at := range rows {
			h := &Held{store: st, owner: req.Owners[i], Instance: store.Instance{ID: req.InstanceIDs[i]}}
			if rerr := h.Release(ctx); rerr != nil {
				failed[at.batch] = errors.Join(failed[at.batch], fmt.Errorf("releasing the claim of %s that may have been taken: %w", h.Instance.ID, rerr))
			}
		}
		for _, at := range rows {
			helds[at.batch] = nil
			errs[at.batch] = errors.Join(err, failed[at.batch])
		}
		return helds, errs
	}
	for i, cl := range claimed {
		if !cl.OK {
			continue
		}
		at := rows[i]
		h := &Held{store: st, owner: req.Owners[i], Instance: cl.Instance}
		if cl.Err != nil {
			// Claimed but not steppable: Claim on its own reports the error.
			if rerr := h.Release(ctx); rerr != nil {
				// Still held: its Claimer re-enters it when it claims alone.
				errs[at.batch] = errors.Join(errs[at.batch], cl.Err, rerr)
			}
			continue
		}
		helds[at.batch][at.req] = h
	}
	return helds, errs
}

// Step is one step of a batch commit: the claim it runs under and what it
// writes.
type Step struct {
	Held    *Held
	State   engine.State
	Effects engine.Effects
	Extras  Extras
}

// WriteGroup commits several steps in one transaction (store.WriteGroup),
// each fenced on its own claim; the claims may be of several Claimers (the
// lanes of one replica) over one store. The result is aligned with steps:
// nil, committed and released; fault.StepFenced, that step did not happen and
// its claim is no longer ours; store.ErrNotWritten, nothing was written for
// it and its claim is still held (commit it with Held.WriteStep);
// *store.BufferedMatch, likewise, with the buffered message that matches a
// subscription the step opened (apply it, then Held.WriteStep);
// fault.StepTooLarge, nothing was written for it and its claim is still held
// (release it); any other error leaves the outcome unknown, as a failed
// Held.WriteStep does.
func WriteGroup(ctx context.Context, steps []Step) []error {
	cs := make([]store.StepWrites, len(steps))
	for i, st := range steps {
		if st.Held.store != steps[0].Held.store {
			panic("claims: a batch commits only claims over one store")
		}
		cs[i] = st.Held.writes(st.State, st.Effects, st.Extras)
	}
	errs := steps[0].Held.store.(BatchStore).WriteGroup(ctx, cs)
	for i, err := range errs {
		if err == nil {
			steps[i].Held.done = true
		}
	}
	return errs
}

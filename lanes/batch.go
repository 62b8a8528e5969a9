package lanes

import (
	"context"
	"errors"
	"runtime/debug"
	"sync"
	"time"

	"github.com/sutra-run/worker/claims"
	"github.com/sutra-run/worker/store"
)

// Batches. A lane that finds several resumes already queued in its inbox
// takes up to Config.BatchMax of them at once (it never waits to fill its
// own batch), claims the Messages among them, runs the engine for each and
// commits them, then answers each with the outcome the single path would
// give it. The claim and the commit go through the pool's two gatherers
// (gather.go): a batch joins whatever other lanes handed in meanwhile, so one
// statement claims and one transaction commits the batches of several lanes.
// A lone Message goes this way too while another lane's batch is in a
// gatherer, to join its group, and while relays arrive at two or more per
// Config.BatchWait, when its group waits up to that long for other lanes'
// (with many lanes under a steady load most lanes hold one relay at a
// time); on an idle pool it runs on its own, which costs less. Only the
// common kind goes this way: a Message, a relay to a known instance, with
// nothing to look up, start, consume or administer.
// Every other kind, and every step of a batch that leaves the happy path,
// runs through step unchanged.
//
//	batch exit                          outcome                   claim
//	not a Message, or second of its     (runs on its own after    -
//	instance in the batch               the batch)
//	batch claim: not taken              (runs on its own: the     never taken
//	                                    single claim tells why)
//	batch claim: error                  (each runs on its own)    all released by the claim helper
//	definition load or engine error     (runs on its own)         released first
//	panic (engine, BeforeCommit hook)   Rejected (StepPanic), the every claim of the batch released;
//	                                    others run on their own   re-run on their own
//	commit: fenced                      Retry (fenced)            not ours any more
//	commit: step too large              Rejected (StepTooLarge);  released (nothing written
//	                                    the others commit         for it)
//	commit: another step's writes       (written on its own:      held, then released by that commit
//	failed (ErrNotWritten)              single write path)
//	commit: a buffered message matches  (written on its own with  held, then released by that commit
//	a subscription it opened            the message applied; the
//	(*BufferedMatch)                    others as a group again)
//	commit fails                        by class                  released
//	commit succeeds                     Applied                   released by the commit

// batchable says whether r may run in a batch: a Message, or a Signal to a
// waiting instance (not a start), the kinds whose claim and step have no
// exits of their own (a Signal whose instance stopped waiting meets that on
// its own path, as every step a batch cannot compute does).
func batchable(r *Resume) bool {
	switch c := r.Cause.(type) {
	case Message:
		return true
	case Signal:
		return c.Definition == ""
	}
	return false
}

// handleBatch takes what is queued behind first, up to BatchMax resumes in
// all, runs the batchable ones of distinct instances as one batch and then
// the others, in order, one at a time (a second resume of an instance of
// the batch runs after it, never beside it). wait lets the groups of a lone
// relay wait for other lanes' batches.
func (l *lane) handleBatch(ctx context.Context, first *Resume, wait bool) {
	batch, rest := []*Resume{first}, []*Resume(nil)
	seen := map[string]bool{first.id: true}
take:
	for n := 1; n < l.pool.cfg.BatchMax; n++ {
		select {
		case r := <-l.inbox:
			if batchable(r) && !seen[r.id] {
				seen[r.id] = true
				batch = append(batch, r)
			} else {
				rest = append(rest, r)
			}
		default:
			break take
		}
	}
	// Only a lone relay waits for company: a lane that found a backlog
	// in its inbox brings its own, and the gatherers are busy anyway.
	wait = wait && len(batch)+len(rest) == 1
	var admitted []*Resume
	for _, r := range batch {
		if l.admit(ctx, r) {
			admitted = append(admitted, r)
		}
	}
	if len(admitted) > 0 {
		l.stepBatch(ctx, admitted, wait)
	}
	if len(rest) > 0 {
		l.settle() // what is left runs on its own
	}
	for _, r := range rest {
		l.handle(ctx, r)
	}
}

// panicked is a panic recovered from one step of a batch, with its stack.
type panicked struct {
	value any
	stack []byte
}

// batched is one step of a batch, computed and waiting for the commit.
type batched struct {
	r   *Resume
	c   loaded
	res OpResult
}

// stepBatch runs admitted batchable resumes of distinct instances as one
// batch (see the exit table above) and answers each; wait lets its groups
// wait for other lanes' batches.
func (l *lane) stepBatch(ctx context.Context, rs []*Resume, wait bool) {
	var alone []*Resume // run on their own once the batch is answered
	defer func() {
		if len(alone) > 0 {
			l.settle()
		}
		for _, r := range alone {
			l.runOne(ctx, r)
		}
	}()
	start := time.Now()
	reqs := make([]claims.BatchRequest, len(rs))
	for i, r := range rs {
		reqs[i] = claims.BatchRequest{InstanceID: r.id, InboxID: r.InboxID()}
	}
	l.settle()
	got := l.pool.claimer.do(claims.Batch{Claimer: l.claimer, Requests: reqs}, wait)
	// The writer's groups wait for this batch until it is handed in or
	// given up on, whichever exit comes first.
	handedIn := sync.OnceFunc(func() { l.pool.claimedUnwritten.Add(-1) })
	defer handedIn()
	helds, err := got.helds, got.err
	if err != nil {
		alone = rs // every claim was released; on its own each learns its outcome
		return
	}
	release := func(h *claims.Held) {
		if err := h.Release(ctx); err != nil {
			l.pool.deps.Logger.Error("releasing claim; the sweep will clear it", "instance_id", h.Instance.ID, "owner", h.Owner(), "err", err)
		}
	}
	defer func() {
		for _, h := range helds {
			if h != nil {
				release(h) // a no-op once committed
			}
		}
	}()

	var steps []batched
	for i, r := range rs {
		h := helds[i]
		if h == nil {
			alone = append(alone, r)
			continue
		}
		b, ok, p := l.compute(ctx, r, h)
		if p != nil {
			// Every claim of the batch is released, the panicking relay is
			// dead-lettered, and the others run on their own.
			for _, h := range helds {
				if h != nil {
					release(h)
				}
			}
			l.pool.answer(r, withInstance(r, l.panicked(r, p.value, p.stack)))
			alone = nil
			for j, o := range rs {
				if j != i {
					alone = append(alone, o)
				}
			}
			return
		}
		if !ok {
			release(h)
			alone = append(alone, r)
			continue
		}
		steps = append(steps, b)
	}
	if len(steps) == 0 {
		return
	}
	cs := make([]claims.Step, len(steps))
	for i, b := range steps {
		cs[i] = claims.Step{Held: b.c.held, State: b.res.State, Effects: b.res.Effects, Extras: extras(l, b.r, b.c, b.res)}
	}
	handedIn()
	errs := l.pool.writer.do(cs, wait)
	l.owed = true // the writer counted this lane in its next cohort
	n := 0
	for _, err := range errs {
		if err == nil {
			n++
		}
	}
	if n > 0 {
		l.pool.deps.Metrics.BatchSteps.Observe(float64(n))
	}
	for i, b := range steps {
		l.pool.answer(b.r, withInstance(b.r, l.finishBatched(ctx, b, start, errs[i])))
	}
}

// compute loads the definition and runs the engine and the BeforeCommit
// hook for one step of a batch. ok false sends the resume on its own path
// (which meets the same error and answers it as the exit table says); a
// panic is returned, not raised, for stepBatch to release the batch.
func (l *lane) compute(ctx context.Context, r *Resume, h *claims.Held) (b batched, ok bool, p *panicked) {
	defer func() {
		if v := recover(); v != nil {
			p = &panicked{value: v, stack: debug.Stack()}
		}
	}()
	c, err := l.load(ctx, h)
	if err != nil {
		return b, false, nil
	}
	res, err := r.Cause.compute(ctx, l, r, c)
	if err != nil {
		return b, false, nil
	}
	if hook := l.pool.deps.Hooks.BeforeCommit; hook != nil {
		hook(ctx, l.n, r)
	}
	return batched{r: r, c: c, res: res}, true, nil
}

// finishBatched answers one step of a written group. A step the group left
// out is written on its own (the single path, which also applies buffered
// messages that match): because another step's writes failed, or with the
// buffered message that matched a subscription it opened.
func (l *lane) finishBatched(ctx context.Context, b batched, start time.Time, err error) (out Result) {
	defer func() {
		if v := recover(); v != nil {
			out = l.panicked(b.r, v, debug.Stack())
		}
	}()
	var m *store.BufferedMatch
	switch {
	case errors.Is(err, store.ErrNotWritten):
		err = l.writeStep(ctx, b.c, b.r, b.res, nil)
	case errors.As(err, &m):
		err = l.writeStep(ctx, b.c, b.r, b.res, m)
	case err == nil:
		l.notify(b.c.held.Instance.ID, b.res.Effects, nil)
		l.ended(b.c.held.Instance.ID, b.res.State.Status)
	}
	return l.finish(ctx, b.r, b.c.held, start, err)
}

func withInstance(r *Resume, out Result) Result {
	out.InstanceID = r.id
	return out
}

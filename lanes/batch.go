package lanes

import (
	"context"
	"errors"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/sutra-run/worker/claims"
	"github.com/sutra-run/worker/fault"
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
//
// Chains. Several resumes of one instance queued together (a root's task
// outcomes, child ends and correlations under load) run as one step of the
// batch: one claim, one definition load, the engine run for each in turn
// on the state the one before it left, and one commit writing the final
// state with each resume's own effects, relay and history row (its own
// counter) in order (store.StepWrites.Earlier). Each is answered after the
// commit, by its outcome. A resume the chain cannot compute ends it: the
// ones before it commit together, it and the ones after it run on their
// own afterwards, as does every resume of the chain when the group writes
// nothing for it.
// Every other kind, and every step of a batch that leaves the happy path,
// runs through step unchanged.
//
//	batch exit                          outcome                   claim
//	not chainable, a copy of a relay    (runs on its own after    -
//	in its chain, or after either; a    the batch)
//	chain of one not a Message/Signal
//	batch claim: not taken              (runs on its own: the     never taken
//	                                    single claim tells why)
//	batch claim: error                  (each runs on its own)    all released by the claim helper
//	definition load or engine error     (runs on its own, with    released first, unless
//	                                    the rest of its chain)    earlier ones of its chain
//	                                                              commit
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
//	chain: too large, ErrNotWritten,    (each runs on its own,    released first
//	*BufferedMatch                      in order)
//	commit fails                        by class                  released
//	commit succeeds                     Applied                   released by the commit

// batchable says whether r may run in a batch on its own: a Message, or a
// Signal to a waiting instance (not a start), the kinds whose claim and
// step have no exits of their own (a Signal whose instance stopped waiting
// meets that on its own path, as every step a batch cannot compute does).
func batchable(r *Resume) bool {
	switch c := r.Cause.(type) {
	case Message:
		return true
	case Signal:
		return c.Definition == ""
	}
	return false
}

// chainable says whether r may join a chain of resumes of its instance: a
// batchable one, a task's outcome, a child's end or a correlation already
// looked up, the kinds whose claim is a plain relay's (a known instance, no
// start, no timer row). Their own exits (a correlation whose instance
// stopped waiting, a child's end before its escalation, a task outcome too
// large) end the chain and are met on their own path.
func chainable(r *Resume) bool {
	switch r.Cause.(type) {
	case TaskOutcome, ChildEnded:
		return true
	case Correlate:
		return r.id != ""
	}
	return batchable(r)
}

// handleBatch takes what is queued behind first, up to BatchMax resumes in
// all, runs the chains among them as one batch and then the others, in
// order, one at a time (a resume of an instance that cannot join its
// instance's chain runs after it, never beside it). wait lets the groups of
// a lone relay wait for other lanes' batches.
func (l *lane) handleBatch(ctx context.Context, first *Resume, wait bool) {
	taken := []*Resume{first}
take:
	for len(taken) < l.pool.cfg.BatchMax {
		select {
		case r := <-l.inbox:
			taken = append(taken, r)
		default:
			break take
		}
	}
	// Only a lone relay waits for company: a lane that found a backlog
	// in its inbox brings its own, and the gatherers are busy anyway.
	wait = wait && len(taken) == 1
	chains, rest := chainsOf(taken)
	var admitted [][]*Resume
	for _, ch := range chains {
		var in []*Resume
		for _, r := range ch {
			if l.admit(ctx, r) {
				in = append(in, r)
			}
		}
		if len(in) > 0 {
			admitted = append(admitted, in)
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

// chainsOf splits resumes taken from the inbox into chains, one per
// instance, each its instance's resumes in the order they came, and the
// rest, in the order they came. A chain ends before the first resume of its
// instance that is not chainable or that copies a relay already in it: that
// one and every later one of the instance go to the rest, to run after the
// chain. A chain of one resume that may not run in a batch goes to the rest
// too.
func chainsOf(taken []*Resume) (chains [][]*Resume, rest []*Resume) {
	at := map[string]int{}      // the chain of each instance
	ended := map[string]bool{}  // instances whose chain is over
	relays := map[string]bool{} // the relays in the chains
	alone := map[*Resume]bool{}
	for _, r := range taken {
		id, relay := r.InstanceID(), r.InboxID()
		if id == "" || ended[id] || !chainable(r) || relay != "" && relays[relay] {
			ended[id], alone[r] = true, true
			continue
		}
		relays[relay] = true
		if k, ok := at[id]; ok {
			chains[k] = append(chains[k], r)
			continue
		}
		at[id] = len(chains)
		chains = append(chains, []*Resume{r})
	}
	kept := chains[:0]
	for _, ch := range chains {
		if len(ch) == 1 && !batchable(ch[0]) {
			alone[ch[0]] = true
			continue
		}
		kept = append(kept, ch)
	}
	for _, r := range taken {
		if alone[r] {
			rest = append(rest, r)
		}
	}
	return kept, rest
}

// panicked is a panic recovered from one resume of a batch, with its
// stack.
type panicked struct {
	r     *Resume
	value any
	stack []byte
}

// batched is one step of a batch, computed and waiting for the commit: the
// chain of resumes of one instance under its claim (one resume, or
// several), each computed from the state the one before it left.
type batched struct {
	held *claims.Held
	rs   []*Resume
	cs   []loaded // what each resume computed from
	res  []OpResult
}

// step is what the writer commits for b: the state after its last resume,
// that resume's effects and writes, and the earlier resumes' own (each its
// relay, effects and history row).
func (b batched) step(l *lane) claims.Step {
	last := len(b.rs) - 1
	x := extras(l, b.rs[last], b.cs[last], b.res[last])
	for k := range last {
		e := extras(l, b.rs[k], b.cs[k], b.res[k])
		x.Earlier = append(x.Earlier, store.EarlierStep{Effects: b.res[k].Effects, CloseTables: e.CloseTables,
			InboxID: e.InboxID, FromOutbox: e.FromOutbox, History: e.History})
	}
	return claims.Step{Held: b.held, State: b.res[last].State, Effects: b.res[last].Effects, Extras: x}
}

// stepBatch runs admitted chains of distinct instances as one batch (see
// the exit table above) and answers each resume; wait lets its groups wait
// for other lanes' batches.
func (l *lane) stepBatch(ctx context.Context, chains [][]*Resume, wait bool) {
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
	reqs := make([]claims.BatchRequest, len(chains))
	for i, ch := range chains {
		reqs[i] = claims.BatchRequest{InstanceID: ch[0].id, InboxID: ch[0].InboxID()}
	}
	l.settle()
	got := l.pool.claimer.do(claims.Batch{Claimer: l.claimer, Requests: reqs}, wait)
	// The writer's groups wait for this batch until it is handed in or
	// given up on, whichever exit comes first.
	handedIn := sync.OnceFunc(func() { l.pool.claimedUnwritten.Add(-1) })
	defer handedIn()
	helds, err := got.helds, got.err
	if err != nil {
		// Every claim was released; on its own each learns its outcome.
		alone = slices.Concat(chains...)
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
	for i, ch := range chains {
		h := helds[i]
		if h == nil {
			alone = append(alone, ch...)
			continue
		}
		b, left, p := l.compute(ctx, ch, h)
		if p != nil {
			// Every claim of the batch is released, the panicking relay is
			// dead-lettered, and the others run on their own.
			for _, h := range helds {
				if h != nil {
					release(h)
				}
			}
			l.pool.answer(p.r, withInstance(p.r, l.panicked(p.r, p.value, p.stack)))
			alone = nil
			for _, r := range slices.Concat(chains...) {
				if r != p.r {
					alone = append(alone, r)
				}
			}
			return
		}
		alone = append(alone, left...)
		if len(b.rs) == 0 {
			release(h)
			continue
		}
		steps = append(steps, b)
	}
	if len(steps) == 0 {
		return
	}
	cs := make([]claims.Step, len(steps))
	for i, b := range steps {
		cs[i] = b.step(l)
	}
	handedIn()
	errs := l.pool.writer.do(cs, wait)
	l.owed = true // the writer counted this lane in its next cohort
	n := 0
	for i, err := range errs {
		if err == nil {
			n += len(steps[i].rs)
		}
	}
	if n > 0 {
		l.pool.deps.Metrics.BatchSteps.Observe(float64(n))
	}
	for i, b := range steps {
		if len(b.rs) == 1 {
			r := b.rs[0]
			l.pool.answer(r, withInstance(r, l.finishBatched(ctx, b, start, errs[i])))
			continue
		}
		alone = append(alone, l.finishChain(ctx, b, start, errs[i])...)
	}
}

// compute loads the definition and runs the engine and the BeforeCommit
// hook for each resume of a chain in turn, each from the state the one
// before it left. The first resume it cannot compute ends the chain: it and
// the ones after it are left, to run on their own path (which meets the
// same error and answers it as the exit table says). A panic is returned,
// not raised, for stepBatch to release the batch.
func (l *lane) compute(ctx context.Context, rs []*Resume, h *claims.Held) (b batched, left []*Resume, p *panicked) {
	b.held = h
	r := rs[0]
	defer func() {
		if v := recover(); v != nil {
			p = &panicked{r: r, value: v, stack: debug.Stack()}
		}
	}()
	c, err := l.load(ctx, h)
	if err != nil {
		return b, rs, nil
	}
	for k := range rs {
		r = rs[k]
		res, err := r.Cause.compute(ctx, l, r, c)
		if err != nil {
			return b, rs[k:], nil
		}
		if hook := l.pool.deps.Hooks.BeforeCommit; hook != nil {
			hook(ctx, l.n, r)
		}
		b.rs, b.cs, b.res = append(b.rs, r), append(b.cs, c), append(b.res, res)
		c.inst.State, c.inst.Version = res.State, c.inst.Version+1
	}
	return b, nil, nil
}

// finishBatched answers a step of one resume of a written group. A step
// the group left out is written on its own (the single path, which also
// applies buffered messages that match): because another step's writes
// failed, or with the buffered message that matched a subscription it
// opened.
func (l *lane) finishBatched(ctx context.Context, b batched, start time.Time, err error) (out Result) {
	r, c, res := b.rs[0], b.cs[0], b.res[0]
	defer func() {
		if v := recover(); v != nil {
			out = l.panicked(r, v, debug.Stack())
		}
	}()
	var m *store.BufferedMatch
	switch {
	case errors.Is(err, store.ErrNotWritten):
		err = l.writeStep(ctx, c, r, res, nil)
	case errors.As(err, &m):
		err = l.writeStep(ctx, c, r, res, m)
	case err == nil:
		l.notify(b.held.Instance.ID, res.Effects, nil)
		l.ended(b.held.Instance.ID, res.State.Status)
	}
	return l.finish(ctx, r, b.held, start, err)
}

// finishChain answers each resume of a chain of several by its group's
// commit, or returns them all to run on their own, in order, when the
// group wrote nothing for the chain and its claim is still held (another
// step's writes failed, a buffered message matches a subscription it
// opened, it is too large): each then meets its own exits, as the first
// and only step of its claim.
func (l *lane) finishChain(ctx context.Context, b batched, start time.Time, err error) (alone []*Resume) {
	var m *store.BufferedMatch
	if errors.Is(err, store.ErrNotWritten) || errors.As(err, &m) || fault.Code(err) == fault.StepTooLarge {
		if rerr := b.held.Release(ctx); rerr != nil {
			l.pool.deps.Logger.Error("releasing claim; the sweep will clear it", "instance_id", b.held.Instance.ID, "owner", b.held.Owner(), "err", rerr)
		}
		return b.rs
	}
	if err != nil {
		// Each resume is answered Retry: the claim goes first, so that a
		// redelivery finds the instance free (a no-op when it was fenced).
		if rerr := b.held.Release(ctx); rerr != nil {
			l.pool.deps.Logger.Error("releasing claim; the sweep will clear it", "instance_id", b.held.Instance.ID, "owner", b.held.Owner(), "err", rerr)
		}
	}
	last := len(b.rs) - 1
	if err == nil {
		for k := range b.rs {
			l.notify(b.held.Instance.ID, b.res[k].Effects, nil)
		}
		l.ended(b.held.Instance.ID, b.res[last].State.Status)
	}
	for _, r := range b.rs {
		l.pool.answer(r, withInstance(r, l.finishOne(ctx, r, b.held, start, err)))
	}
	return nil
}

// finishOne answers one resume of a written chain, a panic (in the
// AfterCommit hook) its outcome.
func (l *lane) finishOne(ctx context.Context, r *Resume, held *claims.Held, start time.Time, err error) (out Result) {
	defer func() {
		if v := recover(); v != nil {
			out = l.panicked(r, v, debug.Stack())
		}
	}()
	return l.finish(ctx, r, held, start, err)
}

func withInstance(r *Resume, out Result) Result {
	out.InstanceID = r.id
	return out
}

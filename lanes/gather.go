package lanes

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sutra-run/worker/claims"
	"github.com/sutra-run/worker/internal/testsignal"
)

// groupMax bounds the steps of one group claim or commit (a single lane's
// batch may pass it: SUTRA_BATCH_MAX allows up to 1024).
const groupMax = 256

// gatherer runs the batches of every lane of the pool in groups: a batch
// handed to it joins whatever other lanes handed in meanwhile, and the group
// goes to the database as one statement or transaction. While it runs one
// group the next gathers behind it, which is what makes the groups grow
// with the load. A pool has two, one that claims (claims.ClaimBatch) and one
// that commits (claims.WriteGroup), each one goroutine: with two or four
// writers the groups were smaller and the 16-lane run slower
// (BENCHMARKS.md).
//
// A group waits for more, for at most wait after its first hand-in, in two
// cases. While its cohort is on its way (cohort): the batches of lanes whose
// steps were ready at the same moment, so that they claim and commit
// together as one lane's batch would, whatever the lane count (the lanes
// of a backlog go on in step). And when its first batch was handed in to
// wait (a lone relay, while relays arrive at two or more per wait), while
// more says another batch may still come: under a steady rate most relays
// arrive alone, and a group of one costs the database nearly what a group
// of several does, so the wait buys back more CPU than the milliseconds it
// adds (BENCHMARKS.md, "Batch wait").
type gatherer[T, R any] struct {
	reqs    chan *gathered[T, R]
	max     int           // steps in one group (it may pass it by one batch)
	timeout time.Duration // bounds each group's statement or transaction
	wait    time.Duration // the longest a group waits for more (0: never)
	// more says whether another batch may still join a group of n batches
	// whose first may wait.
	more func(n int) bool
	// cohort, when set, says that batches of the same cohort are on their
	// way: ready at the same moment as those in the group (claimed in one
	// statement, or answered by one commit), their lanes are computing or
	// taking their next batch. A group waits for them, up to wait, whether
	// its first batch may wait or not: that is what keeps the steps of many
	// lanes in as few statements and transactions as those of one.
	cohort func() bool
	// answered, when set, hears how many batches a group answers, just
	// before they are.
	answered func(n int)
	size     func(T) int
	// run runs a group and answers each batch, aligned; failed answers a
	// batch of a group whose run panicked.
	run    func(ctx context.Context, group []T) []R
	failed func(T, error) R
	// pending counts the batches handed in and not answered yet.
	pending atomic.Int32
	// handedIn is signalled as each batch is handed in (tests wait for
	// batches to queue behind a group in flight), waiting as a group starts
	// to wait for more.
	handedIn, waiting testsignal.Signal[struct{}]
}

type gathered[T, R any] struct {
	batch T
	wait  bool      // its group may wait for more
	at    time.Time // handed in
	out   chan R
}

// do runs batch with whatever other lanes run at the same time and returns
// its answer; wait lets its group wait for more (see gatherer). It always
// returns: a gatherer runs until every lane has stopped, and each lane has
// at most one batch in it at a time (reqs has room for all), so a hand-in
// never waits. A lane leaves the cohort a group waits for just before it
// calls do: a group that saw it leave a moment early closes without it (it
// joins the next), where one that saw it leave late would wait for nothing.
func (g *gatherer[T, R]) do(batch T, wait bool) R {
	g.pending.Add(1)
	defer g.pending.Add(-1)
	r := &gathered[T, R]{batch: batch, wait: wait && g.wait > 0, at: time.Now(), out: make(chan R, 1)}
	g.reqs <- r
	g.handedIn.Signal(struct{}{})
	return <-r.out
}

// busy says whether another lane's batch is in the gatherer: one handed in
// now joins a group with it.
func (g *gatherer[T, R]) busy() bool { return g.pending.Load() > 0 }

// loop runs groups until stop is closed; ctx bounds each one.
func (g *gatherer[T, R]) loop(ctx context.Context, stop <-chan struct{}) {
	for {
		select {
		case r := <-g.reqs:
			g.runGroup(ctx, g.gather(r))
		case <-stop:
			return
		}
	}
}

// gather takes the batches already waiting behind first, up to max steps,
// and those handed in until wait after it while its cohort is on its way or,
// when first may wait, while more may come.
func (g *gatherer[T, R]) gather(first *gathered[T, R]) []*gathered[T, R] {
	group, n := []*gathered[T, R]{first}, g.size(first.batch)
	var deadline *time.Timer
	defer func() {
		if deadline != nil {
			deadline.Stop()
		}
	}()
	for n < g.max {
		var r *gathered[T, R]
		select {
		case r = <-g.reqs:
		default:
			if !(first.wait && g.more(len(group))) && (g.cohort == nil || !g.cohort()) {
				return group
			}
			if deadline == nil {
				left := time.Until(first.at.Add(g.wait))
				if left <= 0 {
					return group
				}
				deadline = time.NewTimer(left)
			}
			g.waiting.Signal(struct{}{})
			select {
			case r = <-g.reqs:
			case <-deadline.C:
				return group
			}
		}
		group, n = append(group, r), n+g.size(r.batch)
	}
	return group
}

// runGroup runs a group and answers each batch. A panic answers every batch
// of the group as failed.
func (g *gatherer[T, R]) runGroup(ctx context.Context, group []*gathered[T, R]) {
	batches := make([]T, len(group))
	for i, r := range group {
		batches[i] = r.batch
	}
	outs := func() (outs []R) {
		defer func() {
			if v := recover(); v != nil {
				err := fmt.Errorf("lanes: a group of %d batches panicked: %v", len(group), v)
				outs = make([]R, len(group))
				for i, r := range group {
					outs[i] = g.failed(r.batch, err)
				}
			}
		}()
		gctx, cancel := context.WithTimeout(ctx, g.timeout)
		defer cancel()
		return g.run(gctx, batches)
	}()
	if g.answered != nil {
		g.answered(len(group))
	}
	for i, r := range group {
		r.out <- outs[i]
	}
}

// arrivals tells whether relays reach the lanes fast enough that a batch
// waiting up to wait finds company: when the mean gap between them (a
// moving average over about the last eight, on every lane) is at most half
// of wait, two or more arrive in one. A batch of one through the gatherers
// costs more than a step on its own (a round trip more), so waiting for
// relays that come only now and then, or at less than two a wait, would
// cost CPU and add latency for nothing (BENCHMARKS.md, "Batch wait").
type arrivals struct {
	wait int64 // nanoseconds; 0: never
	// last is the latest arrival and mean the moving average of the gaps
	// (nanoseconds). Lanes update them at once: a lost update only nudges
	// the average less.
	last, mean atomic.Int64
}

// idleGapWaits, in waits, caps a gap that enters the average: after an
// idle time the average starts over from there, and it takes about sixteen
// arrivals in quick succession before batches wait again.
const idleGapWaits = 4

func newArrivals(wait time.Duration) *arrivals {
	a := &arrivals{wait: int64(wait)}
	a.mean.Store(idleGapWaits * a.wait)
	return a
}

// add records an arrival at now and says whether its batch may wait.
func (a *arrivals) add(now time.Time) bool {
	if a.wait <= 0 {
		return false
	}
	t := now.UnixNano()
	gap := min(t-a.last.Swap(t), idleGapWaits*a.wait)
	mean := a.mean.Load()
	mean += (gap - mean) / 8
	a.mean.Store(mean)
	return mean <= a.wait/2
}

// The two gatherers of a pool.
type (
	claimGatherer = gatherer[claims.Batch, claimed]
	writeGatherer = gatherer[[]claims.Step, []error]
)

// claimed is a lane's part of a group claim (see claims.ClaimBatch).
type claimed struct {
	helds []*claims.Held
	err   error
}

// newClaimGatherer's groups wait for at most wait, while cohort says a lane
// the writer answered may hand in its next batch, or, for a group that may
// wait, while a lane may still come (each lane hands in one batch at a
// time); answered hears the batches it answers (the writer expects them
// next).
func newClaimGatherer(timeout, wait time.Duration, lanes int, cohort func() bool, answered func(n int)) *claimGatherer {
	return &claimGatherer{
		reqs: make(chan *gathered[claims.Batch, claimed], lanes), max: groupMax, timeout: timeout,
		wait: wait, more: func(n int) bool { return n < lanes }, cohort: cohort, answered: answered,
		size: func(b claims.Batch) int { return len(b.Requests) },
		run: func(ctx context.Context, bs []claims.Batch) []claimed {
			helds, errs := claims.ClaimBatch(ctx, bs)
			out := make([]claimed, len(bs))
			for i := range bs {
				out[i] = claimed{helds: helds[i], err: errs[i]}
			}
			return out
		},
		// The claims a panicked group took are its lanes' own: each
		// re-enters its claims when it claims alone.
		failed: func(_ claims.Batch, err error) claimed { return claimed{err: err} },
	}
}

// newWriteGatherer's groups wait for at most wait, while expected says a
// lane whose batch was claimed has not handed it in yet (its cohort);
// answered hears the batches it answers (the claimer expects them next).
func newWriteGatherer(timeout, wait time.Duration, lanes int, expected func() bool, answered func(n int)) *writeGatherer {
	return &writeGatherer{
		reqs: make(chan *gathered[[]claims.Step, []error], lanes), max: groupMax, timeout: timeout,
		wait: wait, more: func(int) bool { return expected() }, cohort: expected, answered: answered,
		size: func(steps []claims.Step) int { return len(steps) },
		run: func(ctx context.Context, batches [][]claims.Step) [][]error {
			var all []claims.Step
			for _, b := range batches {
				all = append(all, b...)
			}
			errs := claims.WriteGroup(ctx, all)
			out := make([][]error, len(batches))
			for i, b := range batches {
				out[i], errs = errs[:len(b):len(b)], errs[len(b):]
			}
			return out
		},
		// An unknown outcome, which the lane treats like a failed commit.
		failed: func(steps []claims.Step, err error) []error {
			errs := make([]error, len(steps))
			for i := range errs {
				errs[i] = err
			}
			return errs
		},
	}
}

package lanes

import (
	"context"
	"fmt"
	"time"

	"github.com/sutra-run/worker/claims"
)

// groupMax bounds the steps of one group commit (a single lane's batch may
// pass it: SUTRA_BATCH_MAX allows up to 1024).
const groupMax = 256

// committer commits the batches of every lane of the pool: a batch handed to
// it joins whatever other lanes handed in meanwhile, and the group commits
// in one transaction (claims.CommitBatch, each step fenced on its own
// claim). Like a lane's batch it never waits to fill a group; while it
// commits one group the next gathers behind it, which is what makes the
// groups grow with the load. One committer per pool: with two or four the
// groups were smaller and the 16-lane run slower (BENCHMARKS.md).
type committer struct {
	reqs    chan *commitReq
	max     int           // steps in one group (it may pass it by one batch)
	timeout time.Duration // bounds each group's transaction
}

type commitReq struct {
	steps []claims.Step
	errs  chan []error
}

// newCommitter returns the committer of a pool of lanes lanes: each lane has
// at most one batch in it at a time, so a hand-in never waits for room.
func newCommitter(max int, timeout time.Duration, lanes int) *committer {
	return &committer{reqs: make(chan *commitReq, lanes), max: max, timeout: timeout}
}

// commit commits steps with whatever other lanes commit at the same time and
// returns their errors (see claims.CommitBatch). It always returns: a
// committer runs until every lane has stopped.
func (c *committer) commit(steps []claims.Step) []error {
	r := &commitReq{steps: steps, errs: make(chan []error, 1)}
	c.reqs <- r
	return <-r.errs
}

// run commits groups until stop is closed; ctx bounds each transaction.
func (c *committer) run(ctx context.Context, stop <-chan struct{}) {
	for {
		select {
		case r := <-c.reqs:
			c.commitGroup(ctx, c.gather(r))
		case <-stop:
			return
		}
	}
}

// gather takes the requests already waiting behind first, up to max steps.
func (c *committer) gather(first *commitReq) []*commitReq {
	group, n := []*commitReq{first}, len(first.steps)
	for n < c.max {
		select {
		case r := <-c.reqs:
			group, n = append(group, r), n+len(r.steps)
		default:
			return group
		}
	}
	return group
}

// commitGroup commits a group in one transaction and answers each request
// with its own steps' errors. A panic answers every step with an unknown
// outcome, which its lane treats like a failed commit (it releases).
func (c *committer) commitGroup(ctx context.Context, group []*commitReq) {
	var all []claims.Step
	for _, r := range group {
		all = append(all, r.steps...)
	}
	errs := func() (errs []error) {
		defer func() {
			if v := recover(); v != nil {
				err := fmt.Errorf("lanes: committing %d steps panicked: %v", len(all), v)
				errs = make([]error, len(all))
				for i := range errs {
					errs[i] = err
				}
			}
		}()
		cctx, cancel := context.WithTimeout(ctx, c.timeout)
		defer cancel()
		return claims.CommitBatch(cctx, all)
	}()
	for _, r := range group {
		r.errs <- errs[:len(r.steps):len(r.steps)]
		errs = errs[len(r.steps):]
	}
}

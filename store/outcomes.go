package store

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// outcomeTimeout bounds the statement of one group of outcomes: the calls
// of a group wait for it whatever their own contexts say.
const outcomeTimeout = 30 * time.Second

// outcomeGroup is the group commit of task outcomes (RecordOutcome), as
// the lanes batch relay steps: the outcomes that wait while one group's
// statement runs are recorded together by the next, in one statement and
// one commit (one WAL flush), and each call is answered with its own
// result once that commit is durable. A call that finds nothing running
// runs its own at once: a group never waits to fill.
//
// One call leads at a time: it takes every waiting call (one per task; a
// second outcome of a task waits for the next group, so that one statement
// never updates a row twice), runs the statement, answers them, and hands
// the lead to the oldest call still waiting. If the statement fails, each
// call of the group runs alone, so that one failing outcome fails no other.
type outcomeGroup struct {
	mu      sync.Mutex
	waiting []*outcomeCall
	leading bool
	// grouped, when set (tests), hears the size of each group before its
	// statement runs, and joined the number of calls waiting after each
	// joins.
	grouped func(n int)
	joined  func(waiting int)
}

// outcomeCall is one RecordOutcome waiting for its group.
type outcomeCall struct {
	o TaskReport
	// lead closes when the call is to lead the next group; done when it
	// is answered (rec, recorded, err are set).
	lead, done chan struct{}
	rec        Recorded
	recorded   bool
	err        error
}

// join adds a call for o; its lead is closed at once when no group runs.
func (g *outcomeGroup) join(o TaskReport) *outcomeCall {
	c := &outcomeCall{o: o, lead: make(chan struct{}), done: make(chan struct{})}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.waiting = append(g.waiting, c)
	if !g.leading {
		g.leading = true
		close(c.lead)
	}
	if g.joined != nil {
		g.joined(len(g.waiting))
	}
	return c
}

// take removes the next group from the waiting calls: the oldest call of
// each task.
func (g *outcomeGroup) take() []*outcomeCall {
	g.mu.Lock()
	defer g.mu.Unlock()
	var group, rest []*outcomeCall
	seen := make(map[int64]bool, len(g.waiting))
	for _, c := range g.waiting {
		if seen[c.o.TaskID] {
			rest = append(rest, c)
			continue
		}
		seen[c.o.TaskID] = true
		group = append(group, c)
	}
	g.waiting = rest
	return group
}

// handOn gives the lead to the oldest waiting call, or ends it.
func (g *outcomeGroup) handOn() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.waiting) == 0 {
		g.leading = false
		return
	}
	close(g.waiting[0].lead)
}

// recordGroup runs the next group of outcomes as its leader (the caller's
// call is in it), answers each of its calls and hands the lead on. The
// group's statement runs under ctx's values but not its end: it is the
// other calls' too.
func (s *Store) recordGroup(ctx context.Context) {
	group := s.outcomes.take()
	defer s.outcomes.handOn()
	if s.outcomes.grouped != nil {
		s.outcomes.grouped(len(group))
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), outcomeTimeout)
	defer cancel()
	err := s.recordOutcomes(ctx, group)
	if err != nil && len(group) > 1 {
		// One failing outcome fails no other: each runs alone.
		for _, c := range group {
			c.rec, c.recorded = Recorded{}, false
			c.err = s.recordOutcomes(ctx, []*outcomeCall{c})
			if c.err != nil {
				c.rec, c.recorded = Recorded{}, false
				c.err = translate(c.err, fmt.Sprintf("recording the outcome of task %d", c.o.TaskID))
			}
			close(c.done)
		}
		return
	}
	for _, c := range group {
		if err != nil {
			c.rec, c.recorded = Recorded{}, false
			c.err = translate(err, fmt.Sprintf("recording the outcome of task %d", c.o.TaskID))
		}
		close(c.done)
	}
}

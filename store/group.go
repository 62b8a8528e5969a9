package store

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// groupTimeout bounds the statement of one group: the calls of a group wait
// for it whatever their own contexts say.
const groupTimeout = 30 * time.Second

// group is a group commit, as the lanes batch relay steps: the calls that
// wait while one group's statement runs are run together by the next, in
// one statement and one commit (one WAL flush where the commit flushes),
// and each is answered with its own result once that commit is done. A call
// that finds nothing running runs at once: a group never waits to fill.
//
// One call leads at a time: it takes every waiting call (but one that
// shares a key with an earlier call of the group, which waits for the next
// group, so that one statement never writes a row twice), runs them, answers
// them, and hands the lead to the oldest call still waiting. If the
// statement fails, each call of the group runs alone, so that one failing
// call fails no other.
type group[In, Out any] struct {
	// keys are the rows a call writes.
	keys func(In) []string
	// run runs calls in one statement and sets each one's out; a call it
	// sets nothing for found nothing to write.
	run func(ctx context.Context, calls []*groupCall[In, Out]) error

	mu      sync.Mutex
	waiting []*groupCall[In, Out]
	leading bool
	// grouped, when set (tests), hears the size of each group before its
	// statement runs, and joined the number of calls waiting after each
	// joins.
	grouped func(n int)
	joined  func(waiting int)
}

// groupCall is one call waiting for its group.
type groupCall[In, Out any] struct {
	in  In
	out Out
	err error
	// lead closes when the call is to lead the next group; done when it
	// is answered.
	lead, done chan struct{}
}

// do runs in with the calls waiting beside it and answers its result.
func (g *group[In, Out]) do(ctx context.Context, in In) (Out, error) {
	c := g.join(in)
	select {
	case <-c.lead:
		g.lead(ctx)
	case <-c.done:
	}
	<-c.done
	return c.out, c.err
}

// join adds a call for in; its lead is closed at once when no group runs.
func (g *group[In, Out]) join(in In) *groupCall[In, Out] {
	c := &groupCall[In, Out]{in: in, lead: make(chan struct{}), done: make(chan struct{})}
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

// take removes the next group from the waiting calls.
func (g *group[In, Out]) take() []*groupCall[In, Out] {
	g.mu.Lock()
	defer g.mu.Unlock()
	var calls, rest []*groupCall[In, Out]
	seen := map[string]bool{}
	for _, c := range g.waiting {
		keys := g.keys(c.in)
		clash := false
		for _, k := range keys {
			clash = clash || seen[k]
		}
		if clash {
			rest = append(rest, c)
			continue
		}
		for _, k := range keys {
			seen[k] = true
		}
		calls = append(calls, c)
	}
	g.waiting = rest
	return calls
}

// handOn gives the lead to the oldest waiting call, or ends it.
func (g *group[In, Out]) handOn() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.waiting) == 0 {
		g.leading = false
		return
	}
	close(g.waiting[0].lead)
}

// lead runs the next group (the leader's call is in it), answers each of
// its calls and hands the lead on. The statement runs under ctx's values
// but not its end: it is the other calls' too.
func (g *group[In, Out]) lead(ctx context.Context) {
	calls := g.take()
	defer g.handOn()
	answered := 0
	defer func() {
		// A panic answers every call not answered yet, then goes on up
		// the leader's stack: no call waits for ever.
		if r := recover(); r != nil {
			for _, c := range calls[answered:] {
				var zero Out
				c.out, c.err = zero, fmt.Errorf("the statement of its group panicked: %v", r)
				close(c.done)
			}
			panic(r)
		}
	}()
	if g.grouped != nil {
		g.grouped(len(calls))
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), groupTimeout)
	defer cancel()
	err := g.run(ctx, calls)
	if err != nil && len(calls) > 1 {
		// One failing call fails no other: each runs alone.
		for _, c := range calls {
			var zero Out
			c.out = zero
			c.err = g.run(ctx, []*groupCall[In, Out]{c})
			if c.err != nil {
				c.out = zero
			}
			close(c.done)
			answered++
		}
		return
	}
	for _, c := range calls {
		if err != nil {
			var zero Out
			c.out, c.err = zero, err
		}
		close(c.done)
		answered++
	}
}

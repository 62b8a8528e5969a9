package tasks

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/store"
)

// waiters are the long polls waiting for tasks, by topic. A waiting long
// poll holds no claim, no database connection and no body: it waits for a
// wake-up, then fetches again.
//
// A task created on this replica wakes one waiting long poll of its topic
// that takes every definition (wakeOne), not all of them: with many idle
// workers on a topic, waking every one cost a fetch statement per worker
// for each task, all but one finding nothing. A long poll that filters by
// definition may not take the task, so it is not woken by it: the task asks
// for a look (below) at once instead. A wake-up a long poll does not use is
// passed on when it leaves (remove): it answered with tasks it had already
// fetched, its wait ended, or its fetch failed; so is one after a full fetch
// over several topics, which may have taken another topic's task in place
// of the one it was woken for.
//
// The look (lookForTasks), every poll interval and when asked, is the net
// under all of this and how tasks of other replicas are found: one statement
// for every waiting long poll, which counts for each distinct ask (topic and
// definition filter) the tasks a fetch would lock now, and wakes only as
// many long polls of that ask as those tasks need. Idle long polls cost one
// statement per interval whatever their number; a long poll whose filter
// matches no task is never woken by a task it cannot take.
type waiters struct {
	mu sync.Mutex
	// byTopic holds each waiting long poll under each of its topics, with
	// its filter there.
	byTopic map[string]map[*waiter]store.TopicLock
	n, max  int
	closed  chan struct{}
	// look asks for a look before the next interval: a task was created
	// here for a topic that long polls filtering by definition wait for.
	look chan struct{}
	// gauge follows the number of waiting long polls.
	gauge func(float64)
}

type waiter struct {
	asks []store.TopicLock
	// max is the most tasks its fetch locks.
	max  int
	wake chan struct{} // one pending wake-up is enough
}

// newWaiters admits up to max long polls at once and reports their number
// to gauge (nil: to nothing).
func newWaiters(max int, gauge func(float64)) *waiters {
	if gauge == nil {
		gauge = func(float64) {}
	}
	return &waiters{byTopic: map[string]map[*waiter]store.TopicLock{}, max: max,
		closed: make(chan struct{}), look: make(chan struct{}, 1), gauge: gauge}
}

// add registers a long poll for asks (distinct topics) that fetches up to
// max tasks, or answers nil when MaxLongPolls wait already. Register before
// the first fetch, so that a task created between that fetch and the wait
// still wakes it.
func (ws *waiters) add(asks []store.TopicLock, max int) *waiter {
	w := &waiter{asks: asks, max: max, wake: make(chan struct{}, 1)}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.n >= ws.max {
		return nil
	}
	ws.n++
	ws.gauge(float64(ws.n))
	for _, a := range asks {
		set := ws.byTopic[a.Topic]
		if set == nil {
			set = map[*waiter]store.TopicLock{}
			ws.byTopic[a.Topic] = set
		}
		set[w] = a
	}
	return w
}

// remove unregisters w. A wake-up it has not used, or passOn (it used one
// but may have left the task it was for), goes to another long poll of its
// topics.
func (ws *waiters) remove(w *waiter, passOn bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.n--
	ws.gauge(float64(ws.n))
	for _, a := range w.asks {
		delete(ws.byTopic[a.Topic], w)
		if len(ws.byTopic[a.Topic]) == 0 {
			delete(ws.byTopic, a.Topic)
		}
	}
	select {
	case <-w.wake:
		passOn = true
	default:
	}
	if passOn {
		ws.wakeOneLocked(w.topics())
	}
}

func (w *waiter) topics() []string {
	out := make([]string, len(w.asks))
	for i, a := range w.asks {
		out[i] = a.Topic
	}
	return out
}

// wakeOne wakes, for each entry of topics (a topic once per task created),
// one long poll of that topic that takes every definition and has no
// wake-up pending; if long polls filtering by definition wait for the
// topic, it asks for a look.
func (ws *waiters) wakeOne(topics []string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.wakeOneLocked(topics)
}

func (ws *waiters) wakeOneLocked(topics []string) {
	for _, t := range topics {
		woke, filtered := false, false
		for w, a := range ws.byTopic[t] { // map order varies: no long poll is always the one
			switch {
			case len(a.DefinitionKeys) > 0:
				filtered = true
			case !woke:
				woke = wake(w)
			}
		}
		if filtered {
			select {
			case ws.look <- struct{}{}:
			default:
			}
		}
	}
}

// wake leaves a wake-up pending on w; false if one already was.
func wake(w *waiter) bool {
	select {
	case w.wake <- struct{}{}:
		return true
	default:
		return false
	}
}

// group is the long polls that wait with one ask (a topic and a filter).
type group struct {
	ask   store.TopicLock
	polls []*waiter
	// want is the most tasks they would fetch together.
	want int
}

// groups lists the distinct asks of the waiting long polls.
func (ws *waiters) groups() []*group {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	byAsk := map[string]*group{}
	var out []*group
	for _, set := range ws.byTopic {
		for w, a := range set {
			keys := slices.Clone(a.DefinitionKeys)
			slices.Sort(keys)
			keys = slices.Compact(keys)
			id := a.Topic + "\x1f" + strings.Join(keys, "\x1f")
			g := byAsk[id]
			if g == nil {
				g = &group{ask: store.TopicLock{Topic: a.Topic, DefinitionKeys: keys}}
				byAsk[id] = g
				out = append(out, g)
			}
			g.polls = append(g.polls, w)
			g.want += w.max
		}
	}
	return out
}

// wakeFor wakes long polls of g until their fetches could take n tasks
// (one that has a wake-up pending counts: it fetches anyway).
func wakeFor(g *group, n int) {
	for _, w := range g.polls {
		if n <= 0 {
			return
		}
		wake(w)
		n -= w.max
	}
}

// lookForTasks wakes the long polls that have tasks to fetch which no
// wake-up of this replica announced (created by other replicas, unlocked,
// expired, due after a retry timeout, or of a topic that long polls wait for
// with a definition filter). One statement, only while long polls wait,
// under the API's cap of database connections like any call.
func (a *API) lookForTasks(ctx context.Context) {
	groups := a.waiters.groups()
	if len(groups) == 0 {
		a.TestSignals.Looked.Signal(0)
		return
	}
	defer a.TestSignals.Looked.Signal(1)
	ctx, cancel := context.WithTimeout(ctx, a.cfg.PollInterval*4)
	defer cancel()
	release, err := a.srv.AcquireDB(ctx)
	if err != nil {
		return // the API's calls use every connection it may: they fetch already
	}
	defer release()
	asks, limits := make([]store.TopicLock, len(groups)), make([]int, len(groups))
	for i, g := range groups {
		asks[i], limits[i] = g.ask, g.want
	}
	counts, err := a.deps.Store.CountFetchable(ctx, asks, limits)
	if err != nil {
		if ctx.Err() == nil {
			a.deps.Logger.Warn("looking for tasks for waiting long polls", "code", fault.Code(err), "err", err)
		}
		return
	}
	for i, g := range groups {
		wakeFor(g, counts[i])
	}
}

// close ends every wait at once (the API is stopping).
func (ws *waiters) close() {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	select {
	case <-ws.closed:
	default:
		close(ws.closed)
	}
}

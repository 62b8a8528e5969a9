package api

import "sync"

// waiters are the long polls waiting for tasks, by topic. A waiting long
// poll holds no claim and no database connection: it waits for a wake-up,
// then fetches again.
//
// A task created on this replica wakes one waiting long poll of its topic
// (wakeOne), not all of them: with many idle workers on a topic, waking every
// one cost a fetch statement per worker for each task, all but one finding
// nothing (about nine empty fetches a task with 16 workers at half load, in
// make bench). A long poll that filters by definition may not take the task,
// so it cannot stand for the others: those are all woken. A wake-up a long
// poll does not use is passed on when it leaves (remove): it answered with
// tasks it had already fetched, its wait ended, or its fetch failed; so is
// one after a full fetch over several topics, which may have taken another
// topic's task in place of the one it was woken for. The poll for other
// replicas' tasks wakes every long poll of a topic that has tasks (wakeAll),
// the net under all of this.
type waiters struct {
	mu      sync.Mutex
	byTopic map[string]map[*waiter]struct{}
	closed  chan struct{}
}

type waiter struct {
	topics []string
	// filtered: it asks for some definitions only, so it may not take a task
	// of its topics.
	filtered bool
	wake     chan struct{} // one pending wake-up is enough
}

func newWaiters() *waiters {
	return &waiters{byTopic: map[string]map[*waiter]struct{}{}, closed: make(chan struct{})}
}

// add registers a long poll for distinct topics. Register before the first
// fetch, so that a task created between that fetch and the wait still wakes
// it.
func (ws *waiters) add(topics []string, filtered bool) *waiter {
	w := &waiter{topics: topics, filtered: filtered, wake: make(chan struct{}, 1)}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, t := range topics {
		set := ws.byTopic[t]
		if set == nil {
			set = map[*waiter]struct{}{}
			ws.byTopic[t] = set
		}
		set[w] = struct{}{}
	}
	return w
}

// remove unregisters w. A wake-up it has not used, or passOn (it used one
// but may have left the task it was for), goes to another long poll of its
// topics.
func (ws *waiters) remove(w *waiter, passOn bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, t := range w.topics {
		delete(ws.byTopic[t], w)
		if len(ws.byTopic[t]) == 0 {
			delete(ws.byTopic, t)
		}
	}
	select {
	case <-w.wake:
		passOn = true
	default:
	}
	if passOn {
		ws.wakeOneLocked(w.topics)
	}
}

// wakeOne wakes, for each entry of topics (a topic once per task created),
// one long poll of that topic that has no wake-up pending, and every long
// poll of it that filters.
func (ws *waiters) wakeOne(topics []string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.wakeOneLocked(topics)
}

func (ws *waiters) wakeOneLocked(topics []string) {
	for _, t := range topics {
		woke := false
		for w := range ws.byTopic[t] {
			if w.filtered || !woke {
				// Map order varies, so no long poll is always the one.
				if wake(w) {
					woke = woke || !w.filtered
				}
			}
		}
	}
}

// wakeAll wakes every long poll that waits for one of topics.
func (ws *waiters) wakeAll(topics []string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, t := range topics {
		for w := range ws.byTopic[t] {
			wake(w)
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

// topics lists the topics long polls wait for.
func (ws *waiters) topics() []string {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	out := make([]string, 0, len(ws.byTopic))
	for t := range ws.byTopic {
		out = append(out, t)
	}
	return out
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

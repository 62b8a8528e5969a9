package api

import "sync"

// waiters are the long polls waiting for tasks, by topic. A waiting long
// poll holds no claim and no database connection: it waits for a wake-up
// (a task of one of its topics created on this replica, or found by the
// poll for other replicas' tasks), then fetches again.
type waiters struct {
	mu     sync.Mutex
	set    map[*waiter]struct{}
	closed chan struct{}
}

type waiter struct {
	topics map[string]bool
	wake   chan struct{} // one pending wake-up is enough
}

func newWaiters() *waiters {
	return &waiters{set: map[*waiter]struct{}{}, closed: make(chan struct{})}
}

// add registers a long poll for topics. Register before the first fetch, so
// that a task created between that fetch and the wait still wakes it.
func (ws *waiters) add(topics []string) *waiter {
	w := &waiter{topics: make(map[string]bool, len(topics)), wake: make(chan struct{}, 1)}
	for _, t := range topics {
		w.topics[t] = true
	}
	ws.mu.Lock()
	ws.set[w] = struct{}{}
	ws.mu.Unlock()
	return w
}

func (ws *waiters) remove(w *waiter) {
	ws.mu.Lock()
	delete(ws.set, w)
	ws.mu.Unlock()
}

// notify wakes every long poll that waits for one of topics.
func (ws *waiters) notify(topics []string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for w := range ws.set {
		for _, t := range topics {
			if w.topics[t] {
				select {
				case w.wake <- struct{}{}:
				default:
				}
				break
			}
		}
	}
}

// topics lists the topics long polls wait for.
func (ws *waiters) topics() []string {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	seen := map[string]bool{}
	var out []string
	for w := range ws.set {
		for t := range w.topics {
			if !seen[t] {
				seen[t] = true
				out = append(out, t)
			}
		}
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

// Package taskwait is what both job protocols share: /engine-rest's long polls
// (api/tasks) and the Zeebe gateway's ActivateJobs long polls and job
// streams (api/zeebe) wait for tasks here, woken by the tasks this
// replica's steps create (TasksCreated, fed once by app from the lanes) and
// by a periodic look for the tasks of other replicas. A task is one row
// whichever protocol locks it (store.FetchAndLock): the waiters only say
// when a fetch is worth running.
package taskwait

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/defaults"
	"github.com/sutra-run/worker/internal/startstop"
	"github.com/sutra-run/worker/internal/testsignal"
	"github.com/sutra-run/worker/metrics"
	"github.com/sutra-run/worker/store"
)

// MaxLongPoll is the longest a long poll of either protocol waits for
// tasks: /engine-rest's cap on asyncResponseTimeout (Camunda's), and where
// the Zeebe gateway cuts a longer requestTimeout.
const MaxLongPoll = 30 * time.Minute

// Store is what the waiters need from the database (*store.Store): the
// look, the fetches, and the notices of other replicas' tasks.
type Store interface {
	CountFetchable(ctx context.Context, asks []store.TopicLock, limits []int) ([]int, error)
	FetchAndLockExcept(ctx context.Context, worker string, topics []store.TopicLock, max int, byPriority bool, except []store.CreatedTask) ([]store.LockedTask, error)
	LockCreated(ctx context.Context, worker string, created []store.CreatedTask) ([]store.LockedTask, error)
	ListenTasks(ctx context.Context, listening func(), heard func(topics []string)) error
}

// Deps are the waiters' collaborators.
type Deps struct {
	Store Store
	// Acquire takes a database connection for the look under the API's cap
	// (api.Server.AcquireDB); when the cap is full the look is skipped: the
	// calls that use every connection fetch already.
	Acquire func(ctx context.Context) (release func(), err error)
	Logger  *slog.Logger
}

// Config configures the look.
type Config struct {
	// PollInterval is how often the look runs while fetches wait
	// (SUTRA_TASK_POLL_INTERVAL, default 250ms).
	PollInterval time.Duration
}

// TestSignals tell tests what the waiters did; inert unless Init'ed.
type TestSignals struct {
	// Looked carries, after each look for tasks, the number of statements
	// it ran (0 or 1).
	Looked testsignal.Signal[int]
	// Listening is signalled each time the listener's LISTEN is in place
	// (at the start, and after each reconnection).
	Listening testsignal.Signal[struct{}]
	// Heard carries the topics of each notice of another replica's tasks
	// the listener handled.
	Heard testsignal.Signal[[]string]
	// Fetched carries, after each fetch of a waiter, whether it locked
	// the tasks handed to it (true) or looked for tasks (false).
	Fetched testsignal.Signal[bool]
}

// Waiters are the fetches waiting for tasks, by topic: long polls of both
// protocols and job streams. A waiting fetch holds no claim, no database
// connection and no body: it waits for a wake-up, then fetches again.
//
// A task created on this replica is handed, by its key, to one waiting fetch
// of its topic that takes every definition and has room for it (Created),
// which locks exactly the tasks handed to it (FetchAndLock): no statement
// looks for them. One for which every such waiter is full is handed to the
// first to lock those it holds (a backlog created at once spreads over the
// waiters that way; beyond MaxUnplaced a topic, it asks for a look). A task
// handed to a waiter that leaves before it locks it is handed to another
// (Remove); either way it stays in the database, fetchable by anyone. A
// task of another replica, heard of on the tasks channel (one LISTEN connection
// per replica, store.ListenTasks), wakes one waiting fetch of its topic
// that takes every definition (TasksCreated), not all of them: with many idle
// workers on a topic, waking every one cost a fetch statement per worker
// for each task, all but one finding nothing. A fetch that filters by
// definition may not take the task, so it is not woken by it: the task asks
// for a look (below) at once instead. A wake-up a fetch does not use is
// passed on when it leaves (Remove): it answered with tasks it had already
// fetched, its wait ended, or its fetch failed; so is one after a full fetch
// over several topics, which may have taken another topic's task in place
// of the one it was woken for.
//
// The look, every poll interval, when asked, and after each (re)connection
// of the listener, is the net under all of this and how tasks of other
// replicas are found while the listener is down: one statement for every
// waiting fetch, which counts for each distinct ask (topic and definition
// filter) the tasks a fetch would lock now, and wakes only as many waiters
// of that ask as those tasks need. Idle waiters cost one statement per
// interval whatever their number; a waiter whose filter matches no task is
// never woken by a task it cannot take.
type Waiters struct {
	startstop.Base
	TestSignals TestSignals
	deps        Deps
	cfg         Config
	mu          sync.Mutex
	// byTopic holds each waiter under each of its topics, with its filter
	// there.
	byTopic map[string]map[*Waiter]store.TopicLock
	// look asks for a look before the next interval: a task was created
	// here for a topic that waiters filtering by definition wait for.
	look chan struct{}
	// unplaced holds, by topic, the tasks created here that no waiter had
	// room for (at most MaxUnplaced a topic), oldest first: a waiter of
	// the topic that takes every definition is handed the next of them
	// each time it locks the ones handed to it (FetchAndLock), so a
	// backlog created at once reaches the waiters with no look. They stay
	// fetchable by anyone meanwhile: one locked elsewhere is skipped.
	unplaced map[string][]store.CreatedTask
}

// MaxUnplaced is the most tasks of one topic the waiters keep to hand on
// (Waiters.unplaced); more ask for a look.
const MaxUnplaced = 4096

// Slots cap the waiters of one protocol (SUTRA_API_MAX_LONG_POLLS,
// SUTRA_GATEWAY_MAX_STREAMS) and report their number to a gauge. Counted
// under the Waiters' lock.
type Slots struct {
	n, max int
	gauge  func(float64)
}

// NewSlots admits up to max waiters at once and reports their number to
// gauge.
func NewSlots(max int, gauge func(float64)) *Slots { return &Slots{max: max, gauge: gauge} }

// Waiter is one waiting fetch.
type Waiter struct {
	asks  []store.TopicLock
	slots *Slots
	// max is the most tasks its fetch locks.
	max  int
	wake chan struct{} // one pending wake-up is enough
	// handed are tasks created on this replica handed to this waiter to
	// lock by their keys (Waiters.Created), under the Waiters' lock; at
	// most max.
	handed []store.CreatedTask
	// tookHanded: the latest fetch locked tasks handed to it.
	tookHanded atomic.Bool
}

// Wake delivers the waiter's wake-ups: fetch again.
func (w *Waiter) Wake() <-chan struct{} { return w.wake }

// DefaultPollInterval is Config.PollInterval when unset.
const DefaultPollInterval = 250 * time.Millisecond

// New builds the waiters; Start runs the look until Stop.
func New(deps Deps, cfg Config) *Waiters {
	defaults.Set(&cfg.PollInterval, DefaultPollInterval)
	return &Waiters{deps: deps, cfg: cfg, byTopic: map[string]map[*Waiter]store.TopicLock{}, look: make(chan struct{}, 1),
		unplaced: map[string][]store.CreatedTask{}}
}

// Add registers a fetch for asks (distinct topics) that locks up to max
// tasks, or answers nil when slots are all taken. Register before the first
// fetch, so that a task created between that fetch and the wait still wakes
// it.
func (ws *Waiters) Add(asks []store.TopicLock, max int, slots *Slots) *Waiter {
	w := &Waiter{asks: asks, slots: slots, max: max, wake: make(chan struct{}, 1)}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if slots.n >= slots.max {
		return nil
	}
	slots.n++
	slots.gauge(float64(slots.n))
	for _, a := range asks {
		set := ws.byTopic[a.Topic]
		if set == nil {
			set = map[*Waiter]store.TopicLock{}
			ws.byTopic[a.Topic] = set
		}
		set[w] = a
	}
	return w
}

// Remove unregisters w. A wake-up it has not used, or passOn (it used one
// but may have left the task it was for), goes to another waiter of its
// topics.
func (ws *Waiters) Remove(w *Waiter, passOn bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	handed := w.handed
	w.handed = nil
	w.slots.n--
	w.slots.gauge(float64(w.slots.n))
	for _, a := range w.asks {
		delete(ws.byTopic[a.Topic], w)
		if len(ws.byTopic[a.Topic]) == 0 {
			delete(ws.byTopic, a.Topic)
			delete(ws.unplaced, a.Topic) // fetchable by whoever comes
		}
	}
	select {
	case <-w.wake:
		// A wake-up for tasks handed to it goes with them.
		passOn = passOn || len(handed) == 0
	default:
	}
	ws.handLocked(handed)
	if passOn {
		ws.wakeOneLocked(w.Topics())
	}
}

// TookHanded says whether w's latest fetch locked tasks handed to it: found
// by their keys, it leaves no other task behind, so it has no wake-up to
// pass on.
func (w *Waiter) TookHanded() bool { return w.tookHanded.Load() }

// Created hands the pull tasks a committed step of this replica created to
// waiting fetches (see Waiters). It never blocks.
func (ws *Waiters) Created(tasks []store.CreatedTask) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.handLocked(tasks)
}

// handLocked hands each task to a waiter of its topic that takes every
// definition and has room for it, one with no wake-up pending first, and
// wakes it. A task for whose topic every such waiter is full waits in
// unplaced for the first to make room. It asks for a look when waiters
// filtering by definition wait for the topic, or when a task has no
// waiter to go to.
func (ws *Waiters) handLocked(tasks []store.CreatedTask) {
	lookFor := false
	for _, t := range tasks {
		var to *Waiter
		var lock time.Duration
		filtered, full := false, false
		for w, a := range ws.byTopic[t.Topic] { // map order varies: no waiter is always the one
			switch {
			case len(a.DefinitionKeys) > 0:
				filtered = true
			case len(w.handed) >= w.max:
				full = true
			case to == nil || (len(to.wake) > 0 && len(w.wake) == 0):
				to, lock = w, a.LockDuration
			}
		}
		switch {
		case to != nil:
			t.LockDuration = lock
			to.handed = append(to.handed, t)
			wake(to)
		case full && len(ws.unplaced[t.Topic]) < MaxUnplaced:
			ws.unplaced[t.Topic] = append(ws.unplaced[t.Topic], t)
		default:
			lookFor = lookFor || len(ws.byTopic[t.Topic]) > 0
		}
		lookFor = lookFor || filtered
	}
	if lookFor {
		ws.askLook()
	}
}

// FetchAndLock runs the fetch of waiter w (nil: a fetch that does not wait)
// for worker: it locks the tasks handed to w by their keys when it was
// handed some and one of them is still free, else up to max tasks of asks
// but those handed to other waiters (store.FetchAndLockExcept): a task
// handed to a waiting stream is its, as Zeebe pushes a job to a stream
// activated, and a fetch that does not wait (a client's poll beside its
// stream) no longer takes it from under the stream in the moment between
// its commit and the stream's fetch.
func (ws *Waiters) FetchAndLock(ctx context.Context, w *Waiter, worker string, asks []store.TopicLock, max int, byPriority bool) ([]store.LockedTask, error) {
	if w != nil {
		ws.mu.Lock()
		handed := w.handed
		w.handed = nil
		if len(handed) > 0 {
			ws.handUnplacedLocked(w)
		}
		ws.mu.Unlock()
		w.tookHanded.Store(false)
		if len(handed) > 0 {
			got, err := ws.deps.Store.LockCreated(ctx, worker, handed)
			if err != nil || len(got) > 0 {
				w.tookHanded.Store(err == nil)
				ws.TestSignals.Fetched.Signal(true)
				return got, err
			}
			// Other fetches took them (a look woke them first): look.
		}
	}
	defer ws.TestSignals.Fetched.Signal(false)
	return ws.deps.Store.FetchAndLockExcept(ctx, worker, asks, max, byPriority, ws.handedOf(asks))
}

// handedOf lists the tasks of asks' topics handed to waiters.
func (ws *Waiters) handedOf(asks []store.TopicLock) []store.CreatedTask {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	var out []store.CreatedTask
	for _, a := range asks {
		for w := range ws.byTopic[a.Topic] {
			for _, t := range w.handed {
				if t.Topic == a.Topic {
					out = append(out, t)
				}
			}
		}
	}
	return out
}

// handUnplacedLocked hands w, which has room again, the next tasks of its
// topics that no waiter had room for, and wakes it to lock them once it
// locked those it holds.
func (ws *Waiters) handUnplacedLocked(w *Waiter) {
	for _, a := range w.asks {
		queue := ws.unplaced[a.Topic]
		if len(a.DefinitionKeys) > 0 || len(queue) == 0 {
			continue
		}
		n := min(w.max-len(w.handed), len(queue))
		for _, t := range queue[:n] {
			t.LockDuration = a.LockDuration
			w.handed = append(w.handed, t)
		}
		if n == len(queue) {
			delete(ws.unplaced, a.Topic)
		} else {
			ws.unplaced[a.Topic] = queue[n:]
		}
	}
	if len(w.handed) > 0 {
		wake(w)
	}
}

// Topics are the topics w waits for.
func (w *Waiter) Topics() []string {
	out := make([]string, len(w.asks))
	for i, a := range w.asks {
		out[i] = a.Topic
	}
	return out
}

// TasksCreated wakes waiters for the tasks a step of this replica created:
// topics holds the topic of each task, once per task. For each it wakes one
// waiter of that topic that takes every definition and has no wake-up
// pending; if waiters filtering by definition wait for the topic, it asks
// for a look. It never blocks.
func (ws *Waiters) TasksCreated(topics []string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.wakeOneLocked(topics)
}

// PassOn wakes one waiter of topic (it may be the caller's own): a fetch
// that took a task may have left more, which the woken waiter fetches. It
// never blocks.
func (ws *Waiters) PassOn(topic string) { ws.TasksCreated([]string{topic}) }

func (ws *Waiters) wakeOneLocked(topics []string) {
	for _, t := range topics {
		woke, filtered := false, false
		for w, a := range ws.byTopic[t] { // map order varies: no waiter is always the one
			switch {
			case len(a.DefinitionKeys) > 0:
				filtered = true
			case !woke:
				woke = wake(w)
			}
		}
		if filtered {
			ws.askLook()
		}
	}
}

// askLook asks for a look before the next interval. It never blocks.
func (ws *Waiters) askLook() {
	select {
	case ws.look <- struct{}{}:
	default:
	}
}

// wake leaves a wake-up pending on w; false if one already was.
func wake(w *Waiter) bool {
	select {
	case w.wake <- struct{}{}:
		return true
	default:
		return false
	}
}

// group is the waiters that wait with one ask (a topic and a filter).
type group struct {
	ask   store.TopicLock
	polls []*Waiter
	// want is the most tasks they would fetch together.
	want int
}

// groups lists the distinct asks of the waiters.
func (ws *Waiters) groups() []*group {
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

// wakeFor wakes waiters of g until their fetches could take n tasks (one
// that has a wake-up pending counts: it fetches anyway).
func wakeFor(g *group, n int) {
	for _, w := range g.polls {
		if n <= 0 {
			return
		}
		wake(w)
		n -= w.max
	}
}

// Start runs the look every poll interval and when asked, until Stop.
func (ws *Waiters) Start(ctx context.Context) error {
	return ws.Run(ctx, "job waiters", func(soft, _ context.Context) {
		var listener sync.WaitGroup
		listener.Go(func() { ws.listen(soft) })
		defer listener.Wait()
		poll := time.NewTicker(ws.cfg.PollInterval)
		defer poll.Stop()
		for {
			select {
			case <-poll.C:
				ws.lookForTasks(soft)
			case <-ws.look:
				ws.lookForTasks(soft)
			case <-soft.Done():
				return
			}
		}
	})
}

// The wait between two tries to listen again starts at minListenRetry and
// doubles up to maxListenRetry.
const (
	minListenRetry = 100 * time.Millisecond
	maxListenRetry = 5 * time.Second
)

// listen keeps this replica's one LISTEN on the tasks channel (store.ListenTasks) until ctx
// ends, connecting again after a failure (a database outage); each (re)connection asks for a look,
// for the notices missed meanwhile. A notice of another replica's tasks
// wakes a waiter per task (TasksCreated), one too large to tell its topics
// asks for a look.
func (ws *Waiters) listen(ctx context.Context) {
	retry := minListenRetry
	for {
		err := ws.deps.Store.ListenTasks(ctx, func() {
			retry = minListenRetry
			ws.askLook()
			ws.TestSignals.Listening.Signal(struct{}{})
		}, func(topics []string) {
			if topics == nil {
				ws.askLook()
			} else {
				ws.TasksCreated(topics)
			}
			ws.TestSignals.Heard.Signal(topics)
		})
		if ctx.Err() != nil {
			return
		}
		if retry == minListenRetry { // once an outage
			ws.deps.Logger.Warn("listening for other replicas' tasks; the look finds them until the listener is back",
				"code", fault.Code(err), "err", err)
		}
		t := time.NewTimer(retry)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
		retry = min(2*retry, maxListenRetry)
	}
}

// lookForTasks wakes the waiters that have tasks to fetch which no wake-up
// of this replica announced (created by other replicas, unlocked, expired,
// due after a retry timeout, or of a topic that waiters wait for with a
// definition filter). One statement, only while fetches wait, under the
// API's cap of database connections like any call.
func (ws *Waiters) lookForTasks(ctx context.Context) {
	groups := ws.groups()
	if len(groups) == 0 {
		ws.TestSignals.Looked.Signal(0)
		return
	}
	defer ws.TestSignals.Looked.Signal(1)
	ctx, cancel := context.WithTimeout(ctx, ws.cfg.PollInterval*4)
	defer cancel()
	release, err := ws.deps.Acquire(ctx)
	if err != nil {
		return // calls use every connection they may: they fetch already
	}
	defer release()
	asks, limits := make([]store.TopicLock, len(groups)), make([]int, len(groups))
	for i, g := range groups {
		asks[i], limits[i] = g.ask, g.want
	}
	counts, err := ws.deps.Store.CountFetchable(ctx, asks, limits)
	if err != nil {
		if ctx.Err() == nil {
			ws.deps.Logger.Warn("looking for tasks for waiting fetches", "code", fault.Code(err), "err", err)
		}
		return
	}
	for i, g := range groups {
		wakeFor(g, counts[i])
	}
}

// The protocols, as sutra_job_activation_seconds labels them.
const (
	Zeebe      = "zeebe"
	EngineRest = "engine-rest"
	REST       = "rest" // Camunda 8's REST API v2 (api/rest)
)

// Locked counts a task a fetch of protocol locked in the metrics both
// protocols share.
func Locked(m *metrics.Metrics, protocol string, t store.LockedTask) {
	m.TasksLocked.WithLabelValues(t.Topic).Inc()
	m.TaskWait.Observe(t.Waited.Seconds())
	m.JobActivation.WithLabelValues(protocol).Observe(t.Waited.Seconds())
	if t.Relocked {
		m.TasksLockExpired.Inc()
	}
}

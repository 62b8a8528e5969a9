package taskwait

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sutra-run/worker/store"
)

// pending counts the long polls that have a wake-up pending, taking them.
func pending(ws []*Waiter) (n int, woken []*Waiter) {
	for _, w := range ws {
		select {
		case <-w.wake:
			n++
			woken = append(woken, w)
		default:
		}
	}
	return n, woken
}

// newWaiters builds waiters with one protocol's slots, capped at max.
func newWaiters(max int, gauge func(float64)) (*Waiters, *Slots) {
	if gauge == nil {
		gauge = func(float64) {}
	}
	return New(Deps{}, Config{}), NewSlots(max, gauge)
}

// addN adds n long polls fetching one task each, of topics, filtered to
// the definitions keys (none: every definition).
func addN(ws *Waiters, slots *Slots, n int, keys []string, topics ...string) []*Waiter {
	out := make([]*Waiter, n)
	for i := range out {
		asks := make([]store.TopicLock, len(topics))
		for j, t := range topics {
			asks[j] = store.TopicLock{Topic: t, DefinitionKeys: keys}
		}
		out[i] = ws.Add(asks, 1, slots)
	}
	return out
}

func looked(ws *Waiters) bool {
	select {
	case <-ws.look:
		return true
	default:
		return false
	}
}

func TestATaskWakesOneLongPollOfItsTopicAndAsksALookForThoseThatFilter(t *testing.T) {
	ws, slots := newWaiters(100, nil)
	plain, other := addN(ws, slots, 16, nil, "t"), addN(ws, slots, 3, nil, "u")

	ws.TasksCreated([]string{"t"})
	if n, _ := pending(plain); n != 1 {
		t.Errorf("one task woke %d of 16 long polls of its topic, want 1", n)
	}
	if n, _ := pending(other); n != 0 {
		t.Errorf("a task of t woke %d long polls of u", n)
	}
	if looked(ws) {
		t.Errorf("a task asked for a look with no long poll filtering on its topic")
	}

	// Three tasks: three distinct long polls, since one pending wake-up is
	// one fetch.
	ws.TasksCreated([]string{"t", "t", "t"})
	if n, _ := pending(plain); n != 3 {
		t.Errorf("three tasks woke %d long polls, want 3", n)
	}

	// Long polls filtering by definition may not take the task: they are
	// not woken by it, the look finds out which may.
	filtered := addN(ws, slots, 2, []string{"d"}, "t")
	ws.TasksCreated([]string{"t"})
	if n, _ := pending(filtered); n != 0 {
		t.Errorf("one task woke %d long polls that filter by definition, want none", n)
	}
	if !looked(ws) {
		t.Errorf("a task of a topic that filtering long polls wait for asked for no look")
	}
}

func TestTheLookGroupsLongPollsByTheirAskAndWakesAsManyAsTheTasksNeed(t *testing.T) {
	ws, slots := newWaiters(100, nil)
	plain := addN(ws, slots, 4, nil, "t")
	d := addN(ws, slots, 3, []string{"b", "a"}, "t")
	d = append(d, addN(ws, slots, 2, []string{"a", "b", "a"}, "t")...) // the same filter
	e := addN(ws, slots, 2, []string{"e"}, "t")
	groups := ws.groups()
	if len(groups) != 3 {
		t.Fatalf("%d groups, want 3 (every definition; a and b; e)", len(groups))
	}
	for _, g := range groups {
		want := map[string]int{"": 4, "a b": 5, "e": 2}
		if got := len(g.polls); got != want[strings.Join(g.ask.DefinitionKeys, " ")] || g.want != got {
			t.Errorf("group %q: %d long polls wanting %d tasks, want %d", strings.Join(g.ask.DefinitionKeys, " "), got, g.want, want[strings.Join(g.ask.DefinitionKeys, " ")])
		}
		switch strings.Join(g.ask.DefinitionKeys, " ") {
		case "":
			wakeFor(g, 2)
		case "a b":
			wakeFor(g, 1)
		}
	}
	if n, _ := pending(plain); n != 2 {
		t.Errorf("two tasks for every definition woke %d long polls, want 2", n)
	}
	if n, _ := pending(d); n != 1 {
		t.Errorf("one task of a or b woke %d long polls, want 1", n)
	}
	if n, _ := pending(e); n != 0 {
		t.Errorf("no task of e woke %d long polls of e", n)
	}
}

func TestNoMoreLongPollsWaitThanTheCapAllows(t *testing.T) {
	var gauge float64
	ws, slots := newWaiters(2, func(v float64) { gauge = v })
	polls := addN(ws, slots, 2, nil, "t")
	if over := addN(ws, slots, 1, nil, "t"); over[0] != nil || gauge != 2 {
		t.Fatalf("a third long poll was admitted under a cap of 2 (gauge %v)", gauge)
	}
	ws.Remove(polls[0], false)
	if again := addN(ws, slots, 1, nil, "t"); again[0] == nil || gauge != 2 {
		t.Fatalf("a long poll was refused with one place free (gauge %v)", gauge)
	}
}

func TestAWakeUpALongPollLeavesUnusedGoesToAnother(t *testing.T) {
	ws, slots := newWaiters(100, nil)
	polls := addN(ws, slots, 2, nil, "t")
	ws.TasksCreated([]string{"t"})
	woke := polls[0]
	if len(polls[1].wake) == 1 {
		woke = polls[1]
	}
	ws.Remove(woke, false) // it answered with tasks fetched before it woke
	if n, _ := pending(polls); n != 1 {
		t.Fatalf("%d long polls hold the wake-up after the woken one left, want 1 (the other)", n)
	}

	// One that used its wake-up but may have left the task it was for.
	rest := addN(ws, slots, 1, nil, "t")
	for _, w := range polls {
		if w != woke {
			ws.Remove(w, true)
		}
	}
	if n, _ := pending(rest); n != 1 {
		t.Errorf("a wake-up passed on reached %d long polls, want 1", n)
	}

	// One that leaves with nothing pending and nothing to pass on wakes no one.
	last := addN(ws, slots, 1, nil, "t")[0]
	ws.Remove(rest[0], false)
	if n, _ := pending([]*Waiter{last}); n != 0 {
		t.Errorf("leaving without a wake-up woke %d long polls", n)
	}
	if got := ws.groups(); len(got) != 1 {
		t.Errorf("asks waited for: %d, want 1", len(got))
	}
	ws.Remove(last, false)
	if got := ws.groups(); len(got) != 0 {
		t.Errorf("asks waited for with no long poll: %d", len(got))
	}
}

// Tasks created here that no waiter has room for wait, up to MaxUnplaced a
// topic, for a waiter to make room, in order; more ask for a look; they go
// with the topic's last waiter.
func TestTasksNoWaiterHasRoomForGoToTheFirstToMakeRoom(t *testing.T) {
	ws, slots := newWaiters(100, nil)
	polls := addN(ws, slots, 2, nil, "t")
	created := make([]store.CreatedTask, 2+MaxUnplaced)
	for i := range created {
		created[i] = store.CreatedTask{Topic: "t", InstanceID: "i", TokenID: fmt.Sprint(i)}
	}
	ws.Created(created)
	if n, _ := pending(polls); n != 2 || looked(ws) {
		t.Fatalf("%d long polls woken, a look asked: %v; want 2 and none for the tasks kept", n, looked(ws))
	}
	ws.Created([]store.CreatedTask{{Topic: "t", InstanceID: "i", TokenID: "beyond"}})
	if !looked(ws) {
		t.Errorf("a task beyond MaxUnplaced asked for no look")
	}
	w := polls[0]
	ws.mu.Lock()
	w.handed = nil // its fetch took the one handed to it
	ws.handUnplacedLocked(w)
	ws.mu.Unlock()
	if n, _ := pending(polls); n != 1 || len(w.handed) != 1 || w.handed[0].TokenID != "2" {
		t.Errorf("the long poll that made room was handed %+v (woken: %d), want the oldest task kept", w.handed, n)
	}
	for _, p := range polls {
		ws.Remove(p, false)
	}
	if len(ws.unplaced) != 0 {
		t.Errorf("%d topics' tasks kept with no waiter left", len(ws.unplaced))
	}
}

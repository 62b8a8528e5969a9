package api

import "testing"

// pending counts the long polls that have a wake-up pending, taking them.
func pending(ws []*waiter) (n int, woken []*waiter) {
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

func addN(ws *waiters, n int, filtered bool, topics ...string) []*waiter {
	out := make([]*waiter, n)
	for i := range out {
		out[i] = ws.add(topics, filtered)
	}
	return out
}

func TestATaskWakesOneLongPollOfItsTopicAndEveryOneThatFilters(t *testing.T) {
	ws := newWaiters()
	plain, filtered, other := addN(ws, 16, false, "t"), addN(ws, 2, true, "t"), addN(ws, 3, false, "u")

	ws.wakeOne([]string{"t"})
	if n, _ := pending(plain); n != 1 {
		t.Errorf("one task woke %d of 16 long polls of its topic, want 1", n)
	}
	if n, _ := pending(filtered); n != 2 {
		t.Errorf("one task woke %d of 2 filtering long polls, want both (they may not take it)", n)
	}
	if n, _ := pending(other); n != 0 {
		t.Errorf("a task of t woke %d long polls of u", n)
	}

	// Three tasks: three distinct long polls, since one pending wake-up is
	// one fetch.
	ws.wakeOne([]string{"t", "t", "t"})
	if n, _ := pending(plain); n != 3 {
		t.Errorf("three tasks woke %d long polls, want 3", n)
	}

	ws.wakeAll([]string{"t"})
	if n, _ := pending(plain); n != 16 {
		t.Errorf("the poll's wake-up reached %d of 16 long polls, want every one", n)
	}
}

func TestAWakeUpALongPollLeavesUnusedGoesToAnother(t *testing.T) {
	ws := newWaiters()
	polls := addN(ws, 2, false, "t")
	ws.wakeOne([]string{"t"})
	woke := polls[0]
	if len(polls[1].wake) == 1 {
		woke = polls[1]
	}
	ws.remove(woke, false) // it answered with tasks fetched before it woke
	if n, _ := pending(polls); n != 1 {
		t.Fatalf("%d long polls hold the wake-up after the woken one left, want 1 (the other)", n)
	}

	// One that used its wake-up but may have left the task it was for.
	rest := []*waiter{ws.add([]string{"t"}, false)}
	for _, w := range polls {
		if w != woke {
			ws.remove(w, true)
		}
	}
	if n, _ := pending(rest); n != 1 {
		t.Errorf("a wake-up passed on reached %d long polls, want 1", n)
	}

	// One that leaves with nothing pending and nothing to pass on wakes no one.
	last := ws.add([]string{"t"}, false)
	ws.remove(rest[0], false)
	if n, _ := pending([]*waiter{last}); n != 0 {
		t.Errorf("leaving without a wake-up woke %d long polls", n)
	}
	if got := ws.topics(); len(got) != 1 {
		t.Errorf("topics waited for: %v, want [t]", got)
	}
	ws.remove(last, false)
	if got := ws.topics(); len(got) != 0 {
		t.Errorf("topics waited for with no long poll: %v", got)
	}
}

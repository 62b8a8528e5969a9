package outbox

import (
	"testing"

	"github.com/sutra-run/worker/store"
)

// row is an outbox row of instance x with its seq and After.
func row(seq, after int64) store.OutboxRow {
	return store.OutboxRow{ID: "x", InstanceID: "x", Target: store.TargetOutbox, Seq: seq, After: after}
}

// afterOf says what each queue of a chain waits for: "" nothing, "failed",
// or "gate" (the gate of an earlier batch).
func afterOf(qs []*queue) []string {
	out := make([]string, len(qs))
	for i, q := range qs {
		switch {
		case q.after == nil:
		case q.after == failed:
			out[i] = "failed"
		default:
			out[i] = "gate"
		}
	}
	return out
}

// Two batches' marks may commit in either order: a row written after the
// later batch's mark and before the earlier one's names the earlier row
// (the latest unpublished) as After, while the instance's last gate holds
// the later one. It goes behind that gate, not back to the table (it was
// handed back, and the test of handed rows saw a lease statement take it).
func TestARowWhoseAfterIsBehindTheInstancesLastGateGoesBehindThatGate(t *testing.T) {
	p := New(Deps{}, Config{})
	first := p.chain([]store.OutboxRow{row(58, 0)})
	second := p.chain([]store.OutboxRow{row(81, 58)})
	if got := afterOf(second); got[0] != "gate" || second[0].after != first[0].gate {
		t.Fatalf("81 after 58: %v, want behind 58's gate", got)
	}
	third := p.chain([]store.OutboxRow{row(100, 58)})
	if len(third) != 1 || third[0].after != second[0].gate {
		t.Fatalf("100 after 58 with 81's gate last: %v, want behind 81's gate", afterOf(third))
	}
}

// A row written beside a step's commit by a transaction that could not see
// the step's row (a task outcome's relay, with no After) waits for the
// instance's batch in flight all the same; so does the next step's row,
// written behind it: no later row of the instance overtakes the step's.
func TestARowWithoutAfterWaitsForItsInstancesBatchInFlight(t *testing.T) {
	p := New(Deps{}, Config{})
	step := p.chain([]store.OutboxRow{row(10, 0)})
	outcome := p.chain([]store.OutboxRow{row(11, 0)})
	if outcome[0].after != step[0].gate {
		t.Fatalf("11 with no After: %v, want behind 10's gate", afterOf(outcome))
	}
	next := p.chain([]store.OutboxRow{row(12, 10)}) // 11's mark committed first
	if next[0].after != outcome[0].gate {
		t.Fatalf("12 after 10: %v, want behind 11's gate (itself behind 10's)", afterOf(next))
	}
	if fresh := New(Deps{}, Config{}).chain([]store.OutboxRow{row(5, 0)}); fresh[0].after != nil {
		t.Fatalf("a first row: %v, want nothing to wait for", afterOf(fresh))
	}
}

// An instance's relay (a task outcome) never waits for the instance's BPMN
// messages in flight, nor they for it: each class chains on its own.
func TestRowsOfAnotherClassOfTheInstanceDoNotWaitForEachOther(t *testing.T) {
	p := New(Deps{}, Config{})
	message := p.chain([]store.OutboxRow{row(10, 0)})
	relay := row(11, 0)
	relay.Target = store.TargetRelay
	outcome := p.chain([]store.OutboxRow{relay})
	if outcome[0].after != nil {
		t.Fatalf("a relay behind a message in flight: %v, want nothing to wait for", afterOf(outcome))
	}
	if next := p.chain([]store.OutboxRow{row(12, 10)}); next[0].after != message[0].gate {
		t.Fatalf("12 after 10: %v, want behind 10's gate, not the relay's", afterOf(next))
	}
}

// A row handed over late, after a later row of its instance, is never sent
// behind that later row's gate; and a later row in the same hand-over as
// an earlier one does not ride in its queue past a row the queue lacks.
func TestARowHandedOverOutOfOrderIsHandedBack(t *testing.T) {
	p := New(Deps{}, Config{})
	p.chain([]store.OutboxRow{row(10, 0)})
	p.chain([]store.OutboxRow{row(12, 11)}) // 11's commit has not handed it over yet
	if late := p.chain([]store.OutboxRow{row(11, 10)}); afterOf(late)[0] != "failed" {
		t.Fatalf("11 handed over after 12: %v, want handed back", afterOf(late))
	}

	p = New(Deps{}, Config{})
	p.chain([]store.OutboxRow{row(20, 0)})
	qs := p.chain([]store.OutboxRow{row(21, 20), row(23, 22)}) // 22 comes later
	if len(qs) != 2 || len(qs[0].rows) != 1 || afterOf(qs)[0] != "gate" || afterOf(qs)[1] != "failed" {
		t.Fatalf("21 and 23 without 22: %d queues %v, want 21 behind 20 and 23 handed back", len(qs), afterOf(qs))
	}
}

// connection is a Broker that is connected or not.
type connection struct {
	Broker
	up bool
}

func (c connection) Connected() bool { return c.up }

// Commits lease their rows to a running publisher only while its broker is
// connected: during an outage they wait in the table, not in its memory.
func TestCommitsLeaseTheirRowsToThePublisherOnlyWhileItsBrokerIsConnected(t *testing.T) {
	for _, up := range []bool{true, false} {
		p := New(Deps{Broker: connection{up: up}}, Config{Replica: "r1"})
		p.accepting.Store(true)
		if owner, _ := p.Lessee(); (owner == "r1") != up {
			t.Errorf("broker connected %v: lessee %q", up, owner)
		}
	}
}

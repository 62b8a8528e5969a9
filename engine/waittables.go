package engine

import "github.com/sutra-run/worker/bpmn"

// WaitTables says which store tables hold the rows of closed waits: the
// kinds of wait rows there are (a subscription, a timer, a pull task).
type WaitTables uint8

const (
	TableSubscriptions WaitTables = 1 << iota
	TableTimers
	TableTasks
	TableSignals
	// AllWaitTables is every table: what a close must look in when it is
	// not known which rows the wait has.
	AllWaitTables = TableSubscriptions | TableTimers | TableTasks | TableSignals
)

// CloseTables returns, for each wait of closes (a step's
// Effects.CloseWaits), the tables its rows are in, read from the waits armed
// in before (the state the step started from) and the elements of proc:
// a message event or receive task has a subscription, a signal event a
// signal subscription, a timer event a timer,
// a pull task or a listener's job a task row. A wait it cannot place (a token or element it does
// not find) gets AllWaitTables. The store deletes from those tables only.
func CloseTables(proc *bpmn.Process, before State, closes []WaitRef) []WaitTables {
	if len(closes) == 0 {
		return nil
	}
	out := make([]WaitTables, len(closes))
	for i, w := range closes {
		armed, ok := armedOf(before, w.TokenID)
		if !ok {
			out[i] = AllWaitTables
			if listenerJob(before, w.TokenID) {
				out[i] = TableTasks
			}
			continue
		}
		for _, a := range armed {
			if w.Element != "" && a.Element != w.Element {
				continue
			}
			out[i] |= tableOf(proc.Element(a.Element))
		}
		if out[i] == 0 {
			out[i] = AllWaitTables // nothing armed matches: look everywhere
		}
	}
	return out
}

// armedOf is the waits armed for token id ("" the process level) in st.
func armedOf(st State, id string) ([]Armed, bool) {
	if id == "" {
		return st.Armed, true
	}
	for _, t := range st.Tokens {
		if t.ID == id {
			return t.Armed, true
		}
	}
	return nil, false
}

// listenerJob reports whether id keys the open listener job of a token of st.
func listenerJob(st State, id string) bool {
	for _, t := range st.Tokens {
		if t.Wait == WaitListener && t.Listener.Job == id {
			return true
		}
	}
	return false
}

// tableOf is the table a wait armed at el has its row in.
func tableOf(el *bpmn.Element) WaitTables {
	switch {
	case el == nil:
		return AllWaitTables
	case el.Message != nil:
		return TableSubscriptions
	case el.Signal != nil:
		return TableSignals
	case el.Timer != nil:
		return TableTimers
	case el.Task != nil:
		return TableTasks
	}
	return AllWaitTables
}

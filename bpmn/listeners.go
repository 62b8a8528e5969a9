package bpmn

import (
	"strings"

	"github.com/sutra-run/worker/feel"
)

// Listener events. An execution listener runs at ListenerStart or
// ListenerEnd of its element (of each inner instance of a multi-instance
// activity) or, on a multi-instance activity, at ListenerBeforeAll of its
// body (Zeebe 8.10), before its input collection is evaluated; a task listener at a user task's lifecycle
// event (Zeebe 8.6's names create, assignment, update, complete and cancel
// are read as creating, assigning, updating, completing and canceling).
const (
	ListenerStart      = "start"
	ListenerEnd        = "end"
	ListenerBeforeAll  = "beforeAll"
	ListenerCreating   = "creating"
	ListenerAssigning  = "assigning"
	ListenerUpdating   = "updating"
	ListenerCompleting = "completing"
	// ListenerCanceling runs when a created user task is canceled (an
	// interrupting event, a termination, a cancel of its instance): its
	// termination, and what caused it, wait for the jobs.
	ListenerCanceling = "canceling"
)

// Listener is a zeebe:executionListener or zeebe:taskListener: a job of
// Type that a worker completes before the element goes on.
type Listener struct {
	Event string
	// Type and Retries may be expressions, evaluated when the job is made;
	// static retries were validated at Parse.
	Type, Retries *feel.Expr
}

// ListenersOf returns el's listeners of event, in document order.
func (el *Element) ListenersOf(event string) []Listener {
	var out []Listener
	for _, l := range el.Listeners {
		if l.Event == event {
			out = append(out, l)
		}
	}
	return out
}

// taskListenerEvents maps the eventType values Modeler writes to the event
// they name.
var taskListenerEvents = map[string]string{
	"creating": ListenerCreating, "create": ListenerCreating,
	"assigning": ListenerAssigning, "assignment": ListenerAssigning,
	"completing": ListenerCompleting, "complete": ListenerCompleting,
	"updating": ListenerUpdating, "update": ListenerUpdating,
	"canceling": ListenerCanceling, "cancel": ListenerCanceling,
}

// listeners reads el's zeebe:executionListeners and zeebe:taskListeners
// into el.Listeners. Where they may sit is checked once the element's kind
// is known (checkListeners).
func (x *extensions) listeners(el *Element) error {
	for n := x.take("executionListeners"); n != nil; n = x.take("executionListeners") {
		for _, k := range n.Kids {
			if !k.Is(nsZeebe, "executionListener") {
				continue
			}
			event := strings.TrimSpace(k.Attr("eventType"))
			if event == "" {
				event = ListenerStart // Zeebe's default
			}
			if event != ListenerStart && event != ListenerEnd && event != ListenerBeforeAll {
				return invalid("execution listener of %q has eventType %q, not start, end or beforeAll", el.ID, event)
			}
			if err := addListener(el, "execution listener", event, k); err != nil {
				return err
			}
		}
	}
	for n := x.take("taskListeners"); n != nil; n = x.take("taskListeners") {
		for _, k := range n.Kids {
			if !k.Is(nsZeebe, "taskListener") {
				continue
			}
			written := strings.TrimSpace(k.Attr("eventType"))
			event, known := taskListenerEvents[written]
			if !known {
				return invalid("task listener of %q has eventType %q, not creating, assigning, updating, completing or canceling", el.ID, written)
			}
			if err := addListener(el, "task listener", event, k); err != nil {
				return err
			}
		}
	}
	return nil
}

// addListener compiles listener k of event onto el; two of one event and
// type are refused, as Zeebe refuses them.
func addListener(el *Element, what, event string, k *node) error {
	typ := strings.TrimSpace(k.Attr("type"))
	if typ == "" {
		return invalid("%s of %q (%s) has no type", what, el.ID, event)
	}
	for _, l := range el.Listeners {
		if l.Event == event && l.Type.Source() == typ {
			return invalid("%q has two %s listeners of type %q", el.ID, event, typ)
		}
	}
	t, err := taskDefinition(el.ID, typ, strings.TrimSpace(k.Attr("retries")))
	if err != nil {
		return err
	}
	el.Listeners = append(el.Listeners, Listener{Event: event, Type: t.Type, Retries: t.Retries})
	return nil
}

// checkListeners refuses listeners where Zeebe refuses them.
func checkListeners(el *Element) error {
	for _, l := range el.Listeners {
		switch l.Event {
		case ListenerCreating, ListenerAssigning, ListenerUpdating, ListenerCompleting, ListenerCanceling:
			if el.User == nil || !el.User.Native {
				return invalid("task listeners of %q need a Camunda user task (zeebe:userTask)", el.ID)
			}
		case ListenerStart:
			switch el.Kind {
			case KindStart:
				return invalid("start event %q cannot have start execution listeners: put them on its process or subprocess", el.ID)
			case KindBoundary:
				return invalid("boundary event %q cannot have start execution listeners: put them on %s", el.ID, "the activity it is attached to")
			}
		case ListenerBeforeAll:
			if el.Loop == nil {
				return invalid("%q has beforeAll execution listeners but is no multi-instance activity", el.ID)
			}
		case ListenerEnd:
			switch el.Kind {
			case KindExclusive, KindInclusive, KindParallel, KindEventGateway:
				return invalid("gateway %q cannot have end execution listeners: put start listeners on the element after it", el.ID)
			case KindErrorEnd:
				return invalid("error end event %q cannot have end execution listeners: put them on the catch event", el.ID)
			}
		}
	}
	return nil
}

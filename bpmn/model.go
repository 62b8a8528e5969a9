// Package bpmn turns BPMN 2.0 XML, as Camunda Modeler saves it for Camunda 8
// (Zeebe extension elements), into an executable model. It accepts the subset
// the engine runs and refuses everything else at deploy with
// fault.BPMNUnsupported naming the element, so nothing is mis-run later.
//
// A *Process is immutable after Parse and safe for concurrent use; every
// expression in it is compiled once, at Parse. Callers must not modify the
// model's exported fields.
package bpmn

import (
	"cmp"
	"slices"

	"github.com/sutra-run/worker/feel"
)

// Kind is what an element does when a token reaches it. Several BPMN element
// types share a kind (a receive task waits exactly like a message catch event).
type Kind uint8

const (
	// KindStart is a none start event (of the process or of a subprocess).
	KindStart Kind = iota + 1
	// KindEnd ends the token; with a Message it publishes first (message end event).
	KindEnd
	// KindTerminateEnd ends every token of its scope.
	KindTerminateEnd
	// KindErrorEnd throws Error to the enclosing subprocesses' error boundaries.
	KindErrorEnd
	// KindThrow passes the token on; with a Message it publishes first
	// (message intermediate throw event, send task with a messageRef).
	KindThrow
	// KindMessageCatch parks the token on a message subscription
	// (message intermediate catch event, receive task).
	KindMessageCatch
	// KindTimerCatch parks the token on a timer (timer intermediate catch event).
	KindTimerCatch
	// KindTask parks the token on a pull task for external workers
	// (service task, send task with a zeebe:taskDefinition).
	KindTask
	// KindSubProcess opens a scope holding child tokens (embedded subprocess).
	KindSubProcess
	// KindExclusive takes the first outgoing flow whose condition holds.
	KindExclusive
	// KindParallel joins its incoming flows and forks to all outgoing flows.
	KindParallel
	// KindEventGateway parks the token on the waits of the catch events it
	// leads to; the first that fires wins.
	KindEventGateway
	// KindBoundary is a message, timer or error event attached to an activity.
	// Tokens never flow into it; it is armed with its activity.
	KindBoundary
)

// Process is one executable BPMN process.
type Process struct {
	// ID is the process id attribute: the definition key.
	ID   string
	Name string
	// Start is the process's none start event.
	Start *Element

	elements map[string]*Element
	flows    map[string]*Flow
	messages []string
}

// Key is the definition key under which the store versions this process.
func (p *Process) Key() string { return p.ID }

// Element returns the flow node with id (at any depth), or nil.
func (p *Process) Element(id string) *Element { return p.elements[id] }

// Elements returns every flow node, sorted by id.
func (p *Process) Elements() []*Element {
	out := make([]*Element, 0, len(p.elements))
	for _, e := range p.elements {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b *Element) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// MessageNames returns the sorted, distinct names of the messages the process
// can wait for (catch events, receive tasks, message boundary events): the
// names a relay may correlate to an instance of it.
func (p *Process) MessageNames() []string { return p.messages }

// Element is one flow node.
type Element struct {
	ID   string
	Name string
	// Type is the BPMN element type as written in the file ("serviceTask").
	Type string
	Kind Kind
	// Parent is the enclosing subprocess; nil at process level.
	Parent *Element

	// Incoming and Outgoing are the sequence flows in document order.
	Incoming []*Flow
	Outgoing []*Flow
	// Default is the exclusive gateway's default flow, or nil.
	Default *Flow

	// Message is set on message catch/throw events, receive and send tasks and
	// message boundary events.
	Message *Message
	// Timer is set on timer catch events and timer boundary events.
	Timer *Timer
	// ErrorCode is the code an error end event throws or an error boundary
	// event catches; "" on a boundary event catches every error.
	ErrorCode string
	// Task is set on pull tasks.
	Task *TaskDefinition

	// Inputs build a pull task's or a published message's variables.
	Inputs []Mapping
	// Outputs map the element's result (message payload, task result) into
	// the instance variables; without them the result is merged as it is.
	Outputs []Mapping

	// AttachedTo is a boundary event's activity.
	AttachedTo *Element
	// Interrupting is a boundary event's cancelActivity.
	Interrupting bool
	// Boundaries are the boundary events attached to this activity, in
	// document order.
	Boundaries []*Element

	// SubStart is a subprocess's none start event.
	SubStart *Element
}

// Flow is a sequence flow.
type Flow struct {
	ID     string
	Source *Element
	Target *Element
	// Condition is set on conditional flows out of an exclusive gateway.
	Condition *feel.Expr
}

// Message is a bpmn:message with its Zeebe subscription.
type Message struct {
	ID string
	// Name is the message name relays carry.
	Name string
	// CorrelationKey is evaluated against the instance variables when the
	// subscription opens (or when the message is published); nil when the
	// message has no zeebe:subscription.
	CorrelationKey *feel.Expr
}

// TimerKind tells how a timer's value is read.
type TimerKind uint8

const (
	TimerDuration TimerKind = iota + 1 // ISO-8601 duration from the moment the timer is armed
	TimerDate                          // RFC 3339 date-time
	TimerCycle                         // ISO-8601 repeating interval R<n>/<duration>
)

// Timer is a timer event definition.
type Timer struct {
	Kind TimerKind
	// Value yields the ISO-8601 or RFC 3339 text; static text was validated at Parse.
	Value *feel.Expr
}

// TaskDefinition is a zeebe:taskDefinition.
type TaskDefinition struct {
	// Type and Retries may be expressions; static values were validated at Parse.
	Type    *feel.Expr
	Retries *feel.Expr
	// Headers are the zeebe:taskHeaders, handed to workers unchanged.
	Headers map[string]string
}

// Mapping is one zeebe:input or zeebe:output.
type Mapping struct {
	Source *feel.Expr
	// Target is the variable written, possibly a dotted path ("order.total").
	Target string
	// Path is Target split at dots.
	Path []string
}

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
	// KindStart is a start event: the none start event of the process or of a
	// subprocess, a message or timer start event of the process, or the
	// start event of an event subprocess (message, timer, error or
	// escalation).
	KindStart Kind = iota + 1
	// KindEnd ends the token; with a Message it publishes first (message end
	// event), with an Escalation it throws it first, with a Compensation it
	// compensates first.
	KindEnd
	// KindTerminateEnd ends every token of its scope.
	KindTerminateEnd
	// KindErrorEnd throws Error to the enclosing scopes' error catchers.
	KindErrorEnd
	// KindThrow passes the token on (none intermediate throw event, link
	// catch event, undefined task, manual task); with a Message it publishes
	// first (message intermediate throw event, send task with a messageRef),
	// with an Escalation it throws it first, with a Compensation it waits
	// for the compensation handlers it starts.
	KindThrow
	// KindMessageCatch parks the token on a message subscription
	// (message intermediate catch event, receive task).
	KindMessageCatch
	// KindTimerCatch parks the token on a timer (timer intermediate catch event).
	KindTimerCatch
	// KindTask parks the token on a pull task for external workers (service
	// task, user task, and send, script and business rule tasks and message
	// throw events with a zeebe:taskDefinition).
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
	// KindBoundary is a message, timer, signal, error, escalation or
	// compensation event attached to an activity. Tokens never flow into
	// it; it is armed with its activity (a compensation boundary event
	// only names its activity's Handler).
	KindBoundary
	// KindScript evaluates a zeebe:script expression and completes at once.
	KindScript
	// KindCallActivity starts an instance of another process and waits for it.
	KindCallActivity
	// KindEventSubProcess is a scope started by its start event's trigger
	// while its enclosing scope runs. Tokens never flow into it.
	KindEventSubProcess
	// KindLink is a link intermediate throw event: the token continues at the
	// catch event of the same link name (LinkTarget).
	KindLink
	// KindInclusive takes every outgoing flow whose condition holds, else
	// its default flow (a diverging inclusive gateway).
	KindInclusive
	// KindDecision evaluates a DMN decision (a business rule task with
	// zeebe:calledDecision) and completes at once.
	KindDecision
	// KindSignalCatch parks the token on a signal subscription (signal
	// intermediate catch event).
	KindSignalCatch
	// KindAdHoc is an ad-hoc subprocess: its activities run when chosen (by
	// its active elements collection, or by its job worker's result), each
	// in an activation of its own (AdHoc).
	KindAdHoc
)

// Process is one executable BPMN process.
type Process struct {
	// ID is the process id attribute: the definition key.
	ID   string
	Name string
	// VersionTag is the process's zeebe:versionTag ("" when none): a call
	// activity with bindingType versionTag calls the version it tags.
	VersionTag string
	// Start is the process's none start event; nil when the process starts
	// only by messages or timers (see MessageStarts, TimerStarts).
	Start *Element
	// EventSubs are the event subprocesses at process level, in document order.
	EventSubs []*Element

	elements      map[string]*Element
	flows         map[string]*Flow
	messages      []string
	messageStarts []*Element
	timerStarts   []*Element
	signalStarts  []*Element
	decisions     []DecisionRef
	self          *Element
	// canceling is set when a user task of the process has canceling
	// listeners (ListensCanceling).
	canceling bool
}

// Self is the process as an element that is no flow node: its id, its
// type "process" and its execution listeners, which run before its start
// event and after its last token ends.
func (p *Process) Self() *Element { return p.self }

// ListensCanceling reports whether a user task of the process has
// canceling listeners, which hold its cancellation back: without any, a
// step ends tokens at once.
func (p *Process) ListensCanceling() bool { return p.canceling }

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

// MessageNames returns the sorted, distinct names of the messages a running
// instance of the process can wait for (catch events, receive tasks, message
// boundary events, message starts of event subprocesses): the names a relay
// may correlate to an instance of it. Message start events of the process
// are not among them: they start instances (see MessageStarts); nor are
// names that are expressions, known only once evaluated.
func (p *Process) MessageNames() []string { return p.messages }

// MessageStarts returns the message start events of the process level (not
// those of event subprocesses), in document order. Their message names are
// distinct.
func (p *Process) MessageStarts() []*Element { return p.messageStarts }

// TimerStarts returns the timer start events of the process level (not
// those of event subprocesses), in document order: each starts an instance
// whenever its timer fires (see engine.NextStart for the schedule).
func (p *Process) TimerStarts() []*Element { return p.timerStarts }

// SignalStarts returns the signal start events of the process level (not
// those of event subprocesses), in document order; their names are static
// and distinct. A broadcast of one of them starts an instance.
func (p *Process) SignalStarts() []*Element { return p.signalStarts }

// CalledDecisions returns the distinct decisions the business rule tasks
// of the process call, in document order: what a step may evaluate.
func (p *Process) CalledDecisions() []DecisionRef { return p.decisions }

// Element is one flow node.
type Element struct {
	ID   string
	Name string
	// Type is the BPMN element type as written in the file ("serviceTask").
	Type string
	Kind Kind
	// Parent is the enclosing subprocess or event subprocess; nil at process level.
	Parent *Element

	// Incoming and Outgoing are the sequence flows in document order.
	Incoming []*Flow
	Outgoing []*Flow
	// Default is the exclusive or inclusive gateway's default flow, or nil.
	Default *Flow

	// Message is set on message catch/throw/start events, receive and send
	// tasks and message boundary events.
	Message *Message
	// Timer is set on timer catch events, timer boundary events and timer
	// start events (of the process or of an event subprocess).
	Timer *Timer
	// Error is set on error end events, error boundary events and error
	// starts of event subprocesses.
	Error *EventCode
	// Escalation is set on escalation throw, end and boundary events and on
	// escalation starts of event subprocesses.
	Escalation *EventCode
	// Signal is set on signal start, catch, boundary, throw and end events.
	Signal *Signal
	// Task is set on pull tasks.
	Task *TaskDefinition
	// User is set on user tasks, which are pull tasks (Task is set too).
	User *UserTask
	// Script is set on script tasks the engine evaluates itself.
	Script *Script
	// Call is set on call activities.
	Call *CallDefinition
	// Decision is set on business rule tasks the engine evaluates itself.
	Decision *CalledDecision
	// Loop is set on multi-instance activities.
	Loop *Loop
	// AdHoc is set on ad-hoc subprocesses; with Task set too, a job worker
	// chooses what runs in it.
	AdHoc *AdHoc
	// Listeners are the element's execution listeners and, on a Camunda
	// user task, its task listeners, in document order.
	Listeners []Listener

	// Inputs create the element's local variables when it is activated (on a
	// publishing event: the message payload).
	Inputs []Mapping
	// Outputs map the element's result (message payload, task result) into
	// the variables; without them the result is merged as it is.
	Outputs []Mapping

	// AttachedTo is a boundary event's activity.
	AttachedTo *Element
	// Interrupting is a boundary event's cancelActivity, or the
	// isInterrupting of an event subprocess's start event.
	Interrupting bool
	// Boundaries are the boundary events attached to this activity, in
	// document order.
	Boundaries []*Element

	// SubStart is the start event of a subprocess (its none start event) or
	// of an event subprocess (its triggering start event).
	SubStart *Element
	// EventSubs are the event subprocesses directly inside this subprocess
	// or event subprocess, in document order.
	EventSubs []*Element
	// LinkTarget is a link throw event's catch event.
	LinkTarget *Element

	// Compensation is set on a compensation intermediate throw or end
	// event: what it compensates.
	Compensation *Compensation
	// Handler is set on a compensation boundary event: the compensation
	// handler its association leads to.
	Handler *Element
	// ForCompensation marks a compensation handler (isForCompensation):
	// no flow reaches it; a compensation throw starts it.
	ForCompensation bool
}

// CompensationHandler returns the handler of activity el's compensation
// boundary event, or nil when el has none.
func (el *Element) CompensationHandler() *Element {
	for _, b := range el.Boundaries {
		if b.Handler != nil {
			return b.Handler
		}
	}
	return nil
}

// Compensation is a compensation throw or end event's
// compensateEventDefinition.
type Compensation struct {
	// Activity is its activityRef: an activity of the thrower's scope
	// with a compensation boundary event, or an embedded subprocess. Nil
	// compensates every completed activity of the scope.
	Activity *Element
}

// IsEventSubStart reports whether el is the start event of an event subprocess.
func (el *Element) IsEventSubStart() bool {
	return el.Kind == KindStart && el.Parent != nil && el.Parent.Kind == KindEventSubProcess
}

// Armable reports whether a token arms a row for el when el is a catch
// event, a boundary event or an event subprocess's start: a subscription
// (message or signal) or a timer. Error and escalation catchers have none:
// they are found when thrown.
func (el *Element) Armable() bool {
	return el.Message != nil || el.Timer != nil || el.Signal != nil
}

// Publishes reports whether el sends something when reached (a message or
// signal throw or end event): its inputs are then the payload rather than
// local variables.
func Publishes(el *Element) bool {
	return (el.Message != nil || el.Signal != nil) && (el.Kind == KindThrow || el.Kind == KindEnd)
}

// Flow is a sequence flow.
type Flow struct {
	ID     string
	Source *Element
	Target *Element
	// Condition is set on conditional flows out of an exclusive or inclusive
	// gateway.
	Condition *feel.Expr
}

// Message is a bpmn:message with its Zeebe subscription.
type Message struct {
	ID string
	// Name is the message name relays carry; "" when NameExpression is set.
	// A name expression that reads no variables, clock or seed is evaluated
	// at Parse (Zeebe evaluates it at deploy) and becomes Name.
	Name string
	// NameExpression is a name that must be evaluated where it is used: when
	// a subscription opens (over the variables visible there; the result is
	// kept with the subscription) or when the message is sent.
	NameExpression *feel.Expr
	// CorrelationKey is evaluated against the instance variables when the
	// subscription opens (or when the message is published); nil when the
	// message has no zeebe:subscription.
	CorrelationKey *feel.Expr
}

// Signal is a bpmn:signal. Its name is static (Name) or, on a throw or
// intermediate catch event, an expression evaluated when the event is
// reached (NameExpression; a constant one is evaluated at Parse).
type Signal struct {
	ID             string
	Name           string
	NameExpression *feel.Expr
}

// EventCode is the code of an error or escalation event. On a catch event an
// empty Code catches every error (or escalation).
type EventCode struct {
	Code string
	// Expression is a thrower's code that must be evaluated when the event
	// is reached (Code is "" then). A constant one is evaluated at Parse and
	// becomes Code; a catch event's code is always static, as in Zeebe.
	Expression *feel.Expr
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

// Bindings of a called decision: which deployed version a business rule
// task evaluates (zeebe:calledDecision bindingType).
const (
	// BindingLatest is the latest version deployed when the step runs.
	BindingLatest = "latest"
	// BindingDeployment is the latest version deployed when the process's
	// own version was deployed, never a later one (docs/dmn.md).
	BindingDeployment = "deployment"
	// BindingVersionTag is the latest version tagged VersionTag.
	BindingVersionTag = "versionTag"
)

// DecisionRef names the deployed decision a business rule task calls.
type DecisionRef struct {
	DecisionID string
	// Binding is BindingLatest, BindingDeployment or BindingVersionTag.
	Binding string
	// VersionTag is set with BindingVersionTag.
	VersionTag string
}

// CalledDecision is a zeebe:calledDecision.
type CalledDecision struct {
	DecisionRef
	// ResultVariable receives the decision's output.
	ResultVariable string
}

// TaskDefinition is a zeebe:taskDefinition.
type TaskDefinition struct {
	// Type and Retries may be expressions; static values were validated at Parse.
	Type    *feel.Expr
	Retries *feel.Expr
	// Headers are the zeebe:taskHeaders, handed to workers unchanged.
	Headers map[string]string
}

// UserTaskType is the task type of a job-worker user task (one without
// zeebe:userTask), under which Zeebe hands it to workers.
const UserTaskType = "io.camunda.zeebe:userTask"

// UserTask is what a user task carries besides its TaskDefinition. Every
// expression is nil when the attribute is unset.
type UserTask struct {
	// Native is set for a Camunda user task (zeebe:userTask); without it the
	// user task is a job for workers of type UserTaskType.
	Native bool
	// Assignee, CandidateGroups and CandidateUsers come from
	// zeebe:assignmentDefinition; the candidates yield a list or a
	// comma-separated string.
	Assignee, CandidateGroups, CandidateUsers *feel.Expr
	// DueDate and FollowUpDate come from zeebe:taskSchedule and yield RFC 3339
	// date-times; static values were validated at Parse.
	DueDate, FollowUpDate *feel.Expr
	// Priority comes from zeebe:priorityDefinition (0 to 100, default 50).
	Priority *feel.Expr
	// FormKey is the zeebe:formDefinition formKey (an embedded form is
	// "camunda-forms:bpmn:<id>") or externalReference; FormID its formId.
	FormKey, FormID string
}

// Script is a zeebe:script: an expression whose value becomes ResultVariable.
type Script struct {
	Expression     *feel.Expr
	ResultVariable string
}

// CallDefinition is a zeebe:calledElement.
type CallDefinition struct {
	// ProcessID is the called definition key (static or an expression).
	ProcessID *feel.Expr
	// Binding is which version is called: BindingLatest, BindingDeployment
	// (the version deployed in the same file as the calling process) or
	// BindingVersionTag (the latest version tagged VersionTag).
	Binding    string
	VersionTag string
	// PropagateAllChildVariables: the child's variables are the call
	// activity's result when it completes (default true).
	PropagateAllChildVariables bool
	// PropagateAllParentVariables: the child starts with every variable
	// visible at the call activity, not only its input mappings (default true).
	PropagateAllParentVariables bool
}

// Loop is a multi-instance activity's multiInstanceLoopCharacteristics with
// its zeebe:loopCharacteristics.
type Loop struct {
	Sequential bool
	// InputCollection yields the list to iterate over.
	InputCollection *feel.Expr
	// InputElement is the local variable holding an inner instance's item ("" = none).
	InputElement string
	// OutputCollection is the list collecting OutputElement of every inner
	// instance, in input order ("" = none; then OutputElement is nil too).
	OutputCollection string
	OutputElement    *feel.Expr
	// CompletionCondition, when true after an inner instance completes,
	// ends the others and completes the activity.
	CompletionCondition *feel.Expr
	// OutputLocal is the variable OutputElement reads when it is a plain
	// variable or a path into one: created as a null local of every inner
	// instance so that a result written to it stays with that instance, as
	// in Zeebe ("" when there is none to create).
	OutputLocal string
}

// AdHoc is an ad-hoc subprocess's zeebe:adHoc, completion condition and
// activities, as Zeebe 8.8 runs them (docs/bpmn.md, "Ad-hoc subprocesses").
type AdHoc struct {
	// ActiveElements yields the ids of the activities to activate when the
	// subprocess starts (nil: none). Never set with a job worker.
	ActiveElements *feel.Expr
	// CompletionCondition, when true after an activation completes,
	// completes the subprocess (nil: it completes once none is left). Never
	// set with a job worker, whose result says so.
	CompletionCondition *feel.Expr
	// CancelRemaining: once the subprocess may complete, the activations
	// still running are ended rather than waited for (default true).
	CancelRemaining bool
	// OutputCollection is the subprocess's local list collecting
	// OutputElement, evaluated in each activation as it completes, in order
	// of completion ("" = none; then OutputElement is nil too).
	OutputCollection string
	OutputElement    *feel.Expr
	// Activities are what may be activated: the flow nodes directly inside
	// without incoming sequence flows (boundary events and link catch
	// events aside), in document order.
	Activities []AdHocActivity
}

// AdHocActivity is one activity an ad-hoc subprocess may activate, with what
// its job worker reads about it (adHocSubProcessElements).
type AdHocActivity struct {
	Element       *Element
	Documentation string
	// Properties are its zeebe:properties (nil when none).
	Properties map[string]string
	// Parameters are the fromAi calls of its input mappings: what an
	// agent supplies when it activates it.
	Parameters []feel.AiParameter
}

// Activity returns the activity of id a may activate, or nil.
func (a *AdHoc) Activity(id string) *Element {
	for _, x := range a.Activities {
		if x.Element.ID == id {
			return x.Element
		}
	}
	return nil
}

// Mapping is one zeebe:input or zeebe:output.
type Mapping struct {
	// Source is nil for an input without source, which creates a local
	// variable holding null.
	Source *feel.Expr
	// Target is the variable written, possibly a dotted path ("order.total").
	Target string
	// Path is Target split at dots.
	Path []string
}

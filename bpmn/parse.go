package bpmn

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/feel"
)

// Parse reads a BPMN 2.0 document holding exactly one executable process and
// returns its model. Errors are *fault.Error with code fault.BPMNInvalid
// (malformed or inconsistent file), fault.BPMNUnsupported (an element or
// extension outside the supported set, named by id and type) or
// fault.BPMNExpression (an expression that does not compile).
func Parse(r io.Reader) (*Process, error) {
	root, err := readTree(r)
	if err != nil {
		return nil, fault.Wrap(fault.BPMNInvalid, err, "reading BPMN XML")
	}
	if !root.is(nsBPMN, "definitions") {
		return nil, invalid("root element is <%s>, want BPMN 2.0 <definitions>", root.name.Local)
	}
	p := &parser{
		msgNodes: map[string]*node{},
		messages: map[string]*Message{},
		errNodes: map[string]*node{},
	}
	var executable []*node
	for _, k := range root.kids {
		if k.name.Space != nsBPMN {
			continue
		}
		switch k.name.Local {
		case "process":
			if k.attr("isExecutable") == "true" {
				executable = append(executable, k)
			}
		case "message":
			p.msgNodes[k.attr("id")] = k
		case "error":
			p.errNodes[k.attr("id")] = k
		}
	}
	switch len(executable) {
	case 0:
		return nil, invalid(`the file holds no executable process (isExecutable="true")`)
	case 1:
	default:
		ids := make([]string, len(executable))
		for i, n := range executable {
			ids[i] = strconv.Quote(n.attr("id"))
		}
		return nil, invalid("the file holds %d executable processes (%s); deploy one per file",
			len(executable), strings.Join(ids, ", "))
	}
	return p.process(executable[0])
}

func invalid(format string, args ...any) error {
	return fault.New(fault.BPMNInvalid, format, args...)
}

func unsupported(id, typ, what string) error {
	if what != "" {
		return fault.New(fault.BPMNUnsupported, "element %q (%s): %s is not supported", id, typ, what)
	}
	return fault.New(fault.BPMNUnsupported, "element %q (%s) is not supported", id, typ)
}

type parser struct {
	proc     *Process
	msgNodes map[string]*node
	messages map[string]*Message // compiled on first reference, by id
	errNodes map[string]*node
	flows    []pendingFlow
	defaults []pendingDefault
	attached []pendingBoundary
}

type pendingFlow struct {
	flow           *Flow
	source, target string
	scope          *Element
}

type pendingDefault struct {
	gateway *Element
	flow    string
}

type pendingBoundary struct {
	event      *Element
	attachedTo string
}

func (p *parser) process(n *node) (*Process, error) {
	id := n.attr("id")
	if id == "" {
		return nil, invalid("the executable process has no id")
	}
	p.proc = &Process{
		ID:       id,
		Name:     n.attr("name"),
		elements: map[string]*Element{},
		flows:    map[string]*Flow{},
	}
	if err := p.processExtensions(n); err != nil {
		return nil, err
	}
	start, err := p.scope(n, nil)
	if err != nil {
		return nil, err
	}
	p.proc.Start = start
	if err := p.link(); err != nil {
		return nil, err
	}
	if err := p.validate(); err != nil {
		return nil, err
	}
	p.collectMessages()
	return p.proc, nil
}

// processExtensions refuses process-level Zeebe extensions that change how the
// process runs; the others (version tag, properties) are metadata.
func (p *parser) processExtensions(n *node) error {
	for _, k := range n.kids {
		if !k.is(nsBPMN, "extensionElements") {
			continue
		}
		for _, x := range k.kids {
			if x.name.Space == nsZeebe && !ignoredExtension(x.name.Local) {
				return unsupported(p.proc.ID, "process", "extension zeebe:"+x.name.Local)
			}
		}
	}
	return nil
}

// ignoredExtension names Zeebe extension elements that carry metadata only.
func ignoredExtension(local string) bool {
	return local == "properties" || local == "versionTag"
}

// ignoredChild names BPMN child elements that do not affect execution:
// diagrams' helpers, documentation and data-flow artefacts Zeebe ignores too.
var ignoredChild = map[string]bool{
	"incoming": true, "outgoing": true, "documentation": true, "extensionElements": true,
	"laneSet": true, "textAnnotation": true, "association": true, "group": true,
	"dataObject": true, "dataObjectReference": true, "dataStoreReference": true,
	"ioSpecification": true, "dataInputAssociation": true, "dataOutputAssociation": true,
	"property": true, "category": true,
}

// scope parses the flow nodes and sequence flows directly inside n (the
// process or a subprocess) and returns the scope's none start event.
func (p *parser) scope(n *node, parent *Element) (*Element, error) {
	var start *Element
	for _, k := range n.kids {
		if k.name.Space != nsBPMN || ignoredChild[k.name.Local] {
			continue
		}
		if k.name.Local == "sequenceFlow" {
			if err := p.sequenceFlow(k, parent); err != nil {
				return nil, err
			}
			continue
		}
		el, err := p.element(k, parent)
		if err != nil {
			return nil, err
		}
		if el.Kind == KindStart {
			if start != nil {
				return nil, invalid("%s has two start events (%q, %q); exactly one none start event is supported",
					scopeName(parent), start.ID, el.ID)
			}
			start = el
		}
	}
	if start == nil {
		return nil, invalid("%s has no none start event", scopeName(parent))
	}
	return start, nil
}

func scopeName(parent *Element) string {
	if parent == nil {
		return "the process"
	}
	return fmt.Sprintf("subprocess %q", parent.ID)
}

func (p *parser) sequenceFlow(n *node, scope *Element) error {
	id := n.attr("id")
	if id == "" {
		return invalid("a sequenceFlow has no id")
	}
	if err := p.claimID(id); err != nil {
		return err
	}
	f := &Flow{ID: id}
	for _, k := range n.kids {
		if !k.is(nsBPMN, "conditionExpression") {
			continue
		}
		src := strings.TrimSpace(k.text.String())
		if src == "" {
			continue
		}
		c, err := compile(id, "condition", src)
		if err != nil {
			return err
		}
		f.Condition = c
	}
	p.proc.flows[id] = f
	p.flows = append(p.flows, pendingFlow{flow: f, source: n.attr("sourceRef"), target: n.attr("targetRef"), scope: scope})
	return nil
}

// claimID refuses duplicate ids: every later lookup is by id.
func (p *parser) claimID(id string) error {
	_, el := p.proc.elements[id]
	_, fl := p.proc.flows[id]
	if el || fl {
		return invalid("id %q is used twice", id)
	}
	return nil
}

func compile(id, what, src string) (*feel.Expr, error) {
	e, err := feel.Compile(src)
	if err != nil {
		return nil, fault.Wrap(fault.BPMNExpression, err, "%s of %q: %q", what, id, src)
	}
	return e, nil
}

// element parses one flow node.
func (p *parser) element(n *node, parent *Element) (*Element, error) {
	typ := n.name.Local
	id := n.attr("id")
	if id == "" {
		return nil, invalid("a %s has no id", typ)
	}
	if err := p.claimID(id); err != nil {
		return nil, err
	}
	el := &Element{ID: id, Name: n.attr("name"), Type: typ, Parent: parent}

	var defs []*node
	for _, k := range n.kids {
		if k.name.Space != nsBPMN {
			continue
		}
		switch {
		case strings.HasSuffix(k.name.Local, "EventDefinition"):
			defs = append(defs, k)
		case strings.HasSuffix(k.name.Local, "LoopCharacteristics"):
			return nil, unsupported(id, typ, k.name.Local)
		}
	}
	if len(defs) > 1 {
		return nil, unsupported(id, typ, "an event with several event definitions")
	}
	var def *node
	defType := ""
	if len(defs) == 1 {
		def = defs[0]
		defType = def.name.Local
	}
	ext, err := p.extensions(n, id, typ)
	if err != nil {
		return nil, err
	}

	switch typ {
	case "startEvent":
		if def != nil {
			return nil, unsupported(id, typ, defType)
		}
		el.Kind = KindStart
	case "endEvent":
		err = p.endEvent(el, def, ext)
	case "intermediateCatchEvent":
		err = p.catchEvent(el, def)
	case "intermediateThrowEvent":
		switch {
		case def == nil:
			el.Kind = KindThrow
		case defType == "messageEventDefinition":
			err = p.sender(el, def.attr("messageRef"), ext)
		default:
			return nil, unsupported(id, typ, defType)
		}
	case "boundaryEvent":
		err = p.boundaryEvent(el, n, def)
	case "serviceTask":
		if ext.task == nil {
			return nil, invalid("serviceTask %q has no zeebe:taskDefinition", id)
		}
		el.Kind = KindTask
	case "receiveTask":
		el.Kind = KindMessageCatch
		el.Message, err = p.message(id, n.attr("messageRef"))
	case "sendTask":
		err = p.sender(el, n.attr("messageRef"), ext)
	case "subProcess":
		if n.attr("triggeredByEvent") == "true" {
			return nil, unsupported(id, "event subProcess", "")
		}
		el.Kind = KindSubProcess
		el.SubStart, err = p.scope(n, el)
	case "exclusiveGateway":
		el.Kind = KindExclusive
		if d := n.attr("default"); d != "" {
			p.defaults = append(p.defaults, pendingDefault{gateway: el, flow: d})
		}
	case "parallelGateway":
		el.Kind = KindParallel
	case "eventBasedGateway":
		if n.attr("instantiate") == "true" || n.attr("eventGatewayType") == "Parallel" {
			return nil, unsupported(id, typ, "an instantiating or parallel event-based gateway")
		}
		el.Kind = KindEventGateway
	default:
		return nil, unsupported(id, typ, "")
	}
	if err != nil {
		return nil, err
	}
	if err := el.takeExtensions(ext); err != nil {
		return nil, err
	}
	p.proc.elements[id] = el
	return el, nil
}

func (p *parser) endEvent(el *Element, def *node, ext extensions) error {
	if def == nil {
		el.Kind = KindEnd
		return nil
	}
	switch def.name.Local {
	case "terminateEventDefinition":
		el.Kind = KindTerminateEnd
	case "errorEventDefinition":
		el.Kind = KindErrorEnd
		ref := def.attr("errorRef")
		if ref == "" {
			return invalid("error end event %q has no errorRef", el.ID)
		}
		code, err := p.errorCode(el.ID, ref)
		if err != nil {
			return err
		}
		if code == "" {
			return invalid("error end event %q throws error %q, which has no errorCode", el.ID, ref)
		}
		el.ErrorCode = code
	case "messageEventDefinition":
		if err := p.sender(el, def.attr("messageRef"), ext); err != nil {
			return err
		}
		if el.Kind == KindThrow {
			el.Kind = KindEnd
		}
	default:
		return unsupported(el.ID, el.Type, def.name.Local)
	}
	return nil
}

// sender sets up an element that sends a message: with a zeebe:taskDefinition
// it is a pull task (Zeebe's own semantics: a worker sends the message),
// otherwise the engine publishes the referenced message through the outbox.
func (p *parser) sender(el *Element, messageRef string, ext extensions) error {
	if ext.task != nil {
		el.Kind = KindTask
		return nil
	}
	if messageRef == "" {
		return invalid("%s %q sends no message: it needs a messageRef or a zeebe:taskDefinition", el.Type, el.ID)
	}
	m, err := p.message(el.ID, messageRef)
	if err != nil {
		return err
	}
	el.Kind = KindThrow
	el.Message = m
	return nil
}

func (p *parser) catchEvent(el *Element, def *node) error {
	if def == nil {
		return invalid("intermediateCatchEvent %q has no event definition", el.ID)
	}
	switch def.name.Local {
	case "messageEventDefinition":
		el.Kind = KindMessageCatch
		m, err := p.message(el.ID, def.attr("messageRef"))
		el.Message = m
		return err
	case "timerEventDefinition":
		el.Kind = KindTimerCatch
		t, err := p.timer(el.ID, def)
		if err != nil {
			return err
		}
		if t.Kind == TimerCycle {
			return unsupported(el.ID, el.Type, "a timeCycle (cycles run on non-interrupting boundary events only)")
		}
		el.Timer = t
		return nil
	default:
		return unsupported(el.ID, el.Type, def.name.Local)
	}
}

func (p *parser) boundaryEvent(el *Element, n *node, def *node) error {
	el.Kind = KindBoundary
	el.Interrupting = n.attr("cancelActivity") != "false"
	if def == nil {
		return invalid("boundaryEvent %q has no event definition", el.ID)
	}
	switch def.name.Local {
	case "messageEventDefinition":
		m, err := p.message(el.ID, def.attr("messageRef"))
		if err != nil {
			return err
		}
		el.Message = m
	case "timerEventDefinition":
		t, err := p.timer(el.ID, def)
		if err != nil {
			return err
		}
		if t.Kind == TimerCycle && el.Interrupting {
			return unsupported(el.ID, el.Type, "a timeCycle on an interrupting boundary event")
		}
		el.Timer = t
	case "errorEventDefinition":
		if !el.Interrupting {
			return invalid("error boundary event %q must interrupt its activity", el.ID)
		}
		if ref := def.attr("errorRef"); ref != "" {
			code, err := p.errorCode(el.ID, ref)
			if err != nil {
				return err
			}
			el.ErrorCode = code
		}
	default:
		return unsupported(el.ID, el.Type, def.name.Local)
	}
	p.attached = append(p.attached, pendingBoundary{event: el, attachedTo: n.attr("attachedToRef")})
	return nil
}

func (p *parser) errorCode(id, ref string) (string, error) {
	n, ok := p.errNodes[ref]
	if !ok {
		return "", invalid("element %q references error %q, which is not defined", id, ref)
	}
	return n.attr("errorCode"), nil
}

// message returns the compiled bpmn:message ref, shared by every element that
// references it.
func (p *parser) message(id, ref string) (*Message, error) {
	if ref == "" {
		return nil, invalid("element %q has no messageRef", id)
	}
	if m, ok := p.messages[ref]; ok {
		return m, nil
	}
	n, ok := p.msgNodes[ref]
	if !ok {
		return nil, invalid("element %q references message %q, which is not defined", id, ref)
	}
	m := &Message{ID: ref, Name: n.attr("name")}
	if m.Name == "" {
		return nil, invalid("message %q has no name", ref)
	}
	if strings.HasPrefix(m.Name, "=") {
		return nil, unsupported(ref, "message", "a message name expression")
	}
	for _, k := range n.kids {
		if !k.is(nsBPMN, "extensionElements") {
			continue
		}
		for _, x := range k.kids {
			if x.name.Space != nsZeebe || ignoredExtension(x.name.Local) {
				continue
			}
			if x.name.Local != "subscription" {
				return nil, unsupported(ref, "message", "extension zeebe:"+x.name.Local)
			}
			if src := strings.TrimSpace(x.attr("correlationKey")); src != "" {
				c, err := compile(ref, "correlation key", src)
				if err != nil {
					return nil, err
				}
				m.CorrelationKey = c
			}
		}
	}
	p.messages[ref] = m
	return m, nil
}

// extensions are the Zeebe extension elements of one flow node.
type extensions struct {
	task    *TaskDefinition
	inputs  []Mapping
	outputs []Mapping
	headers map[string]string
}

func (p *parser) extensions(n *node, id, typ string) (extensions, error) {
	var x extensions
	for _, k := range n.kids {
		if !k.is(nsBPMN, "extensionElements") {
			continue
		}
		for _, e := range k.kids {
			if e.name.Space != nsZeebe || ignoredExtension(e.name.Local) {
				continue
			}
			var err error
			switch e.name.Local {
			case "taskDefinition":
				x.task, err = taskDefinition(id, e)
			case "ioMapping":
				err = x.ioMapping(id, e)
			case "taskHeaders":
				x.headers = map[string]string{}
				for _, h := range e.kids {
					if h.is(nsZeebe, "header") {
						x.headers[h.attr("key")] = h.attr("value")
					}
				}
			default:
				err = unsupported(id, typ, "extension zeebe:"+e.name.Local)
			}
			if err != nil {
				return x, err
			}
		}
	}
	return x, nil
}

func taskDefinition(id string, n *node) (*TaskDefinition, error) {
	typ := strings.TrimSpace(n.attr("type"))
	if typ == "" {
		return nil, invalid("zeebe:taskDefinition of %q has no type", id)
	}
	retries := strings.TrimSpace(n.attr("retries"))
	if retries == "" {
		retries = "3" // Zeebe's default
	}
	t := &TaskDefinition{}
	var err error
	if t.Type, err = compile(id, "task type", typ); err != nil {
		return nil, err
	}
	if t.Retries, err = compile(id, "task retries", retries); err != nil {
		return nil, err
	}
	if t.Retries.IsStatic() {
		if n, err := strconv.Atoi(retries); err != nil || n < 0 {
			return nil, invalid("zeebe:taskDefinition of %q: retries %q is not a non-negative integer", id, retries)
		}
	}
	return t, nil
}

func (x *extensions) ioMapping(id string, n *node) error {
	for _, k := range n.kids {
		var dst *[]Mapping
		switch {
		case k.is(nsZeebe, "input"):
			dst = &x.inputs
		case k.is(nsZeebe, "output"):
			dst = &x.outputs
		default:
			continue
		}
		target := strings.TrimSpace(k.attr("target"))
		src := strings.TrimSpace(k.attr("source"))
		path := strings.Split(target, ".")
		if slices.Contains(path, "") {
			return invalid("mapping of %q has an invalid target %q", id, target)
		}
		if src == "" {
			return invalid("mapping of %q to %q has no source", id, target)
		}
		e, err := compile(id, "mapping to "+target, src)
		if err != nil {
			return err
		}
		*dst = append(*dst, Mapping{Source: e, Target: target, Path: path})
	}
	return nil
}

// takeExtensions attaches the parsed extensions to el, refusing those that
// would not run as a Camunda user expects on this kind of element.
func (el *Element) takeExtensions(x extensions) error {
	if x.task != nil {
		if el.Kind != KindTask {
			return unsupported(el.ID, el.Type, "extension zeebe:taskDefinition")
		}
		x.task.Headers = x.headers
		el.Task = x.task
	} else if x.headers != nil {
		return unsupported(el.ID, el.Type, "extension zeebe:taskHeaders without a task definition")
	}
	if len(x.inputs) > 0 {
		// Inputs build a value handed out of the instance (task variables,
		// message payload); elsewhere Zeebe would create local variables,
		// which this engine has no scope for.
		publishes := el.Message != nil && (el.Kind == KindThrow || el.Kind == KindEnd)
		if el.Kind != KindTask && !publishes {
			return unsupported(el.ID, el.Type, "input mappings (local variables)")
		}
		el.Inputs = x.inputs
	}
	if len(x.outputs) > 0 {
		switch el.Kind {
		case KindExclusive, KindParallel, KindEventGateway:
			return unsupported(el.ID, el.Type, "output mappings on a gateway")
		}
		el.Outputs = x.outputs
	}
	return nil
}

// link resolves the references between elements collected during the walk.
func (p *parser) link() error {
	for _, pf := range p.flows {
		f := pf.flow
		f.Source, f.Target = p.proc.elements[pf.source], p.proc.elements[pf.target]
		if f.Source == nil || f.Target == nil {
			return invalid("sequence flow %q connects %q to %q, which are not both flow nodes", f.ID, pf.source, pf.target)
		}
		if f.Source.Parent != pf.scope || f.Target.Parent != pf.scope {
			return invalid("sequence flow %q crosses a subprocess boundary", f.ID)
		}
		switch f.Source.Kind {
		case KindEnd, KindTerminateEnd, KindErrorEnd:
			return invalid("sequence flow %q leaves end event %q", f.ID, f.Source.ID)
		}
		switch f.Target.Kind {
		case KindStart, KindBoundary:
			return invalid("sequence flow %q enters %s %q", f.ID, f.Target.Type, f.Target.ID)
		}
		if f.Condition != nil && f.Source.Kind != KindExclusive {
			return unsupported(f.ID, "sequenceFlow", "a condition on a flow that does not leave an exclusive gateway")
		}
		f.Source.Outgoing = append(f.Source.Outgoing, f)
		f.Target.Incoming = append(f.Target.Incoming, f)
	}
	for _, d := range p.defaults {
		f := p.proc.flows[d.flow]
		if f == nil || f.Source != d.gateway {
			return invalid("default flow %q of gateway %q is not one of its outgoing flows", d.flow, d.gateway.ID)
		}
		if f.Condition != nil {
			return invalid("default flow %q of gateway %q has a condition", d.flow, d.gateway.ID)
		}
		d.gateway.Default = f
	}
	for _, b := range p.attached {
		a := p.proc.elements[b.attachedTo]
		if a == nil {
			return invalid("boundary event %q is attached to %q, which is not defined", b.event.ID, b.attachedTo)
		}
		if a.Parent != b.event.Parent {
			return invalid("boundary event %q and its activity %q are in different scopes", b.event.ID, a.ID)
		}
		if !canHoldBoundaries(a) {
			return unsupported(b.event.ID, b.event.Type, fmt.Sprintf("attaching to %s %q", a.Type, a.ID))
		}
		b.event.AttachedTo = a
		a.Boundaries = append(a.Boundaries, b.event)
	}
	return nil
}

// canHoldBoundaries reports whether a token parks at a, so that events
// attached to it have something to interrupt.
func canHoldBoundaries(a *Element) bool {
	switch a.Kind {
	case KindTask, KindSubProcess:
		return true
	case KindMessageCatch:
		return a.Type == "receiveTask"
	}
	return false
}

// validate checks the rules that need the whole graph.
func (p *parser) validate() error {
	for _, el := range p.proc.Elements() {
		switch el.Kind {
		case KindStart:
			if len(el.Incoming) > 0 {
				return invalid("start event %q has incoming flows", el.ID)
			}
		case KindExclusive:
			if len(el.Outgoing) > 1 {
				for _, f := range el.Outgoing {
					if f.Condition == nil && f != el.Default {
						return invalid("flow %q out of exclusive gateway %q has no condition and is not the default", f.ID, el.ID)
					}
				}
			}
		case KindEventGateway:
			if err := validateEventGateway(el); err != nil {
				return err
			}
		}
	}
	return nil
}

func validateEventGateway(el *Element) error {
	if len(el.Outgoing) < 2 {
		return invalid("event-based gateway %q needs at least two outgoing flows", el.ID)
	}
	names := map[string]bool{}
	for _, f := range el.Outgoing {
		t := f.Target
		ok := t.Type == "intermediateCatchEvent" && (t.Kind == KindMessageCatch || t.Kind == KindTimerCatch)
		if !ok {
			return invalid("event-based gateway %q leads to %s %q; only message and timer intermediate catch events may follow it", el.ID, t.Type, t.ID)
		}
		if t.Message != nil {
			if names[t.Message.Name] {
				return invalid("event-based gateway %q waits for message %q twice", el.ID, t.Message.Name)
			}
			names[t.Message.Name] = true
		}
	}
	return nil
}

// collectMessages lists the message names instances of the process can wait for.
func (p *parser) collectMessages() {
	seen := map[string]bool{}
	for _, el := range p.proc.elements {
		if el.Message == nil || el.Kind == KindThrow || el.Kind == KindEnd {
			continue
		}
		seen[el.Message.Name] = true
	}
	p.proc.messages = make([]string, 0, len(seen))
	for name := range seen {
		p.proc.messages = append(p.proc.messages, name)
	}
	slices.Sort(p.proc.messages)
}

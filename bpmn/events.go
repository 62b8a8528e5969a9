package bpmn

import (
	"strings"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/feel"
)

func (p *parser) startEvent(el *Element, n, def *node, x *extensions) error {
	el.Kind = KindStart
	// A start form is shown by Tasklist to start an instance; the engine
	// has nothing to do with it.
	x.take("formDefinition")
	el.Interrupting = n.Attr("isInterrupting") != "false"
	if def == nil {
		return nil
	}
	var err error
	switch def.Name.Local {
	case "messageEventDefinition":
		el.Message, err = p.message(el.ID, def.Attr("messageRef"))
	case "timerEventDefinition":
		el.Timer, err = p.timer(el.ID, def)
	case "errorEventDefinition":
		el.Error, err = p.code(el.ID, def.Attr("errorRef"), p.doc.errNodes, "error", "errorCode", false)
	case "escalationEventDefinition":
		el.Escalation, err = p.code(el.ID, def.Attr("escalationRef"), p.doc.escNodes, "escalation", "escalationCode", false)
	case "signalEventDefinition":
		el.Signal, err = p.signal(el.ID, def.Attr("signalRef"))
	case "compensateEventDefinition":
		// Zeebe refuses compensation event subprocesses too.
		return unsupported(el.ID, el.Type, "a compensation start event (a compensation event subprocess)")
	default:
		return unsupported(el.ID, el.Type, def.Name.Local)
	}
	return err
}

func (p *parser) endEvent(el *Element, def *node, x *extensions) error {
	if def == nil {
		el.Kind = KindEnd
		return nil
	}
	var err error
	switch def.Name.Local {
	case "terminateEventDefinition":
		el.Kind = KindTerminateEnd
	case "errorEventDefinition":
		el.Kind = KindErrorEnd
		el.Error, err = p.code(el.ID, def.Attr("errorRef"), p.doc.errNodes, "error", "errorCode", true)
	case "escalationEventDefinition":
		el.Kind = KindEnd
		el.Escalation, err = p.code(el.ID, def.Attr("escalationRef"), p.doc.escNodes, "escalation", "escalationCode", true)
	case "messageEventDefinition":
		if err := p.sender(el, def.Attr("messageRef"), x); err != nil {
			return err
		}
		if el.Kind == KindThrow {
			el.Kind = KindEnd
		}
	case "signalEventDefinition":
		el.Kind = KindEnd
		el.Signal, err = p.signal(el.ID, def.Attr("signalRef"))
	case "compensateEventDefinition":
		el.Kind = KindEnd
		err = p.compensation(el, def)
	default:
		return unsupported(el.ID, el.Type, def.Name.Local)
	}
	return err
}

func (p *parser) throwEvent(el *Element, def *node, x *extensions) error {
	if def == nil {
		el.Kind = KindThrow
		return nil
	}
	switch def.Name.Local {
	case "messageEventDefinition":
		return p.sender(el, def.Attr("messageRef"), x)
	case "escalationEventDefinition":
		el.Kind = KindThrow
		var err error
		el.Escalation, err = p.code(el.ID, def.Attr("escalationRef"), p.doc.escNodes, "escalation", "escalationCode", true)
		return err
	case "linkEventDefinition":
		el.Kind = KindLink
		return p.linkName(el, def, true)
	case "signalEventDefinition":
		el.Kind = KindThrow
		var err error
		el.Signal, err = p.signal(el.ID, def.Attr("signalRef"))
		return err
	case "compensateEventDefinition":
		el.Kind = KindThrow
		return p.compensation(el, def)
	}
	return unsupported(el.ID, el.Type, def.Name.Local)
}

// compensation reads the compensateEventDefinition of a throw or end
// event; its activityRef is resolved once every element is known.
func (p *parser) compensation(el *Element, def *node) error {
	if def.Attr("waitForCompletion") == "false" {
		// Zeebe always waits for the handlers, and refuses to be told otherwise.
		return invalid("compensation event %q: its waitForCompletion attribute must be true or not present", el.ID)
	}
	el.Compensation = &Compensation{}
	if ref := def.Attr("activityRef"); ref != "" {
		p.compRefs = append(p.compRefs, pendingCompRef{event: el, ref: ref})
	}
	return nil
}

func (p *parser) linkName(el *Element, def *node, throw bool) error {
	name := strings.TrimSpace(def.Attr("name"))
	if name == "" {
		return invalid("link event %q has no link name", el.ID)
	}
	p.links = append(p.links, pendingLink{event: el, name: name, throw: throw})
	return nil
}

// sender sets up an element that sends a message: with a zeebe:taskDefinition
// it is a pull task (Zeebe's own semantics: a worker sends the message),
// otherwise the engine publishes the referenced message through the outbox.
func (p *parser) sender(el *Element, messageRef string, x *extensions) error {
	if x.has("taskDefinition") {
		return jobTask(el, x, false)
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
	switch def.Name.Local {
	case "messageEventDefinition":
		el.Kind = KindMessageCatch
		m, err := p.message(el.ID, def.Attr("messageRef"))
		el.Message = m
		return err
	case "timerEventDefinition":
		el.Kind = KindTimerCatch
		t, err := p.timer(el.ID, def)
		if err != nil {
			return err
		}
		if t.Kind == TimerCycle {
			return unsupported(el.ID, el.Type, "a timeCycle (cycles run on non-interrupting boundary events and event subprocesses only)")
		}
		el.Timer = t
		return nil
	case "linkEventDefinition":
		el.Kind = KindThrow // passes the token on
		return p.linkName(el, def, false)
	case "signalEventDefinition":
		el.Kind = KindSignalCatch
		var err error
		el.Signal, err = p.signal(el.ID, def.Attr("signalRef"))
		return err
	default:
		return unsupported(el.ID, el.Type, def.Name.Local)
	}
}

func (p *parser) boundaryEvent(el *Element, n *node, def *node) error {
	el.Kind = KindBoundary
	el.Interrupting = n.Attr("cancelActivity") != "false"
	if def == nil {
		return invalid("boundaryEvent %q has no event definition", el.ID)
	}
	var err error
	switch def.Name.Local {
	case "messageEventDefinition":
		el.Message, err = p.message(el.ID, def.Attr("messageRef"))
	case "timerEventDefinition":
		el.Timer, err = p.timer(el.ID, def)
		if err == nil && el.Timer.Kind == TimerCycle && el.Interrupting {
			return unsupported(el.ID, el.Type, "a timeCycle on an interrupting boundary event")
		}
	case "errorEventDefinition":
		if !el.Interrupting {
			return invalid("error boundary event %q must interrupt its activity", el.ID)
		}
		el.Error, err = p.code(el.ID, def.Attr("errorRef"), p.doc.errNodes, "error", "errorCode", false)
	case "escalationEventDefinition":
		el.Escalation, err = p.code(el.ID, def.Attr("escalationRef"), p.doc.escNodes, "escalation", "escalationCode", false)
	case "signalEventDefinition":
		el.Signal, err = p.signal(el.ID, def.Attr("signalRef"))
	case "compensateEventDefinition":
		// It never interrupts: it names the handler that undoes its
		// activity once the activity has completed.
		el.Interrupting = false
		p.compBoundaries = append(p.compBoundaries, el)
	default:
		return unsupported(el.ID, el.Type, def.Name.Local)
	}
	if err != nil {
		return err
	}
	p.attached = append(p.attached, pendingBoundary{event: el, attachedTo: n.Attr("attachedToRef")})
	return nil
}

// code reads the errorCode (or escalationCode) of the bpmn:error (or
// bpmn:escalation) ref names. A thrower needs a code, which may be an
// expression; a catcher's is static, and a catcher without a ref, or whose
// error has no code, catches every error.
func (p *parser) code(id, ref string, nodes map[string]*node, what, attr string, throw bool) (*EventCode, error) {
	if ref == "" {
		if throw {
			return nil, invalid("%s end or throw event %q has no %sRef", what, id, what)
		}
		return &EventCode{}, nil
	}
	n, ok := nodes[ref]
	if !ok {
		return nil, invalid("element %q references %s %q, which is not defined", id, what, ref)
	}
	c := n.Attr(attr)
	if strings.HasPrefix(c, "=") {
		if !throw {
			return nil, fault.New(fault.BPMNUnsupported, "element %q catches %s %q, whose %s is an expression (%q): a catch event's code must be static, as in Zeebe",
				id, what, ref, attr, c)
		}
		return thrownCode(id, what, attr, c)
	}
	if throw && c == "" {
		return nil, invalid("element %q throws %s %q, which has no %s", id, what, ref, attr)
	}
	return &EventCode{Code: c}, nil
}

// thrownCode compiles the code expression src of a thrower. A constant one
// is evaluated now; any other when the event is reached.
func thrownCode(id, what, attr, src string) (*EventCode, error) {
	e, err := compile(id, what+" "+attr, src)
	if err != nil {
		return nil, err
	}
	if e.UsesVariables() || e.UsesClock() || e.UsesSeed() {
		return &EventCode{Expression: e}, nil
	}
	v, _ := e.Eval(nil) // cannot fail: Compile refuses a constant that does
	code, ok := v.(string)
	if !ok || code == "" {
		return nil, invalid("element %q: %s %q evaluates to %v, not a non-empty string", id, attr, src, v)
	}
	return &EventCode{Code: code}, nil
}

// eventName compiles the name expression src of message or signal id
// (what). A constant one is evaluated now, as Zeebe does at deploy, and
// returned as the name; any other is returned for the engine to evaluate.
func eventName(id, what, src string) (string, *feel.Expr, error) {
	e, err := compile(id, what+" name", src)
	if err != nil {
		return "", nil, err
	}
	if e.UsesVariables() || e.UsesClock() || e.UsesSeed() {
		return "", e, nil
	}
	v, _ := e.Eval(nil) // cannot fail: Compile refuses a constant that does
	name, ok := v.(string)
	if !ok || name == "" {
		return "", nil, invalid("%s %q: name %q evaluates to %v, not a non-empty string", what, id, src, v)
	}
	return name, nil, nil
}

// signal returns the bpmn:signal ref names, with its name compiled.
func (p *parser) signal(id, ref string) (*Signal, error) {
	if ref == "" {
		return nil, invalid("element %q has no signalRef", id)
	}
	n, ok := p.doc.sigNodes[ref]
	if !ok {
		return nil, invalid("element %q references signal %q, which is not defined", id, ref)
	}
	sg := &Signal{ID: ref, Name: n.Attr("name")}
	if sg.Name == "" {
		return nil, invalid("signal %q has no name", ref)
	}
	if strings.HasPrefix(sg.Name, "=") {
		var err error
		if sg.Name, sg.NameExpression, err = eventName(ref, "signal", sg.Name); err != nil {
			return nil, err
		}
	}
	return sg, nil
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
	n, ok := p.doc.msgNodes[ref]
	if !ok {
		return nil, invalid("element %q references message %q, which is not defined", id, ref)
	}
	m := &Message{ID: ref, Name: n.Attr("name")}
	if m.Name == "" {
		return nil, invalid("message %q has no name", ref)
	}
	if strings.HasPrefix(m.Name, "=") {
		var err error
		if m.Name, m.NameExpression, err = eventName(ref, "message", m.Name); err != nil {
			return nil, err
		}
	}
	for _, k := range n.Kids {
		if !k.Is(nsBPMN, "extensionElements") {
			continue
		}
		for _, x := range k.Kids {
			if x.Name.Space != nsZeebe || ignoredExtension(x.Name.Local) {
				continue
			}
			if x.Name.Local != "subscription" {
				return nil, unsupported(ref, "message", "extension zeebe:"+x.Name.Local)
			}
			if src := strings.TrimSpace(x.Attr("correlationKey")); src != "" {
				c, err := expression(ref, "correlation key", src)
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

package bpmn

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/feel"
	"github.com/sutra-run/worker/internal/xmltree"
)

// ParseAll reads a BPMN 2.0 document and returns every executable process
// in it, in document order; each is deployed as its own definition. Errors
// are *fault.Error with code fault.BPMNInvalid (malformed or inconsistent
// file), fault.BPMNUnsupported (an element or extension outside the
// supported set, named by its own id and type, or a Camunda 7 file) or
// fault.BPMNExpression (an expression that does not compile).
func ParseAll(r io.Reader) ([]*Process, error) {
	d, executable, err := readDocument(r)
	if err != nil {
		return nil, err
	}
	out := make([]*Process, 0, len(executable))
	for _, n := range executable {
		p, err := d.parser().process(n)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// Parse reads a BPMN 2.0 document holding exactly one executable process
// and returns its model; errors are those of ParseAll.
func Parse(r io.Reader) (*Process, error) {
	d, executable, err := readDocument(r)
	if err != nil {
		return nil, err
	}
	if len(executable) > 1 {
		ids := make([]string, len(executable))
		for i, n := range executable {
			ids[i] = strconv.Quote(n.Attr("id"))
		}
		return nil, invalid("the file holds %d executable processes (%s); Parse reads one, ParseAll reads each as its own definition",
			len(executable), strings.Join(ids, ", "))
	}
	return d.parser().process(executable[0])
}

// document holds what the processes of one file share: the root-level
// messages, errors and escalations they reference.
type document struct {
	msgNodes map[string]*node
	errNodes map[string]*node
	escNodes map[string]*node
	sigNodes map[string]*node
}

// readDocument reads the file and returns its executable processes (at
// least one).
func readDocument(r io.Reader) (*document, []*node, error) {
	root, err := xmltree.Read(r, caps)
	if err != nil {
		return nil, nil, fault.Wrap(fault.BPMNInvalid, err, "reading BPMN XML")
	}
	if !root.Is(nsBPMN, "definitions") {
		return nil, nil, invalid("root element is <%s>, want BPMN 2.0 <definitions>", root.Name.Local)
	}
	if err := refuseCamunda7(root); err != nil {
		return nil, nil, err
	}
	d := &document{msgNodes: map[string]*node{}, errNodes: map[string]*node{}, escNodes: map[string]*node{}, sigNodes: map[string]*node{}}
	var executable []*node
	for _, k := range root.Kids {
		if k.Name.Space != nsBPMN {
			continue
		}
		switch k.Name.Local {
		case "process":
			if k.Attr("isExecutable") == "true" {
				executable = append(executable, k)
			}
		case "message":
			d.msgNodes[k.Attr("id")] = k
		case "error":
			d.errNodes[k.Attr("id")] = k
		case "escalation":
			d.escNodes[k.Attr("id")] = k
		case "signal":
			d.sigNodes[k.Attr("id")] = k
		}
	}
	if len(executable) == 0 {
		return nil, nil, invalid(`the file holds no executable process (isExecutable="true")`)
	}
	return d, executable, nil
}

// refuseCamunda7 recognises a file saved for Camunda 7 (the modeler's
// execution platform, or the camunda: namespace in use with no sign of
// Zeebe) and refuses it as such: its extensions mean nothing to Zeebe, and
// element by element refusals would not tell the user what is wrong. A
// Zeebe file carrying leftover camunda: attributes or extensions (a
// migrated camunda:asyncBefore, say) runs: Zeebe ignores other namespaces,
// and so does the parser.
func refuseCamunda7(root *node) error {
	const why = "this is a Camunda 7 (Camunda Platform) file%s: Sutra runs the Camunda 8 (Zeebe) dialect; " +
		"migrate the file to Camunda 8 (for example with Camunda's migration analyzer) and deploy it again"
	cloud := false
	for _, a := range root.Attrs {
		if a.Name.Space == nsModeler && a.Name.Local == "executionPlatform" {
			switch a.Value {
			case "Camunda Platform":
				return fault.New(fault.BPMNUnsupported, why, ` (modeler:executionPlatform="Camunda Platform")`)
			case "Camunda Cloud":
				cloud = true
			}
		}
	}
	// Camunda 8's web modeler writes camunda:diagramRelationId on the root,
	// so only uses below it count, for either dialect.
	var c7 *node
	var what string
	zeebe := cloud
	for _, k := range root.Kids {
		if c7 == nil {
			c7, what = firstUse(k, nsCamunda7)
		}
		if !zeebe {
			n, _ := firstUse(k, nsZeebe)
			zeebe = n != nil
		}
	}
	if c7 != nil && !zeebe {
		return fault.New(fault.BPMNUnsupported, why, fmt.Sprintf(" (camunda:%s on %s)", what, describeNode(c7)))
	}
	return nil
}

// firstUse returns the first node, in document order, that is or carries
// something of namespace space, and what that is.
func firstUse(n *node, space string) (*node, string) {
	if n.Name.Space == space {
		return n, n.Name.Local
	}
	for _, a := range n.Attrs {
		if a.Name.Space == space {
			return n, a.Name.Local
		}
	}
	for _, k := range n.Kids {
		if found, what := firstUse(k, space); found != nil {
			return found, what
		}
	}
	return nil, ""
}

func describeNode(n *node) string {
	if id := n.Attr("id"); id != "" {
		return fmt.Sprintf("%s %q", n.Name.Local, id)
	}
	return n.Name.Local
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

// bare is an error without the code prefix of the *fault.Error it wraps, so
// that a wrapping *fault.Error prints its code once.
type bare struct{ err error }

func (b bare) Error() string { return fault.Reason(b.err) }
func (b bare) Unwrap() error { return b.err }

type parser struct {
	doc      *document
	proc     *Process
	messages map[string]*Message // compiled on first reference, by id
	flows    []pendingFlow
	defaults []pendingDefault
	attached []pendingBoundary
	links    []pendingLink
	// assocs are the associations of every scope, by source id (a
	// compensation boundary event leads to its handler through one).
	assocs         map[string][]string
	compBoundaries []*Element
	compRefs       []pendingCompRef
}

func (d *document) parser() *parser {
	return &parser{doc: d, messages: map[string]*Message{}, assocs: map[string][]string{}}
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

// pendingCompRef is a compensation throw or end event and its activityRef.
type pendingCompRef struct {
	event *Element
	ref   string
}

// pendingLink is a link throw (throw set) or catch event and its link name.
type pendingLink struct {
	event *Element
	name  string
	throw bool
}

func (p *parser) process(n *node) (*Process, error) {
	id := n.Attr("id")
	if id == "" {
		return nil, invalid("an executable process has no id")
	}
	p.proc = &Process{
		ID:       id,
		Name:     n.Attr("name"),
		elements: map[string]*Element{},
		flows:    map[string]*Flow{},
	}
	if err := p.processExtensions(n); err != nil {
		return nil, err
	}
	if err := p.scope(n, nil); err != nil {
		return nil, err
	}
	if err := p.link(); err != nil {
		return nil, err
	}
	if err := p.validate(); err != nil {
		return nil, err
	}
	p.collectMessages()
	return p.proc, nil
}

// processExtensions reads the process's execution listeners and refuses
// other process-level Zeebe extensions that change how the process runs.
// zeebe:userTaskForm holds the JSON of a form embedded for a user task: a
// Tasklist matter, kept out of the model.
func (p *parser) processExtensions(n *node) error {
	for _, k := range n.Kids {
		if !k.Is(nsBPMN, "extensionElements") {
			continue
		}
		for _, v := range k.Kids {
			if v.Is(nsZeebe, "versionTag") {
				p.proc.VersionTag = strings.TrimSpace(v.Attr("value"))
			}
		}
	}
	self := &Element{ID: p.proc.ID, Name: p.proc.Name, Type: "process"}
	x := readExtensions(n, self)
	for x.take("userTaskForm") != nil {
	}
	if err := x.listeners(self); err != nil {
		return err
	}
	if err := x.leftover(); err != nil {
		return err
	}
	if err := checkListeners(self); err != nil {
		return err
	}
	p.proc.self = self
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
	// A subprocess's own markers, read by element.
	"multiInstanceLoopCharacteristics": true, "standardLoopCharacteristics": true, "completionCondition": true,
}

// scope parses the flow nodes and sequence flows directly inside n: the
// process (parent nil), a subprocess or an event subprocess.
func (p *parser) scope(n *node, parent *Element) error {
	var starts []*Element
	for _, k := range n.Kids {
		if k.Is(nsBPMN, "association") {
			p.assocs[k.Attr("sourceRef")] = append(p.assocs[k.Attr("sourceRef")], k.Attr("targetRef"))
			continue
		}
		if k.Name.Space != nsBPMN || ignoredChild[k.Name.Local] {
			continue
		}
		if k.Name.Local == "sequenceFlow" {
			if err := p.sequenceFlow(k, parent); err != nil {
				return err
			}
			continue
		}
		el, err := p.element(k, parent)
		if err != nil {
			return err
		}
		switch el.Kind {
		case KindStart:
			starts = append(starts, el)
		case KindEventSubProcess:
			if parent == nil {
				p.proc.EventSubs = append(p.proc.EventSubs, el)
			} else {
				parent.EventSubs = append(parent.EventSubs, el)
			}
		}
	}
	switch {
	case parent == nil:
		return p.processStarts(starts)
	case parent.Kind == KindEventSubProcess:
		return eventSubStart(parent, starts)
	case parent.Kind == KindAdHoc:
		if len(starts) > 0 {
			return invalid("ad-hoc subprocess %q has start event %q; its activities start when chosen, with no start event", parent.ID, starts[0].ID)
		}
		return nil
	}
	return subprocessStart(parent, starts)
}

// processStarts checks the process's start events: at most one none start
// event, any number of message start events with distinct messages and any
// number of timer start events.
func (p *parser) processStarts(starts []*Element) error {
	names := map[string]string{}
	for _, s := range starts {
		switch {
		case s.Message != nil:
			if s.Message.NameExpression != nil {
				// Its subscription opens at deploy, before any instance has
				// variables: Zeebe refuses such a name too.
				return unsupported(s.ID, s.Type, "a message name expression that reads variables, now() or uuid() on a message start event of the process")
			}
			if other, dup := names[s.Message.Name]; dup {
				return invalid("message start events %q and %q wait for the same message %q", other, s.ID, s.Message.Name)
			}
			names[s.Message.Name] = s.ID
			p.proc.messageStarts = append(p.proc.messageStarts, s)
		case s.Signal != nil:
			if s.Signal.NameExpression != nil {
				// A broadcast finds the start by name, before any instance
				// has variables: Zeebe refuses such a name too.
				return unsupported(s.ID, s.Type, "a signal name expression that reads variables, now() or uuid() on a signal start event of the process")
			}
			if other, dup := names["signal\x00"+s.Signal.Name]; dup {
				return invalid("signal start events %q and %q wait for the same signal %q", other, s.ID, s.Signal.Name)
			}
			names["signal\x00"+s.Signal.Name] = s.ID
			p.proc.signalStarts = append(p.proc.signalStarts, s)
		case s.Timer != nil:
			if err := checkStartTimer(s); err != nil {
				return err
			}
			p.proc.timerStarts = append(p.proc.timerStarts, s)
		case s.Error != nil || s.Escalation != nil:
			return invalid("start event %q of the process has an error or escalation trigger, which only an event subprocess's start event may have", s.ID)
		case p.proc.Start != nil:
			return invalid("the process has two none start events (%q, %q)", p.proc.Start.ID, s.ID)
		default:
			p.proc.Start = s
		}
	}
	if p.proc.Start == nil && len(p.proc.messageStarts) == 0 && len(p.proc.timerStarts) == 0 && len(p.proc.signalStarts) == 0 {
		return invalid("the process has no none start event and no message, timer or signal start event")
	}
	return nil
}

// subprocessStart checks that an embedded subprocess has exactly one start
// event, a none start event.
func subprocessStart(sub *Element, starts []*Element) error {
	if len(starts) == 0 {
		return invalid("subprocess %q has no none start event", sub.ID)
	}
	if len(starts) > 1 {
		return invalid("subprocess %q has two start events (%q, %q); exactly one none start event is supported", sub.ID, starts[0].ID, starts[1].ID)
	}
	if s := starts[0]; s.Armable() || s.Error != nil || s.Escalation != nil {
		return invalid("start event %q of subprocess %q has a trigger; a subprocess starts with a none start event", s.ID, sub.ID)
	}
	sub.SubStart = starts[0]
	return nil
}

// eventSubStart checks that an event subprocess has exactly one start event
// and that it has a trigger.
func eventSubStart(esp *Element, starts []*Element) error {
	if len(starts) != 1 {
		return invalid("event subprocess %q has %d start events, want exactly one", esp.ID, len(starts))
	}
	s := starts[0]
	switch {
	case !s.Armable() && s.Error == nil && s.Escalation == nil:
		return invalid("start event %q of event subprocess %q has no message, timer, signal, error or escalation trigger", s.ID, esp.ID)
	case s.Error != nil && !s.Interrupting:
		return invalid("error start event %q of event subprocess %q must interrupt", s.ID, esp.ID)
	case s.Timer != nil && s.Timer.Kind == TimerCycle && s.Interrupting:
		return unsupported(s.ID, s.Type, "a timeCycle on an interrupting start event")
	}
	esp.SubStart = s
	return nil
}

func scopeName(parent *Element) string {
	if parent == nil {
		return "the process"
	}
	return fmt.Sprintf("%s %q", parent.Type, parent.ID)
}

func (p *parser) sequenceFlow(n *node, scope *Element) error {
	id := n.Attr("id")
	if id == "" {
		return invalid("a sequenceFlow has no id")
	}
	if err := p.claimID(id); err != nil {
		return err
	}
	f := &Flow{ID: id}
	for _, k := range n.Kids {
		if !k.Is(nsBPMN, "conditionExpression") {
			continue
		}
		src := strings.TrimSpace(k.Text.String())
		if src == "" {
			continue
		}
		c, err := expression(id, "condition", src)
		if err != nil {
			return err
		}
		f.Condition = c
	}
	p.proc.flows[id] = f
	p.flows = append(p.flows, pendingFlow{flow: f, source: n.Attr("sourceRef"), target: n.Attr("targetRef"), scope: scope})
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

// compile compiles an expression of element id. The compiler's message
// already quotes the expression, so it is not repeated; its code is kept
// (a constant over the evaluation limits is SUTRA.INCIDENT.EXPRESSION_LIMIT).
func compile(id, what, src string) (*feel.Expr, error) {
	e, err := feel.Compile(src)
	if err != nil {
		return nil, fault.Wrap(fault.Code(err), bare{err}, "%s of %q", what, id)
	}
	return e, nil
}

// expression compiles src where Zeebe takes only an expression (a
// condition, a script, an output mapping's source, a correlation key, a
// multi-instance input collection or output element): there Zeebe refuses a
// static value, one without the leading "=", so a file that forgot it is
// refused at deploy rather than run with the text as its value.
func expression(id, what, src string) (*feel.Expr, error) {
	if !strings.HasPrefix(src, "=") {
		return nil, invalid("%s of %q is the static value %q: it must be an expression, starting with \"=\", as in Zeebe", what, id, src)
	}
	return compile(id, what, src)
}

// refusedTypes are BPMN flow node types Sutra does not run, with what a
// user should know about each.
var refusedTypes = map[string]string{
	"complexGateway": "", "transaction": "",
	"callChoreography": "", "subChoreography": "", "choreographyTask": "", "implicitThrowEvent": "",
}

// element parses one flow node. Its type is checked before anything it
// carries, so that a refusal names the element itself.
func (p *parser) element(n *node, parent *Element) (*Element, error) {
	typ := n.Name.Local
	id := n.Attr("id")
	if id == "" {
		return nil, invalid("a %s has no id", typ)
	}
	if err := p.claimID(id); err != nil {
		return nil, err
	}
	el := &Element{ID: id, Name: n.Attr("name"), Type: typ, Parent: parent, ForCompensation: n.Attr("isForCompensation") == "true"}
	if why, refused := refusedTypes[typ]; refused {
		return nil, unsupported(id, typ, why)
	}
	def, err := eventDefinition(n, el)
	if err != nil {
		return nil, err
	}
	x := readExtensions(n, el)
	if err := x.ioMapping(el); err != nil {
		return nil, err
	}
	if err := x.listeners(el); err != nil {
		return nil, err
	}

	switch typ {
	case "startEvent":
		err = p.startEvent(el, n, def, x)
	case "endEvent":
		err = p.endEvent(el, def, x)
	case "intermediateCatchEvent":
		err = p.catchEvent(el, def)
	case "intermediateThrowEvent":
		err = p.throwEvent(el, def, x)
	case "boundaryEvent":
		err = p.boundaryEvent(el, n, def)
	case "serviceTask":
		err = jobTask(el, x, true)
	case "userTask":
		err = userTask(el, x)
	case "receiveTask":
		el.Kind = KindMessageCatch
		el.Message, err = p.message(id, n.Attr("messageRef"))
	case "sendTask":
		err = p.sender(el, n.Attr("messageRef"), x)
	case "scriptTask":
		err = scriptTask(el, x)
	case "businessRuleTask":
		err = p.businessRuleTask(el, x)
	case "task", "manualTask":
		// Zeebe completes undefined and manual tasks at once.
		el.Kind = KindThrow
		err = ignoredJob(el, x)
	case "subProcess":
		if n.Attr("triggeredByEvent") == "true" {
			el.Kind = KindEventSubProcess
		} else {
			el.Kind = KindSubProcess
		}
		err = p.scope(n, el)
	case "callActivity":
		err = callActivity(el, x)
	case "adHocSubProcess":
		err = p.adHocSubProcess(el, n, x)
	case "exclusiveGateway", "inclusiveGateway":
		el.Kind = KindExclusive
		if typ == "inclusiveGateway" {
			el.Kind = KindInclusive
		}
		if d := n.Attr("default"); d != "" {
			p.defaults = append(p.defaults, pendingDefault{gateway: el, flow: d})
		}
	case "parallelGateway":
		el.Kind = KindParallel
	case "eventBasedGateway":
		if n.Attr("instantiate") == "true" || n.Attr("eventGatewayType") == "Parallel" {
			return nil, unsupported(id, typ, "an instantiating or parallel event-based gateway")
		}
		el.Kind = KindEventGateway
	default:
		return nil, unsupported(id, typ, "")
	}
	if err != nil {
		return nil, err
	}
	if el.ForCompensation && !isActivity(el) {
		return nil, invalid("%s %q is marked isForCompensation; only a task, subprocess or call activity can be a compensation handler", typ, id)
	}
	if err := loopCharacteristics(el, n); err != nil {
		return nil, err
	}
	if err := x.leftover(); err != nil {
		return nil, err
	}
	if err := checkMappings(el); err != nil {
		return nil, err
	}
	if err := checkListeners(el); err != nil {
		return nil, err
	}
	if len(el.ListenersOf(ListenerCanceling)) > 0 {
		p.proc.canceling = true
	}
	p.proc.elements[id] = el
	return el, nil
}

// eventDefinition returns the element's one event definition, or nil;
// several on one event are refused.
func eventDefinition(n *node, el *Element) (*node, error) {
	var def *node
	for _, k := range n.Kids {
		if k.Name.Space != nsBPMN || !strings.HasSuffix(k.Name.Local, "EventDefinition") {
			continue
		}
		if def != nil {
			return nil, unsupported(el.ID, el.Type, "an event with several event definitions")
		}
		def = k
	}
	return def, nil
}

// checkMappings refuses mappings that would not run as a Camunda user
// expects on the element's kind.
func checkMappings(el *Element) error {
	if len(el.Inputs) > 0 {
		ok := false
		switch el.Kind {
		case KindTask, KindScript, KindDecision, KindSubProcess, KindEventSubProcess, KindCallActivity, KindMessageCatch, KindTimerCatch, KindSignalCatch, KindAdHoc:
			ok = true
		case KindThrow, KindEnd:
			// A publishing event's inputs are its payload; an undefined or
			// manual task's are local variables its outputs may read.
			ok = Publishes(el) || isActivity(el)
		}
		if !ok {
			return unsupported(el.ID, el.Type, "input mappings")
		}
		if Publishes(el) {
			for _, m := range el.Inputs {
				if m.Source == nil {
					return invalid("input mapping of %q to %q has no source: a message or signal payload needs one", el.ID, m.Target)
				}
			}
		}
	}
	if len(el.Outputs) > 0 {
		switch el.Kind {
		case KindExclusive, KindInclusive, KindParallel, KindEventGateway:
			return unsupported(el.ID, el.Type, "output mappings on a gateway")
		}
	}
	return nil
}

// isActivity reports whether el is an activity (which may hold boundary
// events and be multi-instance) rather than an event or a gateway.
func isActivity(el *Element) bool {
	switch el.Type {
	case "serviceTask", "userTask", "receiveTask", "sendTask", "scriptTask", "businessRuleTask",
		"task", "manualTask", "subProcess", "callActivity", "adHocSubProcess":
		return el.Kind != KindEventSubProcess
	}
	return false
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
		case KindEnd, KindTerminateEnd, KindErrorEnd, KindLink, KindEventSubProcess:
			return invalid("sequence flow %q leaves %s %q", f.ID, f.Source.Type, f.Source.ID)
		}
		switch f.Target.Kind {
		case KindStart, KindBoundary, KindEventSubProcess:
			return invalid("sequence flow %q enters %s %q", f.ID, f.Target.Type, f.Target.ID)
		}
		if f.Condition != nil && f.Source.Kind != KindExclusive && f.Source.Kind != KindInclusive {
			return unsupported(f.ID, "sequenceFlow", "a condition on a flow that does not leave an exclusive or inclusive gateway")
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
		if err := p.attach(b); err != nil {
			return err
		}
	}
	if err := p.linkCompensation(); err != nil {
		return err
	}
	return p.linkEvents()
}

// linkCompensation joins each compensation boundary event to its handler
// and each compensation throw to its activityRef, with Zeebe's rules and
// messages.
func (p *parser) linkCompensation() error {
	for _, el := range p.compBoundaries {
		targets := p.assocs[el.ID]
		if len(targets) == 0 || len(el.Outgoing) > 0 {
			return invalid("compensation boundary event %q: compensation boundary events must have a compensation association and no outgoing sequence flows", el.ID)
		}
		h := p.proc.elements[targets[0]]
		if h == nil || !h.ForCompensation {
			return invalid("compensation boundary event %q is associated with %q, which is not a compensation handler (an activity with isForCompensation=\"true\")", el.ID, targets[0])
		}
		if h.Parent != el.Parent {
			return invalid("compensation handler %q is not in the scope of its activity %q", h.ID, el.AttachedTo.ID)
		}
		if other := el.AttachedTo.CompensationHandler(); other != nil {
			return invalid("activity %q has two compensation boundary events", el.AttachedTo.ID)
		}
		el.Handler = h
	}
	for _, c := range p.compRefs {
		a := p.proc.elements[c.ref]
		if a == nil {
			return invalid("compensation event %q: the referenced compensation activity %q doesn't exist", c.event.ID, c.ref)
		}
		if a.CompensationHandler() == nil && a.Kind != KindSubProcess {
			return invalid("compensation event %q: the referenced compensation activity %q must have either a compensation boundary event or be a subprocess", c.event.ID, c.ref)
		}
		scope := c.event.Parent
		if a.Parent != scope && (scope == nil || scope.Kind != KindEventSubProcess || a.Parent != scope.Parent) {
			return invalid("compensation event %q: the referenced compensation activity %q must be in the same scope as the compensation throw event", c.event.ID, c.ref)
		}
		c.event.Compensation.Activity = a
	}
	return nil
}

func (p *parser) attach(b pendingBoundary) error {
	a := p.proc.elements[b.attachedTo]
	if a == nil {
		return invalid("boundary event %q is attached to %q, which is not defined", b.event.ID, b.attachedTo)
	}
	if a.Parent != b.event.Parent {
		return invalid("boundary event %q and its activity %q are in different scopes", b.event.ID, a.ID)
	}
	if !isActivity(a) {
		return unsupported(b.event.ID, b.event.Type, fmt.Sprintf("attaching to %s %q", a.Type, a.ID))
	}
	if b.event.Escalation != nil {
		switch a.Kind {
		case KindSubProcess, KindAdHoc, KindCallActivity: // a call activity's child escalates to it
		default:
			return invalid("escalation boundary event %q is attached to %s %q; only a subprocess or a call activity can throw an escalation", b.event.ID, a.Type, a.ID)
		}
	}
	b.event.AttachedTo = a
	a.Boundaries = append(a.Boundaries, b.event)
	return nil
}

// linkEvents joins each link throw event to the catch event of its name in
// the same scope.
func (p *parser) linkEvents() error {
	type key struct {
		scope *Element
		name  string
	}
	catches := map[key]*Element{}
	for _, l := range p.links {
		if l.throw {
			continue
		}
		k := key{l.event.Parent, l.name}
		if other := catches[k]; other != nil {
			return invalid("link catch events %q and %q have the same name %q in %s", other.ID, l.event.ID, l.name, scopeName(l.event.Parent))
		}
		if len(l.event.Incoming) > 0 {
			return invalid("link catch event %q has incoming sequence flows", l.event.ID)
		}
		catches[k] = l.event
	}
	for _, l := range p.links {
		if !l.throw {
			continue
		}
		target := catches[key{l.event.Parent, l.name}]
		if target == nil {
			return invalid("link throw event %q has no catch event named %q in %s", l.event.ID, l.name, scopeName(l.event.Parent))
		}
		l.event.LinkTarget = target
	}
	return nil
}

// validate checks the rules that need the whole graph.
func (p *parser) validate() error {
	for _, el := range p.proc.Elements() {
		if el.ForCompensation {
			switch {
			case len(el.Incoming) > 0:
				return invalid("compensation handler %q: a compensation handler should have no incoming sequence flows", el.ID)
			case len(el.Outgoing) > 0:
				return invalid("compensation handler %q: a compensation handler should have no outgoing sequence flows", el.ID)
			case len(el.Boundaries) > 0:
				return invalid("compensation handler %q: a compensation handler should have no boundary events", el.ID)
			}
		}
		switch el.Kind {
		case KindStart:
			if len(el.Incoming) > 0 {
				return invalid("start event %q has incoming flows", el.ID)
			}
		case KindExclusive, KindInclusive:
			if len(el.Outgoing) > 1 {
				for _, f := range el.Outgoing {
					if f.Condition == nil && f != el.Default {
						return invalid("flow %q out of %s gateway %q has no condition and is not the default", f.ID, strings.TrimSuffix(el.Type, "Gateway"), el.ID)
					}
				}
			}
			if el.Kind == KindInclusive && len(el.Incoming) > 1 {
				// Zeebe joins there once every incoming flow was taken or no
				// active element can still reach it: a reachability analysis
				// of the scope after every move, not built yet.
				return unsupported(el.ID, el.Type, "a converging (joining) inclusive gateway")
			}
		case KindEventGateway:
			if err := validateEventGateway(el); err != nil {
				return err
			}
		case KindSubProcess, KindEventSubProcess:
			if err := validateEventSubs(el.EventSubs); err != nil {
				return err
			}
		case KindAdHoc:
			if err := validateAdHoc(el); err != nil {
				return err
			}
		}
	}
	return validateEventSubs(p.proc.EventSubs)
}

// validateEventSubs checks the event subprocesses of one scope: their
// messages must be distinct, or a message could not tell which one it starts.
func validateEventSubs(subs []*Element) error {
	names := map[string]string{}
	for _, esp := range subs {
		if esp.Loop != nil || len(esp.Boundaries) > 0 {
			return invalid("event subprocess %q cannot be multi-instance or carry boundary events", esp.ID)
		}
		m := esp.SubStart.Message
		if m == nil || m.NameExpression != nil {
			continue // an expression's name is known only when evaluated
		}
		if other, dup := names[m.Name]; dup {
			return invalid("event subprocesses %q and %q start on the same message %q", other, esp.ID, m.Name)
		}
		names[m.Name] = esp.ID
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
		ok := t.Type == "intermediateCatchEvent" && (t.Kind == KindMessageCatch || t.Kind == KindTimerCatch || t.Kind == KindSignalCatch)
		if !ok {
			return invalid("event-based gateway %q leads to %s %q; only message, timer and signal intermediate catch events may follow it", el.ID, t.Type, t.ID)
		}
		if t.Signal != nil && t.Signal.NameExpression == nil {
			if names["signal\x00"+t.Signal.Name] {
				return invalid("event-based gateway %q waits for signal %q twice", el.ID, t.Signal.Name)
			}
			names["signal\x00"+t.Signal.Name] = true
		}
		if t.Message != nil && t.Message.NameExpression == nil {
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
		if el.Message == nil || el.Message.NameExpression != nil || el.Kind == KindThrow || el.Kind == KindEnd {
			continue
		}
		if el.Kind == KindStart && el.Parent == nil {
			continue // starts instances rather than resuming one
		}
		seen[el.Message.Name] = true
	}
	p.proc.messages = make([]string, 0, len(seen))
	for name := range seen {
		p.proc.messages = append(p.proc.messages, name)
	}
	slices.Sort(p.proc.messages)
}

package bpmn

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/feel"
	"github.com/sutra-run/worker/iso8601"
)

// extensions are the Zeebe extension elements of one flow node. The code for
// the element's type takes the ones it understands; whatever is left is
// refused, naming the element and the extension.
type extensions struct {
	el    *Element
	nodes []*node
	taken []bool
}

func readExtensions(n *node, el *Element) *extensions {
	x := &extensions{el: el}
	for _, k := range n.Kids {
		if !k.Is(nsBPMN, "extensionElements") {
			continue
		}
		for _, e := range k.Kids {
			if e.Name.Space == nsZeebe && !ignoredExtension(e.Name.Local) {
				x.nodes = append(x.nodes, e)
			}
		}
	}
	x.taken = make([]bool, len(x.nodes))
	return x
}

// take returns the first untaken zeebe:local, marking it taken, or nil.
func (x *extensions) take(local string) *node {
	for i, n := range x.nodes {
		if !x.taken[i] && n.Name.Local == local {
			x.taken[i] = true
			return n
		}
	}
	return nil
}

func (x *extensions) has(local string) bool {
	return slices.ContainsFunc(x.nodes, func(n *node) bool { return n.Name.Local == local })
}

// leftover refuses the first extension nothing took.
func (x *extensions) leftover() error {
	for i, n := range x.nodes {
		if !x.taken[i] {
			return unsupported(x.el.ID, x.el.Type, "extension zeebe:"+n.Name.Local)
		}
	}
	return nil
}

// ioMapping reads the element's zeebe:ioMapping; checkMappings decides later
// whether its kind may have them.
func (x *extensions) ioMapping(el *Element) error {
	n := x.take("ioMapping")
	if n == nil {
		return nil
	}
	for _, k := range n.Kids {
		output := k.Is(nsZeebe, "output")
		if !output && !k.Is(nsZeebe, "input") {
			continue
		}
		target := strings.TrimSpace(k.Attr("target"))
		src := strings.TrimSpace(k.Attr("source"))
		path := strings.Split(target, ".")
		if slices.Contains(path, "") {
			return invalid("mapping of %q has an invalid target %q", el.ID, target)
		}
		m := Mapping{Target: target, Path: path}
		switch {
		case src != "":
			compileSource := compile
			if output {
				compileSource = expression // Zeebe takes no static output source
			}
			e, err := compileSource(el.ID, "mapping to "+target, src)
			if err != nil {
				return err
			}
			m.Source = e
		case output:
			return invalid("output mapping of %q to %q has no source", el.ID, target)
		}
		if output {
			el.Outputs = append(el.Outputs, m)
		} else {
			el.Inputs = append(el.Inputs, m)
		}
	}
	return nil
}

// jobTask makes el a pull task from its zeebe:taskDefinition and
// zeebe:taskHeaders; required says whether the element type has no other
// implementation.
func jobTask(el *Element, x *extensions, required bool) error {
	n := x.take("taskDefinition")
	if n == nil {
		if required {
			return invalid("%s %q has no zeebe:taskDefinition", el.Type, el.ID)
		}
		return nil
	}
	typ := strings.TrimSpace(n.Attr("type"))
	if typ == "" {
		return invalid("zeebe:taskDefinition of %q has no type", el.ID)
	}
	t, err := taskDefinition(el.ID, typ, strings.TrimSpace(n.Attr("retries")))
	if err != nil {
		return err
	}
	t.Headers = headers(x)
	el.Kind, el.Task = KindTask, t
	return nil
}

// ignoredJob drops the zeebe:taskDefinition and zeebe:taskHeaders of an
// undefined or manual task, as Zeebe does: a connector template applied to
// a plain task leaves them there, and Zeebe completes the task at once
// without a job. The definition must still be valid, as Zeebe checks it.
func ignoredJob(el *Element, x *extensions) error {
	if n := x.take("taskDefinition"); n != nil {
		typ := strings.TrimSpace(n.Attr("type"))
		if typ == "" {
			return invalid("zeebe:taskDefinition of %q has no type", el.ID)
		}
		if _, err := taskDefinition(el.ID, typ, strings.TrimSpace(n.Attr("retries"))); err != nil {
			return err
		}
	}
	headers(x)
	return nil
}

func taskDefinition(id, typ, retries string) (*TaskDefinition, error) {
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

// headers takes the zeebe:taskHeaders, or returns nil.
func headers(x *extensions) map[string]string {
	n := x.take("taskHeaders")
	if n == nil {
		return nil
	}
	h := map[string]string{}
	for _, k := range n.Kids {
		if k.Is(nsZeebe, "header") {
			h[k.Attr("key")] = k.Attr("value")
		}
	}
	return h
}

// userTask makes el a pull task: a Camunda user task with zeebe:userTask
// (task type ""), otherwise a job for workers of type UserTaskType.
func userTask(el *Element, x *extensions) error {
	u := &UserTask{Native: x.take("userTask") != nil}
	typ := UserTaskType
	if u.Native {
		typ = ""
	} else {
		// Zeebe hands job-worker user tasks out under UserTaskType whatever
		// a zeebe:taskDefinition says; older examples carry one.
		x.take("taskDefinition")
	}
	t, err := taskDefinition(el.ID, typ, "")
	if err != nil {
		return err
	}
	t.Headers = headers(x)
	if f := x.take("formDefinition"); f != nil {
		u.FormKey = f.Attr("formKey")
		if u.FormKey == "" {
			u.FormKey = f.Attr("externalReference")
		}
		u.FormID = f.Attr("formId")
	}
	if a := x.take("assignmentDefinition"); a != nil {
		if u.Assignee, err = optional(el.ID, "assignee", a.Attr("assignee")); err != nil {
			return err
		}
		if u.CandidateGroups, err = optional(el.ID, "candidate groups", a.Attr("candidateGroups")); err != nil {
			return err
		}
		if u.CandidateUsers, err = optional(el.ID, "candidate users", a.Attr("candidateUsers")); err != nil {
			return err
		}
	}
	if s := x.take("taskSchedule"); s != nil {
		if u.DueDate, err = dateTime(el.ID, "due date", s.Attr("dueDate")); err != nil {
			return err
		}
		if u.FollowUpDate, err = dateTime(el.ID, "follow-up date", s.Attr("followUpDate")); err != nil {
			return err
		}
	}
	if pd := x.take("priorityDefinition"); pd != nil {
		if u.Priority, err = optional(el.ID, "priority", pd.Attr("priority")); err != nil {
			return err
		}
		if u.Priority != nil && u.Priority.IsStatic() {
			if _, err := UserTaskPriority(u.Priority.Source()); err != nil {
				return fault.Wrap(fault.BPMNInvalid, err, "user task %q", el.ID)
			}
		}
	}
	el.Kind, el.Task, el.User = KindTask, t, u
	return nil
}

// UserTaskPriority reads a priority value: a whole number from 0 to 100,
// as static text or a FEEL number.
func UserTaskPriority(v any) (int, error) {
	var n int
	ok := false
	switch v := v.(type) {
	case string:
		var err error
		n, err = strconv.Atoi(strings.TrimSpace(v))
		ok = err == nil
	case float64:
		n, ok = int(v), float64(int(v)) == v
	}
	if !ok || n < 0 || n > 100 {
		return 0, fmt.Errorf("priority %v is not a whole number from 0 to 100", v)
	}
	return n, nil
}

// optional compiles an attribute that may be absent (nil then).
func optional(id, what, src string) (*feel.Expr, error) {
	src = strings.TrimSpace(src)
	if src == "" {
		return nil, nil
	}
	return compile(id, what, src)
}

// dateTime compiles an optional date-time attribute, checking a static one now.
func dateTime(id, what, src string) (*feel.Expr, error) {
	e, err := optional(id, what, src)
	if err != nil || e == nil || !e.IsStatic() {
		return e, err
	}
	if _, err := iso8601.ParseDateTime(e.Source()); err != nil {
		return nil, fault.Wrap(fault.BPMNInvalid, bare{err}, "%s of %q", what, id)
	}
	return e, nil
}

// scriptTask makes el a script the engine evaluates (zeebe:script), or a
// pull task (zeebe:taskDefinition).
func scriptTask(el *Element, x *extensions) error {
	if x.has("taskDefinition") {
		return jobTask(el, x, true)
	}
	n := x.take("script")
	if n == nil {
		return invalid("scriptTask %q has neither a zeebe:script nor a zeebe:taskDefinition", el.ID)
	}
	src := strings.TrimSpace(n.Attr("expression"))
	result := strings.TrimSpace(n.Attr("resultVariable"))
	if src == "" || result == "" {
		return invalid("zeebe:script of %q needs an expression and a resultVariable", el.ID)
	}
	e, err := expression(el.ID, "script", src)
	if err != nil {
		return err
	}
	el.Kind, el.Script = KindScript, &Script{Expression: e, ResultVariable: result}
	return nil
}

// businessRuleTask makes el a DMN decision the engine evaluates
// (zeebe:calledDecision), or a pull task (zeebe:taskDefinition), as Zeebe
// allows both.
func (p *parser) businessRuleTask(el *Element, x *extensions) error {
	if x.has("taskDefinition") {
		return jobTask(el, x, true)
	}
	n := x.take("calledDecision")
	if n == nil {
		return invalid("businessRuleTask %q has neither a zeebe:calledDecision nor a zeebe:taskDefinition", el.ID)
	}
	d := &CalledDecision{DecisionRef: DecisionRef{DecisionID: strings.TrimSpace(n.Attr("decisionId")), Binding: n.Attr("bindingType"),
		VersionTag: strings.TrimSpace(n.Attr("versionTag"))}, ResultVariable: strings.TrimSpace(n.Attr("resultVariable"))}
	switch {
	case d.DecisionID == "" || d.ResultVariable == "":
		return invalid("zeebe:calledDecision of %q needs a decisionId and a resultVariable", el.ID)
	case strings.HasPrefix(d.DecisionID, "="):
		// The lanes find the deployed decision before the step, by its id.
		return unsupported(el.ID, el.Type, "a decisionId that is an expression")
	}
	switch d.Binding {
	case "":
		d.Binding = BindingLatest
	case BindingLatest, BindingDeployment:
	case BindingVersionTag:
		if d.VersionTag == "" {
			return invalid("zeebe:calledDecision of %q has bindingType versionTag and no versionTag", el.ID)
		}
	default:
		return invalid("zeebe:calledDecision of %q has an unknown bindingType %q", el.ID, d.Binding)
	}
	if d.Binding != BindingVersionTag {
		d.VersionTag = ""
	}
	if !slices.Contains(p.proc.decisions, d.DecisionRef) {
		p.proc.decisions = append(p.proc.decisions, d.DecisionRef)
	}
	el.Kind, el.Decision = KindDecision, d
	return nil
}

func callActivity(el *Element, x *extensions) error {
	n := x.take("calledElement")
	if n == nil {
		return invalid("callActivity %q has no zeebe:calledElement", el.ID)
	}
	src := strings.TrimSpace(n.Attr("processId"))
	if src == "" {
		return invalid("zeebe:calledElement of %q has no processId", el.ID)
	}
	binding, tag := n.Attr("bindingType"), strings.TrimSpace(n.Attr("versionTag"))
	switch binding {
	case "":
		binding = BindingLatest
	case BindingLatest, BindingDeployment:
	case BindingVersionTag:
		if tag == "" {
			return invalid("zeebe:calledElement of %q has bindingType versionTag and no versionTag", el.ID)
		}
	default:
		return invalid("zeebe:calledElement of %q has an unknown bindingType %q", el.ID, binding)
	}
	if binding != BindingVersionTag {
		tag = ""
	}
	id, err := compile(el.ID, "called process id", src)
	if err != nil {
		return err
	}
	el.Kind = KindCallActivity
	el.Call = &CallDefinition{
		ProcessID:                   id,
		Binding:                     binding,
		VersionTag:                  tag,
		PropagateAllChildVariables:  n.Attr("propagateAllChildVariables") != "false",
		PropagateAllParentVariables: n.Attr("propagateAllParentVariables") != "false",
	}
	return nil
}

// loopCharacteristics reads a multi-instance marker of activity el.
func loopCharacteristics(el *Element, n *node) error {
	var mi *node
	for _, k := range n.Kids {
		switch {
		case k.Is(nsBPMN, "multiInstanceLoopCharacteristics"):
			mi = k
		case k.Is(nsBPMN, "standardLoopCharacteristics"):
			return unsupported(el.ID, el.Type, "a loop marker (standardLoopCharacteristics)")
		}
	}
	if mi == nil {
		return nil
	}
	if !isActivity(el) {
		return unsupported(el.ID, el.Type, "multiInstanceLoopCharacteristics")
	}
	if el.Kind == KindAdHoc {
		return unsupported(el.ID, el.Type, "a multi-instance ad-hoc subprocess")
	}
	l := &Loop{Sequential: mi.Attr("isSequential") == "true"}
	var zl *node
	for _, k := range mi.Kids {
		switch {
		case k.Is(nsBPMN, "loopCardinality"):
			return unsupported(el.ID, el.Type, "a multi-instance loopCardinality (Zeebe iterates over an inputCollection)")
		case k.Is(nsBPMN, "completionCondition"):
			if src := strings.TrimSpace(k.Text.String()); src != "" {
				c, err := compile(el.ID, "completion condition", src)
				if err != nil {
					return err
				}
				l.CompletionCondition = c
			}
		case k.Is(nsBPMN, "extensionElements"):
			for _, e := range k.Kids {
				switch {
				case e.Is(nsZeebe, "loopCharacteristics"):
					zl = e
				case e.Name.Space == nsZeebe && !ignoredExtension(e.Name.Local):
					return unsupported(el.ID, el.Type, "extension zeebe:"+e.Name.Local+" on its multi-instance marker")
				}
			}
		}
	}
	if zl == nil || strings.TrimSpace(zl.Attr("inputCollection")) == "" {
		return invalid("multi-instance %s %q has no inputCollection", el.Type, el.ID)
	}
	var err error
	if l.InputCollection, err = expression(el.ID, "input collection", strings.TrimSpace(zl.Attr("inputCollection"))); err != nil {
		return err
	}
	l.InputElement = strings.TrimSpace(zl.Attr("inputElement"))
	l.OutputCollection = strings.TrimSpace(zl.Attr("outputCollection"))
	out := strings.TrimSpace(zl.Attr("outputElement"))
	if (l.OutputCollection == "") != (out == "") {
		return invalid("multi-instance %s %q needs both outputCollection and outputElement, or neither", el.Type, el.ID)
	}
	if out != "" {
		if l.OutputElement, err = expression(el.ID, "output element", out); err != nil {
			return err
		}
		if v := variableOf(out); v != l.InputElement && v != "loopCounter" {
			l.OutputLocal = v
		}
	}
	el.Loop = l
	return nil
}

// variableOf returns the variable an expression reads when it is only a
// variable or a path into one ("=result.total" reads result), else "".
func variableOf(src string) string {
	expr, ok := strings.CutPrefix(src, "=")
	if !ok {
		return ""
	}
	parts := strings.Split(strings.TrimSpace(expr), ".")
	for _, part := range parts {
		if !isName(part) {
			return ""
		}
	}
	return parts[0]
}

func isName(s string) bool {
	for i, r := range s {
		if !(r == '_' || unicode.IsLetter(r) || i > 0 && unicode.IsDigit(r)) {
			return false
		}
	}
	return s != "" && !reservedName[s]
}

// reservedName are FEEL words that are not variable names.
var reservedName = map[string]bool{"true": true, "false": true, "null": true, "not": true, "and": true, "or": true}

// Package dmn reads DMN 1.3 to 1.5 decision models as Camunda Modeler
// writes them and evaluates their decisions on the project's FEEL. Like
// package engine it only computes: Parse turns a file into immutable
// Definitions (or refuses it with a SUTRA.DMN.* code), and Evaluate runs a
// decision with its required decisions under the FEEL limits and the
// caller's deadline. docs/dmn.md says what is supported.
package dmn

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/feel"
	"github.com/sutra-run/worker/internal/xmltree"
)

// Definitions is a parsed DMN file: its decisions and what they require.
// It is immutable and safe for concurrent use.
type Definitions struct {
	ID, Name string
	// Version is the DMN version the file's namespace names ("1.3" to "1.5").
	Version string
	// Decisions in document order.
	Decisions []*Decision
	// InputData are the names of the file's input data, in document order:
	// the variables a caller supplies.
	InputData []string
	byID      map[string]*Decision
	// coerce converts the input data of a temporal type from strings.
	coerce []coercion
}

// coercion reads the input data name as its declared type.
type coercion struct {
	name string
	expr *feel.Expr
}

// temporalTypes are the FEEL conversion functions of the typeRefs of
// temporal types, by typeRef (FEEL names, and the XML Schema names older
// models use).
var temporalTypes = map[string]string{
	"date": "date", "time": "time", "dateTime": "date and time", "date and time": "date and time",
	"dayTimeDuration": "duration", "days and time duration": "duration",
	"yearMonthDuration": "duration", "years and months duration": "duration",
}

// Decision is one decision: its logic is a decision table or a literal
// expression.
type Decision struct {
	ID, Name string
	// VersionTag is the decision's zeebe:versionTag ("" when it has none):
	// a business rule task may call the version so tagged.
	VersionTag string
	// Requires are the ids of the decisions whose results this one reads,
	// in document order.
	Requires []string
	table    *table
	literal  *feel.Expr
}

// Decision returns the decision with id, or nil.
func (d *Definitions) Decision(id string) *Decision { return d.byID[id] }

// Hit policies, as DMN names them in the hitPolicy attribute.
const (
	hitUnique      = "UNIQUE"
	hitAny         = "ANY"
	hitPriority    = "PRIORITY"
	hitFirst       = "FIRST"
	hitRuleOrder   = "RULE ORDER"
	hitOutputOrder = "OUTPUT ORDER"
	hitCollect     = "COLLECT"
)

// table is a decision table.
type table struct {
	hitPolicy   string
	aggregation string // SUM, MIN, MAX, COUNT or "" (COLLECT only)
	inputs      []input
	outputs     []output
	rules       []rule
}

type input struct {
	id, name string // the name is the label, or the expression's text
	expr     *feel.Expr
}

type output struct {
	id, name string
	// values are the output's allowed values in priority order (highest
	// first), for PRIORITY and OUTPUT ORDER; nil when none are given.
	values []any
	def    *feel.Expr // the default output entry, or nil
}

type rule struct {
	id  string
	in  []*feel.UnaryTests
	out []*feel.Expr
}

// Parse reads a DMN 1.3, 1.4 or 1.5 file. A file that is not one, is over
// the parser's caps (MaxBytes, MaxDepth, MaxElements) or holds an
// expression that does not compile is refused with fault.DMNInvalid; one
// that uses a part of DMN the package does not evaluate with
// fault.DMNUnsupported.
func Parse(r io.Reader) (*Definitions, error) {
	root, err := xmltree.Read(r, caps)
	if err != nil {
		return nil, fault.Wrap(fault.DMNInvalid, err, "reading the DMN file")
	}
	version, ok := versions[root.Name.Space]
	if root.Name.Local != "definitions" || !ok {
		return nil, fault.New(fault.DMNInvalid, "the root element is <%s> in namespace %q, not the definitions of DMN 1.3, 1.4 or 1.5", root.Name.Local, root.Name.Space)
	}
	d := &Definitions{ID: root.Attr("id"), Name: root.Attr("name"), Version: version, byID: map[string]*Decision{}}
	names := map[string]bool{}
	for _, k := range root.Kids {
		if k.Name.Space != root.Name.Space {
			continue
		}
		switch k.Name.Local {
		case "inputData":
			d.InputData = append(d.InputData, k.Attr("name"))
			names[k.Attr("name")] = true
		case "decision":
			names[k.Attr("name")] = true
		case "businessKnowledgeModel":
			names[k.Attr("name")] = true
			if logic := k.Child("encapsulatedLogic"); logic != nil {
				for _, p := range logic.Children("formalParameter") {
					names[p.Attr("name")] = true
				}
			}
		case "decisionService":
			names[k.Attr("name")] = true
		}
	}
	boxedNames(root, names)
	types := map[string]*node{}
	for _, k := range root.Children("itemDefinition") {
		types[k.Attr("name")] = k
	}
	f := &file{q: newQuoter(names), opts: feel.Options{Nulls: true, Functions: map[string]*feel.Function{}, Types: feelTypes(types)}}
	services, err := f.declareServices(root)
	if err != nil {
		return nil, err
	}
	if err := f.knowledgeModels(root); err != nil {
		return nil, err
	}
	if err := f.defineServices(root, services); err != nil {
		return nil, err
	}
	for _, k := range root.Children("inputData") {
		v := k.Child("variable")
		if v == nil || strings.Contains(k.Attr("name"), "`") {
			continue
		}
		work := maxCoerceWork
		if src, ok := coerceSource("`"+k.Attr("name")+"`", v.Attr("typeRef"), false, types, 0, &work); ok && work >= 0 {
			e, err := feel.CompileWith("="+src, f.opts)
			if err != nil {
				return nil, fault.Wrap(fault.DMNInvalid, err, "input data %q", k.Attr("name"))
			}
			d.coerce = append(d.coerce, coercion{name: k.Attr("name"), expr: e})
		}
	}
	for _, k := range root.Children("decision") {
		dec, err := parseDecision(k, f)
		if err != nil {
			return nil, err
		}
		if dec.ID == "" {
			return nil, fault.New(fault.DMNInvalid, "a decision has neither an id nor a name")
		}
		if d.byID[dec.ID] != nil {
			return nil, fault.New(fault.DMNInvalid, "two decisions have the id %q", dec.ID)
		}
		d.byID[dec.ID] = dec
		d.Decisions = append(d.Decisions, dec)
	}
	for _, dec := range d.Decisions {
		for _, id := range dec.Requires {
			if d.byID[id] == nil {
				return nil, fault.New(fault.DMNInvalid, "decision %q requires decision %q, which the file does not have", dec.ID, id)
			}
		}
	}
	if err := d.checkAcyclic(); err != nil {
		return nil, err
	}
	return d, nil
}

// checkAcyclic refuses a requirement graph with a cycle, which no order of
// evaluation could satisfy.
func (d *Definitions) checkAcyclic() error {
	const (
		visiting = 1
		done     = 2
	)
	state := map[string]int{}
	var visit func(id string) error
	visit = func(id string) error {
		switch state[id] {
		case visiting:
			return fault.New(fault.DMNInvalid, "decision %q requires itself through its required decisions", id)
		case done:
			return nil
		}
		state[id] = visiting
		for _, r := range d.byID[id].Requires {
			if err := visit(r); err != nil {
				return err
			}
		}
		state[id] = done
		return nil
	}
	for _, dec := range d.Decisions {
		if err := visit(dec.ID); err != nil {
			return err
		}
	}
	return nil
}

func parseDecision(n *node, f *file) (*Decision, error) {
	dec := &Decision{ID: n.Attr("id"), Name: n.Attr("name"), VersionTag: versionTag(n)}
	if dec.ID == "" {
		// DMN makes the id optional; the name then identifies it.
		dec.ID = dec.Name
	}
	for _, ir := range n.Children("informationRequirement") {
		if rd := ir.Child("requiredDecision"); rd != nil {
			dec.Requires = append(dec.Requires, strings.TrimPrefix(rd.Attr("href"), "#"))
		}
	}
	for _, k := range n.Kids {
		if k.Name.Space != n.Name.Space {
			continue
		}
		var err error
		switch k.Name.Local {
		case "decisionTable":
			dec.table, err = parseTable(k, f, dec)
		case "literalExpression":
			dec.literal, err = compileExpr(textOf(k), f, dec, "literal expression")
		case "invocation", "context", "relation", "list", "conditional", "filter", "for", "some", "every", "functionDefinition":
			var src string
			if src, err = boxedSource(k, dec); err == nil {
				dec.literal, err = compileExpr(src, f, dec, "boxed "+k.Name.Local)
			}
		}
		if err != nil {
			return nil, err
		}
	}
	if dec.table == nil && dec.literal == nil {
		return nil, fault.New(fault.DMNInvalid, "decision %q has neither a decision table nor a literal expression", dec.ID)
	}

	return dec, nil
}

// file is what compiling a file's expressions needs: its names, and DMN's
// FEEL with the file's business knowledge models as functions. In DMN's
// FEEL an expression that cannot apply to the values it meets is null, as
// the DMN specification and Camunda's engines make it, rather than failing
// the decision.
type file struct {
	q    *quoter
	opts feel.Options
}

// knowledgeModels declares the file's business knowledge models as FEEL
// functions, then compiles their bodies. Declaring them all first lets one
// call another, or itself. Every decision may call every one.
func (f *file) knowledgeModels(root *node) error {
	bkms := root.Children("businessKnowledgeModel")
	for _, k := range bkms {
		logic := k.Child("encapsulatedLogic")
		if logic == nil {
			return fault.New(fault.DMNInvalid, "business knowledge model %q has no encapsulated logic", k.Attr("id"))
		}
		var params []string
		for _, p := range logic.Children("formalParameter") {
			params = append(params, p.Attr("name"))
		}
		name := k.Attr("name")
		if f.opts.Functions[name] != nil {
			return fault.New(fault.DMNInvalid, "two business knowledge models are named %q", name)
		}
		f.opts.Functions[name] = feel.NewFunction(name, params)
	}
	for _, k := range bkms {
		var body *node
		for _, c := range sameSpace(k.Child("encapsulatedLogic")) {
			if c.Name.Local != "formalParameter" {
				body = c
				break
			}
		}
		owner := &Decision{ID: k.Attr("id")}
		src, err := "", error(nil)
		switch {
		case body == nil:
			err = fault.New(fault.DMNInvalid, "business knowledge model %q has no body", owner.ID)
		case body.Name.Local == "decisionTable":
			err = fault.New(fault.DMNUnsupported, "business knowledge model %q: a <%s> as its logic is not supported", owner.ID, body.Name.Local)
		default:
			src, err = boxedSource(body, owner)
		}
		if err != nil {
			return err
		}
		e, err := compileExpr(src, f, owner, "business knowledge model's "+body.Name.Local)
		if err != nil {
			return err
		}
		f.opts.Functions[k.Attr("name")].Define(e)
	}
	return nil
}

// boxedSource is the FEEL expression a boxed expression stands for, so
// that it compiles and evaluates like a literal expression: a context is a
// context literal (its result entry, if any, picked out of it), a list a
// list literal, a relation a list of contexts, an invocation a call by
// parameter name, a function definition a function value, and conditional,
// filter, for, some and every their FEEL forms. A decision table inside is
// not supported.
func boxedSource(n *node, dec *Decision) (string, error) {
	if n == nil {
		return "null", nil
	}
	part := func(local string) (string, error) {
		c := n.Child(local)
		if c == nil {
			return "", fault.New(fault.DMNInvalid, "decision %q: <%s> has no <%s>", dec.ID, n.Name.Local, local)
		}
		return boxedSource(expression(c), dec)
	}
	parts := func(locals ...string) ([]string, error) {
		var out []string
		for _, l := range locals {
			src, err := part(l)
			if err != nil {
				return nil, err
			}
			out = append(out, src)
		}
		return out, nil
	}
	var b strings.Builder
	switch n.Name.Local {
	case "literalExpression":
		if t := textOf(n); t != "" {
			return "(" + t + ")", nil
		}
		return "null", nil
	case "context":
		result := ""
		var entries []string
		for _, e := range n.Children("contextEntry") {
			src, err := boxedSource(expression(e), dec)
			if err != nil {
				return "", err
			}
			if v := e.Child("variable"); v != nil {
				entries = append(entries, feelString(v.Attr("name"))+": "+src)
			} else {
				result = src
			}
		}
		if result == "" {
			return "{" + strings.Join(entries, ", ") + "}", nil
		}
		// The result entry sees the others, under a key no name the
		// quoter reads can be: one holding a backtick.
		entries = append(entries, "\"`\": "+result)
		return "get value({" + strings.Join(entries, ", ") + "}, \"`\")", nil
	case "list":
		b.WriteString("[")
		for i, e := range sameSpace(n) {
			if i > 0 {
				b.WriteString(", ")
			}
			src, err := boxedSource(e, dec)
			if err != nil {
				return "", err
			}
			b.WriteString(src)
		}
		b.WriteString("]")
		return b.String(), nil
	case "relation":
		var cols []string
		for _, c := range n.Children("column") {
			cols = append(cols, feelString(c.Attr("name")))
		}
		b.WriteString("[")
		for i, row := range n.Children("row") {
			cells := sameSpace(row)
			if len(cells) != len(cols) {
				return "", fault.New(fault.DMNInvalid, "decision %q: row %d of the relation has %d cells for %d columns", dec.ID, i+1, len(cells), len(cols))
			}
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("{")
			for j, cell := range cells {
				src, err := boxedSource(cell, dec)
				if err != nil {
					return "", err
				}
				if j > 0 {
					b.WriteString(", ")
				}
				b.WriteString(cols[j] + ": " + src)
			}
			b.WriteString("}")
		}
		b.WriteString("]")
		return b.String(), nil
	case "invocation":
		return invocationSource(n, dec)
	case "functionDefinition":
		if kind := n.Attr("kind"); kind != "" && kind != "FEEL" {
			return "", fault.New(fault.DMNUnsupported, "decision %q: a function definition of kind %s is not supported", dec.ID, kind)
		}
		var params []string
		var body *node
		for _, k := range sameSpace(n) {
			if k.Name.Local == "formalParameter" {
				params = append(params, k.Attr("name"))
			} else if body == nil {
				body = k
			}
		}
		src, err := boxedSource(body, dec)
		if err != nil {
			return "", err
		}
		return "(function(" + strings.Join(params, ", ") + ") " + src + ")", nil
	case "conditional":
		p, err := parts("if", "then", "else")
		if err != nil {
			return "", err
		}
		return "(if " + p[0] + " then " + p[1] + " else " + p[2] + ")", nil
	case "filter":
		p, err := parts("in", "match")
		if err != nil {
			return "", err
		}
		return "(" + p[0] + "[" + p[1] + "])", nil
	case "for", "some", "every":
		last := map[string]string{"for": "return", "some": "satisfies", "every": "satisfies"}[n.Name.Local]
		p, err := parts("in", last)
		if err != nil {
			return "", err
		}
		return "(" + n.Name.Local + " " + n.Attr("iteratorVariable") + " in " + p[0] + " " + last + " " + p[1] + ")", nil
	}
	return "", fault.New(fault.DMNUnsupported, "decision %q: the boxed expression <%s> is not supported inside another", dec.ID, n.Name.Local)
}

// expression is the boxed expression n holds (a context entry, a binding,
// a part of a conditional...): its child in the DMN namespace other than a
// variable or parameter, or nil when it has none.
func expression(n *node) *node {
	for _, k := range n.Kids {
		if k.Name.Space == n.Name.Space && k.Name.Local != "variable" && k.Name.Local != "parameter" {
			return k
		}
	}
	return nil
}

// maxCoerceDepth bounds the nesting of item definitions coerceSource
// follows; deeper parts stay as given. maxCoerceWork bounds the types it
// visits for one input, since types may share components (a type of ten
// components of a type of ten...): past it the input is not coerced.
const (
	maxCoerceDepth = 8
	maxCoerceWork  = 1000
)

// feelTypeNames are the FEEL types of typeRefs (FEEL names, and the XML
// Schema names older models use).
var feelTypeNames = map[string]string{
	"Any": "Any", "number": "number", "string": "string", "boolean": "boolean",
	"context": "context", "list": "list", "range": "range", "function": "function",
	"date": "date", "time": "time", "dateTime": "date and time", "date and time": "date and time",
	"dayTimeDuration": "days and time duration", "days and time duration": "days and time duration",
	"yearMonthDuration": "years and months duration", "years and months duration": "years and months duration",
}

// feelTypes are the model's item definitions as FEEL types, for instance
// of: a typeRef, a structure (context<...>), a function item
// (function<...> -> R), a collection of any (list<...>). An item definition
// naming a type that is neither FEEL's nor the model's is left out, so an
// expression naming it is refused. Allowed values do not narrow the type.
func feelTypes(types map[string]*node) map[string]string {
	out := map[string]string{}
	for name, t := range types {
		if feelTypeNames[name] != "" {
			continue
		}
		if src, ok := itemType(t, types); ok {
			out[name] = src
		}
	}
	return out
}

// itemType is an item definition (or component) as FEEL type text.
func itemType(t *node, types map[string]*node) (string, bool) {
	ref := func(r string) (string, bool) {
		r = strings.TrimPrefix(strings.TrimSpace(r), "feel:")
		switch {
		case r == "":
			return "Any", true
		case feelTypeNames[r] != "":
			return feelTypeNames[r], true
		case types[r] != nil && plainName(r):
			return r, true
		case types[r] != nil && !strings.Contains(r, "`"):
			return "`" + r + "`", true
		}
		return "", false
	}
	var src string
	var ok bool
	if fn := t.Child("functionItem"); fn != nil {
		var ps []string
		for _, p := range fn.Children("parameters") {
			s, ok := ref(p.Attr("typeRef"))
			if !ok {
				return "", false
			}
			ps = append(ps, s)
		}
		out, ok := ref(fn.Attr("outputTypeRef"))
		if !ok {
			return "", false
		}
		src = "function<" + strings.Join(ps, ", ") + "> -> " + out
	} else if cs := t.Children("itemComponent"); len(cs) > 0 {
		var es []string
		for _, c := range cs {
			k := c.Attr("name")
			if strings.Contains(k, "`") {
				return "", false
			}
			s, ok := itemType(c, types)
			if !ok {
				return "", false
			}
			es = append(es, "`"+k+"`: "+s)
		}
		src = "context<" + strings.Join(es, ", ") + ">"
	} else {
		r := ""
		if n := t.Child("typeRef"); n != nil {
			r = n.Text.String()
		}
		if src, ok = ref(r); !ok {
			return "", false
		}
	}
	if t.Attr("isCollection") == "true" {
		src = "list<" + src + ">"
	}
	return src, true
}

// coerceSource is FEEL that reads the value of x as the type typeRef
// names (a collection of it if list): strings as dates, times and
// durations where the type, or a component of a structured type, is one.
// It reports false when nothing of the type needs reading so. Each level
// binds its value to a name of its own in a context, so that the source
// grows with the type, not with its depth times x.
func coerceSource(x, typeRef string, list bool, types map[string]*node, depth int, work *int) (string, bool) {
	if *work--; depth > maxCoerceDepth || *work < 0 {
		return "", false
	}
	v := fmt.Sprintf("`%%v%d`", depth)
	if list {
		// The iterator needs a plain name; the body reads nothing else.
		it := fmt.Sprintf("item%d", depth)
		inner, ok := coerceSource(it, typeRef, false, types, depth+1, work)
		if !ok {
			return "", false
		}
		return fmt.Sprintf("{%q: %s, %q: if %s instance of list then (for %s in %s return %s) else %s}.`%%r%d`",
			v[1:len(v)-1], x, fmt.Sprintf("%%r%d", depth), v, it, v, inner, v, depth), true
	}
	if conv := temporalTypes[typeRef]; conv != "" {
		return fmt.Sprintf("{%q: %s, %q: if %s instance of string then %s(%s) else %s}.`%%r%d`",
			v[1:len(v)-1], x, fmt.Sprintf("%%r%d", depth), v, conv, v, v, depth), true
	}
	t := types[typeRef]
	if t == nil {
		return "", false
	}
	if base := t.Child("typeRef"); base != nil && len(t.Children("itemComponent")) == 0 {
		return coerceSource(x, strings.TrimSpace(base.Text.String()), t.Attr("isCollection") == "true", types, depth+1, work)
	}
	put := v
	for _, c := range t.Children("itemComponent") {
		ref := ""
		if r := c.Child("typeRef"); r != nil {
			ref = strings.TrimSpace(r.Text.String())
		}
		name := c.Attr("name")
		if strings.Contains(name, "`") {
			continue
		}
		src, ok := coerceSource(v+".`"+name+"`", ref, c.Attr("isCollection") == "true", types, depth+1, work)
		if ok {
			put = fmt.Sprintf("context put(%s, %s, %s)", put, feelString(name), src)
		}
	}
	if put == v {
		return "", false
	}
	if t.Attr("isCollection") == "true" {
		return "", false // a list of structures: left as given
	}
	return fmt.Sprintf("{%q: %s, %q: if %s instance of context then %s else %s}.`%%r%d`",
		v[1:len(v)-1], x, fmt.Sprintf("%%r%d", depth), v, put, v, depth), true
}

// boxedNames adds the names boxed expressions bind under n (context
// entries, iterators, relation columns) and the components of structured
// types to names, for the quoter.
func boxedNames(n *node, names map[string]bool) {
	for _, k := range n.Kids {
		switch k.Name.Local {
		case "contextEntry":
			if v := k.Child("variable"); v != nil {
				names[v.Attr("name")] = true
			}
		case "for", "some", "every":
			names[k.Attr("iteratorVariable")] = true
		case "column", "itemComponent", "formalParameter":
			names[k.Attr("name")] = true
		}
		boxedNames(k, names)
	}
}

// sameSpace is n's children in the DMN namespace.
func sameSpace(n *node) []*node {
	var out []*node
	for _, k := range n.Kids {
		if k.Name.Space == n.Name.Space {
			out = append(out, k)
		}
	}
	return out
}

// feelString is s as a FEEL string literal.
func feelString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// invocationSource is the FEEL call a boxed invocation stands for: the
// function it names applied to its bindings by parameter name (a binding
// without an expression passes null).
func invocationSource(n *node, dec *Decision) (string, error) {
	callee := textOf(n.Child("literalExpression"))
	if callee == "" {
		return "", fault.New(fault.DMNInvalid, "decision %q: the invocation names no function", dec.ID)
	}
	var b strings.Builder
	b.WriteString(callee + "(")
	for i, bind := range n.Children("binding") {
		if i > 0 {
			b.WriteString(", ")
		}
		p := bind.Child("parameter")
		if p == nil || p.Attr("name") == "" {
			return "", fault.New(fault.DMNInvalid, "decision %q: binding %d of the invocation names no parameter", dec.ID, i+1)
		}
		arg, err := boxedSource(expression(bind), dec)
		if err != nil {
			return "", err
		}
		b.WriteString(p.Attr("name") + ": " + arg)
	}
	b.WriteString(")")
	return b.String(), nil
}

// compileExpr compiles the FEEL expression src of dec; where names the
// place in the decision for the error.
func compileExpr(src string, f *file, dec *Decision, where string) (*feel.Expr, error) {
	if src == "" {
		return nil, fault.New(fault.DMNInvalid, "decision %q: the %s is empty", dec.ID, where)
	}
	quoted, err := f.q.quote(src)
	if err != nil {
		return nil, err
	}
	e, err := feel.CompileWith("="+quoted, f.opts)
	if err != nil {
		return nil, fault.Wrap(fault.DMNInvalid, err, "decision %q: %s", dec.ID, where)
	}
	return e, nil
}

func parseTable(n *node, f *file, dec *Decision) (*table, error) {
	t := &table{hitPolicy: n.Attr("hitPolicy"), aggregation: n.Attr("aggregation")}
	if t.hitPolicy == "" {
		t.hitPolicy = hitUnique
	}
	switch t.hitPolicy {
	case hitUnique, hitAny, hitPriority, hitFirst, hitRuleOrder, hitOutputOrder, hitCollect:
	default:
		return nil, fault.New(fault.DMNInvalid, "decision %q: unknown hit policy %q", dec.ID, t.hitPolicy)
	}
	switch t.aggregation {
	case "", "SUM", "MIN", "MAX", "COUNT":
	default:
		return nil, fault.New(fault.DMNInvalid, "decision %q: unknown aggregation %q", dec.ID, t.aggregation)
	}
	if t.aggregation != "" && t.hitPolicy != hitCollect {
		return nil, fault.New(fault.DMNInvalid, "decision %q: aggregation %s needs the hit policy COLLECT, not %s", dec.ID, t.aggregation, t.hitPolicy)
	}
	for i, in := range n.Children("input") {
		src := textOf(in.Child("inputExpression"))
		e, err := compileExpr(src, f, dec, fmt.Sprintf("input %d", i+1))
		if err != nil {
			return nil, err
		}
		name := in.Attr("label")
		if name == "" {
			name = src
		}
		t.inputs = append(t.inputs, input{id: in.Attr("id"), name: name, expr: e})
	}
	outs := n.Children("output")
	for i, o := range outs {
		out := output{id: o.Attr("id"), name: o.Attr("name")}
		if out.name == "" && len(outs) == 1 {
			out.name = dec.Name
		}
		if out.name == "" {
			return nil, fault.New(fault.DMNInvalid, "decision %q: output %d of several has no name", dec.ID, i+1)
		}
		if src := textOf(o.Child("outputValues")); src != "" {
			vals, err := constList(src, f, dec, fmt.Sprintf("output %q values", out.name))
			if err != nil {
				return nil, err
			}
			out.values = vals
		}
		if def := o.Child("defaultOutputEntry"); textOf(def) != "" {
			e, err := compileExpr(textOf(def), f, dec, fmt.Sprintf("output %q default", out.name))
			if err != nil {
				return nil, err
			}
			out.def = e
		}
		t.outputs = append(t.outputs, out)
	}
	if len(t.outputs) == 0 {
		return nil, fault.New(fault.DMNInvalid, "decision %q: the decision table has no output", dec.ID)
	}
	if t.aggregation != "" && len(t.outputs) > 1 {
		return nil, fault.New(fault.DMNInvalid, "decision %q: aggregation %s needs a single output, the table has %d", dec.ID, t.aggregation, len(t.outputs))
	}
	for i, r := range n.Children("rule") {
		ru := rule{id: r.Attr("id")}
		if ru.id == "" {
			ru.id = fmt.Sprintf("rule %d", i+1)
		}
		ins, outs := r.Children("inputEntry"), r.Children("outputEntry")
		if len(ins) != len(t.inputs) || len(outs) != len(t.outputs) {
			return nil, fault.New(fault.DMNInvalid, "decision %q: rule %q has %d input and %d output entries, the table %d and %d", dec.ID, ru.id, len(ins), len(outs), len(t.inputs), len(t.outputs))
		}
		for j, e := range ins {
			quoted, err := f.q.quote(textOf(e))
			if err != nil {
				return nil, err
			}
			u, err := feel.CompileUnaryTestsWith(quoted, f.opts)
			if err != nil {
				return nil, fault.Wrap(fault.DMNInvalid, err, "decision %q: rule %q input entry %d", dec.ID, ru.id, j+1)
			}
			ru.in = append(ru.in, u)
		}
		for j, e := range outs {
			src := textOf(e)
			if src == "" {
				// An empty cell, as the Modeler leaves one: null, as in
				// Camunda's engines.
				src = "null"
			}
			x, err := compileExpr(src, f, dec, fmt.Sprintf("rule %q output entry %d", ru.id, j+1))
			if err != nil {
				return nil, err
			}
			ru.out = append(ru.out, x)
		}
		t.rules = append(t.rules, ru)
	}
	return t, nil
}

// constList evaluates the output values src ("a", "b", ...) as the list of
// constants they are, in the order written: the order of priority.
func constList(src string, f *file, dec *Decision, where string) ([]any, error) {
	e, err := compileExpr("["+src+"]", f, dec, where)
	if err != nil {
		return nil, err
	}
	if e.UsesVariables() || e.UsesClock() || e.UsesSeed() {
		return nil, fault.New(fault.DMNInvalid, "decision %q: the %s are not constants", dec.ID, where)
	}
	v, err := e.Eval(nil)
	if err != nil {
		return nil, fault.Wrap(fault.DMNInvalid, err, "decision %q: %s", dec.ID, where)
	}
	l, _ := v.([]any)
	return l, nil
}

// quoter puts the model's names that are not plain FEEL names (DMN allows
// "Monthly Salary") in backticks, so that the feel package reads each as
// one name: FEEL's grammar needs to know the names in scope to read them,
// and these are the names a decision's scope holds.
//
// Names are found by their first word, and the bytes compared are charged
// to a budget for the whole file (maxQuoteWork): a hostile file of many
// names sharing a first word, used in long expressions, is refused rather
// than read in time quadratic in its size.
type quoter struct {
	// byWord holds the names by their first word (or first character when
	// it starts with no word), longest first, so that "Loan Amount Max"
	// wins over "Loan Amount".
	byWord map[string][]string
	work   int
}

// maxQuoteWork bounds the bytes compared while finding names in one file:
// far above what a Modeler file needs (a few per name written), far below
// a second of work.
const maxQuoteWork = 1 << 26

func newQuoter(names map[string]bool) *quoter {
	q := &quoter{byWord: map[string][]string{}}
	for n := range names {
		if n != "" && !plainName(n) && !strings.ContainsAny(n, "\"`") {
			w := firstWord(n)
			q.byWord[w] = append(q.byWord[w], n)
		}
	}
	for _, ns := range q.byWord {
		sort.Slice(ns, func(i, j int) bool {
			if len(ns[i]) != len(ns[j]) {
				return len(ns[i]) > len(ns[j])
			}
			return ns[i] < ns[j]
		})
	}
	return q
}

// firstWord is the run of identifier bytes s starts with, or its first
// byte when it starts with none.
func firstWord(s string) string {
	j := 0
	for j < len(s) && identRune(s[j]) {
		j++
	}
	return s[:max(j, 1)]
}

func plainName(s string) bool {
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9' || r > 0x7f && r != 0xa0) {
			return false
		}
	}
	return true
}

func identRune(b byte) bool {
	return b == '_' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b >= 0x80
}

// quote rewrites src with the names in backticks, outside string literals
// and names already in backticks, where a name starts and ends at a word
// boundary.
func (q *quoter) quote(src string) (string, error) {
	if len(q.byWord) == 0 {
		return src, nil
	}
	var b strings.Builder
	for i := 0; i < len(src); {
		switch c := src[i]; c {
		case '"', '`':
			j := i + 1
			for j < len(src) && src[j] != c {
				if c == '"' && src[j] == '\\' {
					j++
				}
				j++
			}
			j = min(j+1, len(src))
			b.WriteString(src[i:j])
			i = j
			continue
		}
		if i == 0 || !identRune(src[i-1]) {
			n, err := q.at(src, i)
			if err != nil {
				return "", err
			}
			if n != "" {
				b.WriteString("`" + n + "`")
				i += len(n)
				continue
			}
		}
		b.WriteByte(src[i])
		i++
	}
	return b.String(), nil
}

// at returns the longest name that starts at src[i] and ends at a word
// boundary, or "".
func (q *quoter) at(src string, i int) (string, error) {
	for _, n := range q.byWord[firstWord(src[i:])] {
		if q.work += len(n); q.work > maxQuoteWork {
			return "", fault.New(fault.DMNInvalid, "the file's names with spaces take too much work to find in its expressions (over %d bytes compared)", maxQuoteWork)
		}
		if strings.HasPrefix(src[i:], n) && (i+len(n) == len(src) || !identRune(src[i+len(n)]) || !identRune(n[len(n)-1])) {
			return n, nil
		}
	}
	return "", nil
}

// declareServices declares the model's decision services as FEEL
// functions, as DMN has them: the parameters are the input data then the
// input decisions, by name (the TCK's order); the result is the output decision's, or a
// context of the output decisions by name.
func (f *file) declareServices(root *node) ([]*node, error) {
	byID := map[string]*node{}
	for _, k := range root.Kids {
		if k.Name.Space == root.Name.Space && (k.Name.Local == "decision" || k.Name.Local == "inputData") {
			byID[k.Attr("id")] = k
		}
	}
	services := root.Children("decisionService")
	for _, s := range services {
		var params []string
		for _, part := range []string{"inputData", "inputDecision"} {
			for _, r := range s.Children(part) {
				n := byID[strings.TrimPrefix(r.Attr("href"), "#")]
				if n == nil {
					return nil, fault.New(fault.DMNInvalid, "decision service %q: its %s %q is not in the file", s.Attr("id"), part, r.Attr("href"))
				}
				params = append(params, n.Attr("name"))
			}
		}
		name := s.Attr("name")
		if f.opts.Functions[name] != nil {
			return nil, fault.New(fault.DMNInvalid, "two decision services or business knowledge models are named %q", name)
		}
		f.opts.Functions[name] = feel.NewFunction(name, params)
	}
	return services, nil
}

// defineServices gives each decision service its body: a context of its
// decisions, each an entry named by the decision, in the order of their
// requirements (so each sees those it requires), and the outputs picked
// out of it. Inputs are the parameters; a decision required but neither
// an input nor encapsulated is evaluated within too. A decision table has
// no FEEL form, so a service evaluating one is not supported.
func (f *file) defineServices(root *node, services []*node) error {
	decisions := map[string]*node{}
	for _, k := range root.Children("decision") {
		id := k.Attr("id")
		if id == "" {
			id = k.Attr("name")
		}
		decisions[id] = k
	}
	for _, s := range services {
		owner := &Decision{ID: s.Attr("id")}
		inputs := map[string]bool{}
		for _, r := range s.Children("inputDecision") {
			inputs[strings.TrimPrefix(r.Attr("href"), "#")] = true
		}
		var order []*node
		state := map[string]int{} // 1 visiting, 2 done
		var visit func(id string) error
		visit = func(id string) error {
			if inputs[id] || state[id] == 2 {
				return nil
			}
			d := decisions[id]
			if d == nil {
				return fault.New(fault.DMNInvalid, "decision service %q: decision %q is not in the file", owner.ID, id)
			}
			if state[id] == 1 {
				return fault.New(fault.DMNInvalid, "decision service %q: decision %q requires itself", owner.ID, id)
			}
			state[id] = 1
			for _, ir := range d.Children("informationRequirement") {
				if rd := ir.Child("requiredDecision"); rd != nil {
					if err := visit(strings.TrimPrefix(rd.Attr("href"), "#")); err != nil {
						return err
					}
				}
			}
			state[id] = 2
			order = append(order, d)
			return nil
		}
		var outs []string
		for _, part := range []string{"outputDecision", "encapsulatedDecision"} {
			for _, r := range s.Children(part) {
				id := strings.TrimPrefix(r.Attr("href"), "#")
				if err := visit(id); err != nil {
					return err
				}
				if part == "outputDecision" {
					outs = append(outs, decisions[id].Attr("name"))
				}
			}
		}
		if len(outs) == 0 {
			return fault.New(fault.DMNInvalid, "decision service %q has no output decision", owner.ID)
		}
		var b strings.Builder
		b.WriteString("{")
		keys := map[string]bool{}
		for _, d := range order {
			src, err := decisionSource(d)
			if err != nil {
				return fault.Wrap(fault.DMNUnsupported, err, "decision service %q", owner.ID)
			}
			fmt.Fprintf(&b, "%s: (%s), ", feelString(d.Attr("name")), src)
			keys[d.Attr("name")] = true
		}
		result := "result"
		for keys[result] {
			result += "_"
		}
		if len(outs) == 1 {
			fmt.Fprintf(&b, "%s: %s}", feelString(result), "`"+outs[0]+"`")
		} else {
			fmt.Fprintf(&b, "%s: {", feelString(result))
			for i, o := range outs {
				if i > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "%s: `%s`", feelString(o), o)
			}
			b.WriteString("}}")
		}
		fmt.Fprintf(&b, ".`%s`", result)
		e, err := compileExpr(b.String(), f, owner, "decision service")
		if err != nil {
			return err
		}
		f.opts.Functions[s.Attr("name")].Define(e)
	}
	return nil
}

// decisionSource is the FEEL a decision's logic stands for.
func decisionSource(d *node) (string, error) {
	for _, k := range d.Kids {
		if k.Name.Space != d.Name.Space {
			continue
		}
		switch k.Name.Local {
		case "literalExpression":
			return textOf(k), nil
		case "invocation", "context", "relation", "list", "conditional", "filter", "for", "some", "every", "functionDefinition":
			return boxedSource(k, &Decision{ID: d.Attr("id")})
		case "decisionTable":
			return "", fmt.Errorf("decision %q is a decision table, which a decision service cannot evaluate", d.Attr("id"))
		}
	}
	return "", fmt.Errorf("decision %q has no logic", d.Attr("id"))
}

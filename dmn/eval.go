package dmn

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/feel"
)

// Options are what an evaluation reads besides the variables.
type Options struct {
	// Env is the FEEL environment of every expression of the evaluation:
	// its clock, seed and limits. The limits bound each expression; the
	// context passed to Evaluate bounds the whole evaluation.
	Env feel.Env
}

// Result is the outcome of evaluating a decision and, first, the decisions
// it requires.
type Result struct {
	// Output is the evaluated decision's result: for a table, one value (a
	// single output) or a context of its outputs, or a list of those (the
	// hit policies RULE ORDER, OUTPUT ORDER and COLLECT without
	// aggregation); null when no rule matched and there is no default.
	Output any
	// Decisions are the results of every decision evaluated, in the order
	// evaluated: required decisions first, the decision asked for last.
	Decisions []DecisionResult
}

// DecisionResult is the result of one decision of an evaluation.
type DecisionResult struct {
	ID, Name string
	// Table reports that the decision's logic is a decision table; else it
	// is a literal expression (or a boxed expression evaluated as one).
	Table  bool
	Output any
	// Inputs are a decision table's inputs as evaluated, in column order
	// (empty for a literal expression).
	Inputs []Evaluated
	// Matched are the rules of a decision table that matched, in rule order
	// (empty for a literal expression).
	Matched []MatchedRule
}

// Evaluated is the value of one input or output column of a table: its id,
// its name (an input's label, or its expression when it has none) and the
// value.
type Evaluated struct {
	ID, Name string
	Value    any
}

// MatchedRule is one rule of a decision table that matched.
type MatchedRule struct {
	ID string
	// Index is the rule's position in the table, from 1.
	Index int
	// Outputs are the rule's output entries, in column order.
	Outputs []Evaluated
}

// Failure is a failed evaluation: the decision that failed, and the
// results of the decisions evaluated before it (as Result.Decisions has
// them), then the failed one's id and name alone, as Zeebe reports a
// failed evaluation. It wraps the *fault.Error that says why.
type Failure struct {
	DecisionID string
	Evaluated  []DecisionResult
	Err        error
}

func (f *Failure) Error() string { return f.Err.Error() }
func (f *Failure) Unwrap() error { return f.Err }

// Evaluate evaluates the decision with id over vars (the input data by
// name, JSON-shaped), after the decisions it requires, each once, in
// dependency order. A decision sees vars and the results of the decisions
// it requires directly, each under its name and under its id (a required
// decision's result hides a variable of the same name); nothing else. A
// failure carries fault.IncidentDecisionFailed, or
// fault.IncidentExpressionLimit when an expression was cut off by its
// limits or ctx's deadline; once a decision of the graph was found, it is
// a *Failure.
func (d *Definitions) Evaluate(ctx context.Context, id string, vars map[string]any, opts Options) (*Result, error) {
	dec := d.byID[id]
	if dec == nil {
		return nil, fault.New(fault.IncidentDecisionFailed, "no decision %q in definitions %q", id, d.ID)
	}
	env := opts.Env
	env.Ctx = ctx
	ev := &evaluation{d: d, env: env, vars: vars, results: map[string]any{}}
	res := &Result{}
	if err := ev.coerceInputs(); err != nil {
		return nil, ev.failed(res, &Failure{DecisionID: dec.ID, Err: err})
	}
	if f := ev.decide(dec, res); f != nil {
		return nil, ev.failed(res, f)
	}
	if err := ev.shape(res); err != nil {
		return nil, ev.failed(&Result{}, ev.fail(dec, err))
	}
	res.Output = res.Decisions[len(res.Decisions)-1].Output
	return res, nil
}

// failed completes f with the decisions of res, evaluated before the one
// that failed (kept when they can be told as JSON), then that one.
func (ev *evaluation) failed(res *Result, f *Failure) *Failure {
	if ev.shape(res) != nil {
		res.Decisions = nil
	}
	dec := ev.d.byID[f.DecisionID]
	f.Evaluated = append(res.Decisions, DecisionResult{ID: dec.ID, Name: dec.Name, Table: dec.table != nil})
	return f
}

// coerceInputs reads the input data whose type is a date, time or
// duration as one: a caller's JSON holds them as ISO 8601 strings.
func (ev *evaluation) coerceInputs() error {
	var vars map[string]any
	for _, in := range ev.d.coerce {
		if _, ok := ev.vars[in.name]; !ok {
			continue
		}
		v, err := in.expr.EvalValue(ev.vars, ev.env)
		if err != nil {
			return fault.Wrap(fault.IncidentDecisionFailed, err, "input data %q", in.name)
		}
		if vars == nil {
			vars = make(map[string]any, len(ev.vars))
			for k, x := range ev.vars {
				vars[k] = x
			}
		}
		vars[in.name] = v
	}
	if vars != nil {
		ev.vars = vars
	}
	return nil
}

// shape turns every value of res into JSON: decisions pass dates, times
// and durations on to one another as FEEL values, and hand them out as
// ISO 8601 strings.
func (ev *evaluation) shape(res *Result) error {
	json := func(v *any) error {
		s, err := feel.JSON(*v, ev.env)
		*v = s
		return err
	}
	for i := range res.Decisions {
		dr := &res.Decisions[i]
		if err := json(&dr.Output); err != nil {
			// A required decision may give a function to the decisions
			// that call it; it has no JSON form to report.
			if !errors.Is(err, feel.ErrFunctionResult) || i == len(res.Decisions)-1 {
				return err
			}
			dr.Output = nil
		}
		for j := range dr.Inputs {
			if err := json(&dr.Inputs[j].Value); err != nil {
				return err
			}
		}
		for j := range dr.Matched {
			for k := range dr.Matched[j].Outputs {
				if err := json(&dr.Matched[j].Outputs[k].Value); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

type evaluation struct {
	d       *Definitions
	env     feel.Env
	vars    map[string]any
	results map[string]any // by decision id, once evaluated
	// scope is what the decision being evaluated sees.
	scope map[string]any
}

// decide evaluates dec's required decisions, then dec. Parse refused
// cycles, so the recursion ends.
func (ev *evaluation) decide(dec *Decision, res *Result) *Failure {
	if _, done := ev.results[dec.ID]; done {
		return nil
	}
	for _, r := range dec.Requires {
		if err := ev.decide(ev.d.byID[r], res); err != nil {
			return err
		}
	}
	if err := ev.env.Ctx.Err(); errors.Is(err, context.DeadlineExceeded) {
		return ev.fail(dec, &feel.LimitError{Limit: feel.LimitDeadline})
	} else if err != nil {
		return ev.fail(dec, fmt.Errorf("the evaluation was cancelled: %w", context.Cause(ev.env.Ctx)))
	}
	ev.scope = ev.vars
	if len(dec.Requires) > 0 {
		ev.scope = make(map[string]any, len(ev.vars)+2*len(dec.Requires))
		for k, v := range ev.vars {
			ev.scope[k] = v
		}
		for _, r := range dec.Requires {
			req := ev.d.byID[r]
			ev.scope[req.Name] = ev.results[r]
			ev.scope[r] = ev.results[r]
		}
	}
	dr := DecisionResult{ID: dec.ID, Name: dec.Name, Table: dec.table != nil}
	var err error
	if dec.literal != nil {
		dr.Output, err = dec.literal.EvalValue(ev.scope, ev.env)
	} else {
		dr.Output, dr.Inputs, dr.Matched, err = ev.table(dec.table)
	}
	if err != nil {
		return ev.fail(dec, err)
	}
	ev.results[dec.ID] = dr.Output
	res.Decisions = append(res.Decisions, dr)
	return nil
}

func (ev *evaluation) fail(dec *Decision, err error) *Failure {
	code := fault.IncidentDecisionFailed
	if feel.IsLimit(err) {
		code = fault.IncidentExpressionLimit
	}
	return &Failure{DecisionID: dec.ID, Err: fault.Wrap(code, err, "decision %q", dec.ID)}
}

// table evaluates a decision table: the inputs, the rules that match, and
// the result its hit policy makes of them.
func (ev *evaluation) table(t *table) (any, []Evaluated, []MatchedRule, error) {
	in := make([]any, len(t.inputs))
	ins := make([]Evaluated, len(t.inputs))
	for i, c := range t.inputs {
		v, err := c.expr.EvalValue(ev.scope, ev.env)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("input %d: %w", i+1, err)
		}
		in[i] = v
		ins[i] = Evaluated{ID: c.id, Name: c.name, Value: v}
	}
	var matched []MatchedRule
	var rows [][]any // the output values of each matched rule
rules:
	for ri, r := range t.rules {
		for i, u := range r.in {
			ok, err := u.Test(in[i], ev.scope, ev.env)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("rule %q input entry %d: %w", r.id, i+1, err)
			}
			if !ok {
				continue rules
			}
		}
		row := make([]any, len(r.out))
		outs := make([]Evaluated, len(r.out))
		for i, e := range r.out {
			v, err := e.EvalValue(ev.scope, ev.env)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("rule %q output entry %d: %w", r.id, i+1, err)
			}
			row[i] = v
			outs[i] = Evaluated{ID: t.outputs[i].id, Name: t.outputs[i].name, Value: v}
		}
		matched = append(matched, MatchedRule{ID: r.id, Index: ri + 1, Outputs: outs})
		rows = append(rows, row)
		if t.hitPolicy == hitFirst {
			break
		}
	}
	if len(rows) == 0 {
		out, err := ev.defaults(t)
		return out, ins, matched, err
	}
	out, err := t.hit(rows, matched)
	return out, ins, matched, err
}

// defaults is a table's result when no rule matched: its default output
// entries, or null when it has none (or, for COLLECT with COUNT, 0).
func (ev *evaluation) defaults(t *table) (any, error) {
	if t.aggregation == "COUNT" {
		return float64(0), nil
	}
	row := make([]any, len(t.outputs))
	some := false
	for i, o := range t.outputs {
		if o.def == nil {
			continue
		}
		v, err := o.def.EvalValue(ev.scope, ev.env)
		if err != nil {
			return nil, fmt.Errorf("output %q default: %w", o.name, err)
		}
		row[i], some = v, true
	}
	// A table whose result is a list keeps that type when no rule matched.
	switch {
	case !some && t.listed():
		return []any{}, nil
	case !some:
		return nil, nil
	case t.listed():
		return []any{t.shape(row)}, nil
	}
	return t.shape(row), nil
}

// listed reports whether the table's result is a list of its rules'.
func (t *table) listed() bool {
	return t.hitPolicy == hitRuleOrder || t.hitPolicy == hitOutputOrder || t.hitPolicy == hitCollect && t.aggregation == ""
}

// shape is one rule's result: the value of a single output, or a context
// of the outputs by name.
func (t *table) shape(row []any) any {
	if len(t.outputs) == 1 {
		return row[0]
	}
	m := make(map[string]any, len(row))
	for i, o := range t.outputs {
		m[o.name] = row[i]
	}
	return m
}

// hit applies the hit policy to the rows of the matched rules (at least one).
func (t *table) hit(rows [][]any, matched []MatchedRule) (any, error) {
	switch t.hitPolicy {
	case hitUnique:
		if len(rows) > 1 {
			return nil, fmt.Errorf("hit policy UNIQUE: %d rules matched (%s)", len(rows), ruleIDs(matched))
		}
		return t.shape(rows[0]), nil
	case hitAny:
		for _, r := range rows[1:] {
			if !reflect.DeepEqual(r, rows[0]) {
				return nil, fmt.Errorf("hit policy ANY: the matched rules (%s) disagree", ruleIDs(matched))
			}
		}
		return t.shape(rows[0]), nil
	case hitFirst:
		return t.shape(rows[0]), nil
	case hitPriority:
		return t.shape(t.byPriority(rows)[0]), nil
	case hitOutputOrder:
		return t.list(t.byPriority(rows)), nil
	case hitRuleOrder:
		return t.list(rows), nil
	}
	if t.aggregation == "" {
		return t.list(rows), nil
	}
	return aggregate(t.aggregation, rows)
}

func (t *table) list(rows [][]any) []any {
	out := make([]any, len(rows))
	for i, r := range rows {
		out[i] = t.shape(r)
	}
	return out
}

// byPriority orders rows by their outputs' priorities, the first output
// first; a value not among an output's values ranks last. Rows of equal
// priority keep their rule order.
func (t *table) byPriority(rows [][]any) [][]any {
	rank := func(row []any, i int) int {
		for p, v := range t.outputs[i].values {
			if reflect.DeepEqual(v, row[i]) {
				return p
			}
		}
		return len(t.outputs[i].values)
	}
	sorted := append([][]any(nil), rows...)
	sort.SliceStable(sorted, func(a, b int) bool {
		for i := range t.outputs {
			if ra, rb := rank(sorted[a], i), rank(sorted[b], i); ra != rb {
				return ra < rb
			}
		}
		return false
	})
	return sorted
}

// aggregate is COLLECT with SUM, MIN, MAX or COUNT over the single output
// of rows. COUNT counts every matched rule; the others need numbers, and
// null values are left out, as feel-scala does.
func aggregate(agg string, rows [][]any) (any, error) {
	if agg == "COUNT" {
		return float64(len(rows)), nil
	}
	var acc float64
	n := 0
	for _, r := range rows {
		if r[0] == nil {
			continue
		}
		f, ok := r[0].(float64)
		if !ok {
			return nil, fmt.Errorf("hit policy COLLECT %s: an output is %T, not a number", agg, r[0])
		}
		switch {
		case n == 0:
			acc = f
		case agg == "SUM":
			acc += f
		case agg == "MIN":
			acc = min(acc, f)
		default:
			acc = max(acc, f)
		}
		n++
	}
	if n == 0 {
		return nil, nil
	}
	return acc, nil
}

func ruleIDs(m []MatchedRule) string {
	s := ""
	for i, r := range m {
		if i > 0 {
			s += ", "
		}
		s += r.ID
	}
	return s
}

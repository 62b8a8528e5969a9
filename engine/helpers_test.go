package engine

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/feel"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// doc wraps process content and root-level definitions in a Camunda Modeler
// style document.
func doc(process, defs string) string {
	return `<?xml version="1.0" encoding="UTF-8"?>
<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL"
  xmlns:zeebe="http://camunda.org/schema/zeebe/1.0"
  xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
  id="Definitions_1" targetNamespace="http://bpmn.io/schema/bpmn">
  <bpmn:process id="p" isExecutable="true">` + process + `</bpmn:process>` + defs + `
</bpmn:definitions>`
}

func parse(t testing.TB, process, defs string) *bpmn.Process {
	t.Helper()
	p, err := bpmn.Parse(strings.NewReader(doc(process, defs)))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return p
}

func parseFile(t testing.TB, name string) *bpmn.Process {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := bpmn.Parse(f)
	if err != nil {
		t.Fatalf("Parse %s: %v", name, err)
	}
	return p
}

// flow is a sequence flow between two elements.
func flow(id, from, to string) string {
	return `<bpmn:sequenceFlow id="` + id + `" sourceRef="` + from + `" targetRef="` + to + `" />`
}

// cond is a conditional sequence flow.
func cond(id, from, to, expr string) string {
	return `<bpmn:sequenceFlow id="` + id + `" sourceRef="` + from + `" targetRef="` + to +
		`"><bpmn:conditionExpression xsi:type="bpmn:tFormalExpression">` + expr + `</bpmn:conditionExpression></bpmn:sequenceFlow>`
}

// instance drives one instance through successive steps the way the step
// pipeline does: each step starts from the state the previous one committed.
type instance struct {
	t   testing.TB
	def *bpmn.Process
	in  Instance
	now time.Time
	// limits bound each evaluation (zero: the defaults).
	limits feel.Limits
	// decisions are what the business rule tasks call.
	decisions Decisions
}

func newInstance(t testing.TB, def *bpmn.Process) *instance {
	return &instance{t: t, def: def, in: Instance{ID: "i-1"}, now: t0}
}

// step applies tr, checks that the input state was left untouched and that a
// re-run gives the same result, and commits.
func (x *instance) step(tr Trigger) Effects {
	x.t.Helper()
	before := snapshot(x.t, x.in.State)
	opt := Options{Now: x.now, Limits: x.limits, Decisions: x.decisions}
	st, eff, err := StepContext(context.Background(), x.def, x.in, tr, opt)
	if err != nil {
		x.t.Fatalf("Step(%+v): %v", tr, err)
	}
	if after := snapshot(x.t, x.in.State); after != before {
		x.t.Fatalf("Step modified its input state:\nbefore %s\nafter  %s", before, after)
	}
	st2, eff2, _ := StepContext(context.Background(), x.def, x.in, tr, opt)
	if !reflect.DeepEqual(st, st2) || !reflect.DeepEqual(eff, eff2) {
		x.t.Fatalf("Step is not deterministic:\n%+v\n%+v", eff, eff2)
	}
	x.in.State = stored(x.t, st)
	x.in.Version++
	return eff
}

// stored returns st as the store reads it back: the tokens document and the
// variables through JSON, so numbers are float64 and empty lists vanish.
func stored(t testing.TB, st State) State {
	t.Helper()
	var back State
	if b, err := json.Marshal(st); err != nil || json.Unmarshal(b, &back) != nil {
		t.Fatalf("state does not survive JSON: %v", err)
	}
	if st.Variables != nil {
		b, err := json.Marshal(st.Variables)
		if err != nil || json.Unmarshal(b, &back.Variables) != nil {
			t.Fatalf("variables do not survive JSON: %v", err)
		}
	}
	back.Status = st.Status
	return back
}

// fail applies tr and returns its error, checking the state is untouched.
func (x *instance) fail(tr Trigger) error {
	x.t.Helper()
	before := snapshot(x.t, x.in.State)
	_, _, err := Step(x.def, x.in, tr, x.now)
	if err == nil {
		x.t.Fatalf("Step(%+v) succeeded, want an error", tr)
	}
	if after := snapshot(x.t, x.in.State); after != before {
		x.t.Fatalf("failed Step modified its input state:\nbefore %s\nafter  %s", before, after)
	}
	return err
}

func snapshot(t testing.TB, st State) string {
	b, err := json.Marshal(struct {
		S State
		V map[string]any
		X Status
	}{st, st.Variables, st.Status})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// token returns the live token at element, failing the test if there is not
// exactly one.
func (x *instance) token(element string) Token {
	x.t.Helper()
	var found []Token
	for _, tok := range x.in.State.Tokens {
		if tok.Element == element {
			found = append(found, tok)
		}
	}
	if len(found) != 1 {
		x.t.Fatalf("%d tokens at %s, want 1; tokens: %+v", len(found), element, x.in.State.Tokens)
	}
	return found[0]
}

// body returns the multi-instance body token at element.
func (x *instance) body(element string) Token {
	x.t.Helper()
	for _, tok := range x.in.State.Tokens {
		if tok.Element == element && tok.Wait == WaitMulti {
			return tok
		}
	}
	x.t.Fatalf("no multi-instance body at %s; tokens: %+v", element, x.in.State.Tokens)
	return Token{}
}

// at lists the live tokens as element/wait, in token order.
func (x *instance) at() []string {
	var out []string
	for _, tok := range x.in.State.Tokens {
		out = append(out, tok.Element+"/"+string(tok.Wait))
	}
	return out
}

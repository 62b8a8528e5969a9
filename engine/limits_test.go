package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/feel"
)

func script(id, expr, result string) string {
	return `<bpmn:scriptTask id="` + id + `"><bpmn:extensionElements><zeebe:script expression="` + expr +
		`" resultVariable="` + result + `" /></bpmn:extensionElements></bpmn:scriptTask>`
}

// doubling is the blowup: a context whose entries double a string
// 41 times, written out by string().
func doubling() string {
	var b strings.Builder
	b.WriteString("=string({b0: [s, s]")
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&b, ", b%d: [b%d, b%d]", i, i-1, i-1)
	}
	b.WriteString("})")
	return b.String()
}

// TestABlowupAfterATaskIsAnIncidentOnItsElementAndTheStepEnds: the
// completion of a service task runs a script that builds an exponential
// string; the step ends quickly with an incident naming the limit and the
// expression, a state the lane commits, rather than running for good.
func TestABlowupAfterATaskIsAnIncidentOnItsElementAndTheStepEnds(t *testing.T) {
	x := newInstance(t, parse(t, `<bpmn:startEvent id="S" />
<bpmn:serviceTask id="T"><bpmn:extensionElements><zeebe:taskDefinition type="t" /></bpmn:extensionElements></bpmn:serviceTask>`+
		script("Blow", doubling(), "r")+`<bpmn:endEvent id="E" />`+flow("F1", "S", "T")+flow("F2", "T", "Blow")+flow("F3", "Blow", "E"), ""))
	x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{"s": strings.Repeat("s", 40<<10)}})
	start := time.Now()
	eff := x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: x.token("T").ID, Element: "T"})
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the step took %v", took)
	}
	if len(eff.Incidents) != 1 {
		t.Fatalf("incidents = %+v, want one", eff.Incidents)
	}
	inc := eff.Incidents[0]
	if inc.Element != "Blow" || inc.Code != fault.IncidentExpressionLimit || !strings.Contains(inc.Message, "SUTRA_FEEL_MAX_") ||
		!strings.Contains(inc.Message, `"=string({b0: [s, s]`) {
		t.Errorf("incident = %.300v, want %s at Blow naming the limit and the expression", inc, fault.IncidentExpressionLimit)
	}
}

func TestTheConfiguredLimitsBoundEachEvaluation(t *testing.T) {
	def := parse(t, `<bpmn:startEvent id="S" />`+script("Loop", "=for i in 1..100 return i", "r")+`<bpmn:endEvent id="E" />`+
		flow("F1", "S", "Loop")+flow("F2", "Loop", "E"), "")
	_, eff, err := StepContext(context.Background(), def, Instance{ID: "i"}, Trigger{Kind: TriggerStart}, Options{Now: t0})
	if err != nil || len(eff.Incidents) != 0 || !eff.Completed {
		t.Fatalf("at the defaults: %+v, %v", eff, err)
	}
	_, eff, err = StepContext(context.Background(), def, Instance{ID: "i"}, Trigger{Kind: TriggerStart},
		Options{Now: t0, Limits: feel.Limits{MaxSteps: 50}})
	if err != nil || len(eff.Incidents) != 1 || eff.Incidents[0].Code != fault.IncidentExpressionLimit ||
		!strings.Contains(eff.Incidents[0].Message, feel.LimitSteps) {
		t.Fatalf("at 50 steps: %+v, %v; want an incident naming %s", eff, err, feel.LimitSteps)
	}
}

// TestAStepPastItsDeadlineStopsEveryTokenLeftInAnIncidentThatARetryRuns: the
// deadline passes during one branch's evaluation; that branch and the one
// not yet run stop in incidents (the step ends, to be committed), and a
// retry runs each again.
func TestAStepPastItsDeadlineStopsEveryTokenLeftInAnIncidentThatARetryRuns(t *testing.T) {
	x := newInstance(t, parse(t, `<bpmn:startEvent id="S" /><bpmn:parallelGateway id="P" />`+
		script("Slow", "=count(for i in 1..n, j in 1..1000 return i)", "slow")+script("Next", "=1", "next")+
		`<bpmn:endEvent id="E1" /><bpmn:endEvent id="E2" />`+flow("F1", "S", "P")+flow("F2", "P", "Slow")+flow("F3", "P", "Next")+
		flow("F4", "Slow", "E1")+flow("F5", "Next", "E2"), ""))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	st, eff, err := StepContext(ctx, x.def, x.in, Trigger{Kind: TriggerStart, Variables: map[string]any{"n": 1e5}},
		Options{Now: t0, Limits: feel.Limits{MaxSteps: 1 << 40, MaxBytes: 1 << 40}})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the step ended %v after it started, with a deadline of 50ms", took)
	}
	if len(eff.Incidents) != 2 {
		t.Fatalf("incidents = %+v, want two", eff.Incidents)
	}
	for _, inc := range eff.Incidents {
		if inc.Code != fault.IncidentExpressionLimit || !strings.Contains(inc.Message, feel.LimitDeadline) {
			t.Errorf("incident %+v does not name %s", inc, feel.LimitDeadline)
		}
	}
	if eff.Incidents[0].Element != "Slow" || eff.Incidents[1].Element != "Next" {
		t.Errorf("incidents at %s and %s, want Slow and Next", eff.Incidents[0].Element, eff.Incidents[1].Element)
	}
	x.in.State, x.in.Version = stored(t, st), x.in.Version+1
	x.step(Trigger{Kind: TriggerRetry, TokenID: x.token("Slow").ID, Variables: map[string]any{"n": 1.0}})
	if eff := x.step(Trigger{Kind: TriggerRetry, TokenID: x.token("Next").ID}); !eff.Completed {
		t.Errorf("retried, the instance did not complete: %+v", eff)
	}
}

func TestACancelledStepIsAbandonedWithAnError(t *testing.T) {
	def := parse(t, `<bpmn:startEvent id="S" />`+script("A", "=1", "a")+`<bpmn:endEvent id="E" />`+flow("F1", "S", "A")+flow("F2", "A", "E"), "")
	ctx, cancel := context.WithCancelCause(context.Background())
	stop := errors.New("stopping")
	cancel(stop)
	_, eff, err := StepContext(ctx, def, Instance{ID: "i"}, Trigger{Kind: TriggerStart}, Options{Now: t0})
	if !errors.Is(err, stop) || len(eff.Incidents) != 0 {
		t.Fatalf("StepContext = %+v, %v; want the cause as an error", eff, err)
	}
}

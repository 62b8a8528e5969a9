package lanes_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/lanes"
)

// A child's end relay that overtook an escalation relay of the child is
// retried like a transient failure (capped, requeued) with its claim
// released and nothing written, so that the parent catches the escalation
// before it applies the end.
func TestAChildsEndThatOvertookItsEscalationIsRetriedAndWritesNothing(t *testing.T) {
	t.Parallel()
	proc, err := bpmn.Parse(strings.NewReader(`<?xml version="1.0" encoding="UTF-8"?>
<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="D" targetNamespace="t">
  <bpmn:process id="parent" isExecutable="true">
    <bpmn:startEvent id="S" />
    <bpmn:callActivity id="Call"><bpmn:extensionElements><zeebe:calledElement processId="child" /></bpmn:extensionElements></bpmn:callActivity>
    <bpmn:endEvent id="E" />
    <bpmn:sequenceFlow id="F1" sourceRef="S" targetRef="Call" /><bpmn:sequenceFlow id="F2" sourceRef="Call" targetRef="E" />
  </bpmn:process>
</bpmn:definitions>`))
	if err != nil {
		t.Fatal(err)
	}
	waiting, _, err := engine.Step(proc, engine.Instance{ID: "i"}, engine.Trigger{Kind: engine.TriggerStart}, time.Now())
	if err != nil || len(waiting.Tokens) != 1 || waiting.Tokens[0].Wait != engine.WaitChild {
		t.Fatalf("parent = %+v, %v", waiting, err)
	}
	st := &fakeStore{proc: proc, waiting: waiting}
	p := newPool(t, st, nil)
	out := make(chan lanes.Result, 1)
	tok := waiting.Tokens[0].ID
	p.Dispatch(lanes.Resume{Cause: lanes.ChildEnded{InstanceID: "i", MessageID: "end:i/" + tok, Trigger: engine.Trigger{
		Kind: engine.TriggerChildCompleted, TokenID: tok, Element: "Call", Escalated: 1}},
		Done: func(o lanes.Result) { out <- o }})
	o := <-out
	if o.Kind != lanes.Retry || o.Code != fault.ChildEndEarly || o.Reason != lanes.ReasonTransient || !o.CountsAsFailure() {
		t.Fatalf("outcome = %v/%q/%q (%v), want a retry counted as a transient failure", o.Kind, o.Reason, o.Code, o.Err)
	}
	if rel := st.releases(); len(rel) != 1 || len(st.commits) != 0 {
		t.Errorf("releases %v, commits %v: the claim is released and nothing written", rel, st.commits)
	}
}

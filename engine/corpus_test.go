package engine

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/feel"
)

// TestCorpusRuns drives every process of every corpus file the parser
// accepts (bpmn/testdata/corpus) from each of its start events, resuming
// whatever it waits for (completing tasks, listeners' jobs and children with no variables,
// firing timers, sending the messages it subscribed to) for a bounded number
// of steps. A step may raise incidents (the files expect variables nobody
// gives here) but must never fail: what deploys must run. Every evaluation
// stays within 5,000 steps and 64 KiB, far under the default limits
// (docs/expressions.md says so).
func TestCorpusRuns(t *testing.T) {
	dir := filepath.Join("..", "bpmn", "testdata", "corpus")
	f, err := os.Open(filepath.Join(dir, "expected.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var files []string
	for s := bufio.NewScanner(f); s.Scan(); {
		if cols := strings.Split(s.Text(), "\t"); len(cols) == 2 && cols[1] == "accepted" {
			files = append(files, cols[0])
		}
	}
	if len(files) < 142 { // BLOCKERS.md: every Camunda 8 file Zeebe accepts
		t.Fatalf("only %d accepted corpus files", len(files))
	}
	ended := map[Status]int{}
	incidents := 0
	for _, name := range files {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		defs, err := bpmn.ParseAll(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, def := range defs {
			for _, tr := range corpusStarts(t, def) {
				t.Run(name+"/"+def.ID+"/"+tr.Element, func(t *testing.T) {
					x := newInstance(t, def)
					x.limits = feel.Limits{MaxSteps: 5000, MaxBytes: 64 << 10}
					x.step(tr)
					for range 40 {
						next, ok := x.resumption()
						if !ok {
							break
						}
						x.now = x.now.Add(5 * time.Minute)
						x.step(next)
					}
					ended[x.in.State.Status]++
					for _, tok := range x.in.State.Tokens {
						if tok.Incident != nil && tok.Incident.Code == fault.IncidentExpressionLimit {
							t.Errorf("incident at %s: %s", tok.Element, tok.Incident.Message)
						}
						if tok.Incident != nil {
							incidents++
							t.Logf("incident at %s: %s", tok.Element, tok.Incident.Message)
						}
					}
				})
			}
		}
	}
	t.Logf("runs: %d completed, %d still active, %d incidents (variables these runs do not give)", ended[StatusCompleted], ended[StatusActive], incidents)
}

// corpusStarts are the ways to start def: its none start event, each message
// start event, each signal start event and each timer start event (whose
// schedule must compute).
func corpusStarts(t *testing.T, def *bpmn.Process) []Trigger {
	var out []Trigger
	if def.Start != nil {
		out = append(out, Trigger{Kind: TriggerStart})
	}
	for _, s := range def.MessageStarts() {
		out = append(out, Trigger{Kind: TriggerStart, Element: s.ID, Message: s.Message.Name})
	}
	for _, s := range def.SignalStarts() {
		out = append(out, Trigger{Kind: TriggerStart, Element: s.ID})
	}
	for _, s := range def.TimerStarts() {
		if _, ok, err := NextStart(s, t0, 0); err != nil || !ok {
			t.Errorf("%s: NextStart(%s) = %v, %v", def.ID, s.ID, ok, err)
		}
		out = append(out, Trigger{Kind: TriggerStart, Element: s.ID})
	}
	return out
}

// resumption returns a trigger for the first wait of the instance, if any.
func (x *instance) resumption() (Trigger, bool) {
	if x.in.State.Status != StatusActive {
		return Trigger{}, false
	}
	for _, tok := range x.in.State.Tokens {
		switch tok.Wait {
		case WaitTask:
			return Trigger{Kind: TriggerTaskCompleted, TokenID: tok.ID, Element: tok.Element}, true
		case WaitListener:
			el := tok.Element
			if tok.Listener.Process {
				el = x.def.ID
			}
			return Trigger{Kind: TriggerTaskCompleted, TokenID: tok.Listener.Job, Element: el}, true
		case WaitChild:
			return Trigger{Kind: TriggerChildCompleted, TokenID: tok.ID, Element: tok.Element}, true
		case WaitAdHoc:
			if slices.ContainsFunc(tok.Armed, func(a Armed) bool { return a.Element == tok.Element }) {
				return x.adHocResult(tok), true
			}
			continue // its activations run: resume them, not its boundary events
		}
		if len(tok.Armed) > 0 {
			return x.fireArmed(tok.ID, tok.Armed[0]), true
		}
	}
	if len(x.in.State.Armed) > 0 {
		return x.fireArmed("", x.in.State.Armed[0]), true
	}
	return Trigger{}, false
}

// adHocResult completes the job of ad-hoc subprocess token tok as an AI
// agent would: the first time it activates every activity, each with an
// empty toolCall; then it says the subprocess is done.
func (x *instance) adHocResult(tok Token) Trigger {
	el := x.def.Element(tok.Element)
	first := true
	for _, t := range x.in.State.Tokens {
		first = first && t.Scope != tok.ID
	}
	if out := el.AdHoc.OutputCollection; out != "" {
		list, _ := tok.Vars[out].([]any)
		first = first && len(list) == 0
	}
	result := map[string]any{"isCompletionConditionFulfilled": true, "isCancelRemainingInstances": true}
	if first {
		var acts []any
		for _, a := range el.AdHoc.Activities {
			acts = append(acts, map[string]any{"elementId": a.Element.ID, "variables": map[string]any{"toolCall": map[string]any{}}})
		}
		result = map[string]any{"activateElements": acts}
	}
	return Trigger{Kind: TriggerTaskCompleted, TokenID: tok.ID, Element: tok.Element, Variables: map[string]any{AdHocResult: result}}
}

func (x *instance) fireArmed(token string, a Armed) Trigger {
	el := x.def.Element(a.Element)
	if el.Timer != nil {
		return Trigger{Kind: TriggerTimer, TokenID: token, Element: a.Element}
	}
	name := a.Message
	if el.Signal != nil {
		if name == "" {
			name = el.Signal.Name
		}
		return Trigger{Kind: TriggerSignal, Signal: name, TokenID: token, Element: a.Element}
	}
	if name == "" {
		name = el.Message.Name
	}
	return Trigger{Kind: TriggerMessage, Message: name, CorrelationKey: a.Key}
}

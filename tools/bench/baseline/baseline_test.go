package baseline

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/tools/bench"
)

// TestStepMatchesEngine proves that the engine runs the benchmark process's
// loop (one catch event whose flow returns to itself) one step per ping, and
// that the baseline's Step, and so its SQL, is the engine's to the byte.
func TestStepMatchesEngine(t *testing.T) {
	proc, err := bpmn.Parse(bytes.NewReader(bench.ProcessXML))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	in := engine.Instance{ID: "7"}
	state, _, err := engine.Step(proc, in, engine.Trigger{Kind: engine.TriggerStart, Variables: map[string]any{"key": "7"}}, now)
	if err != nil {
		t.Fatal(err)
	}
	for v := int64(1); v <= 3; v++ {
		in = engine.Instance{ID: "7", Version: v, State: roundTrip(t, state)}
		want, wantEff, err := engine.Step(proc, in, engine.Trigger{Kind: engine.TriggerMessage, Message: bench.Message}, now)
		if err != nil {
			t.Fatalf("ping %d: %v", v, err)
		}
		got, gotEff := Step(in.State)
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotEff, wantEff) {
			t.Fatalf("ping %d:\nbaseline %+v %+v\nengine   %+v %+v", v, got, gotEff, want, wantEff)
		}
		if len(want.Tokens) != 1 || want.Tokens[0].ID != "t"+strconv.FormatInt(v+1, 10) || want.Seq != v+1 {
			t.Fatalf("ping %d: the pgbench script assumes token t<version+1>, got %+v", v, want)
		}
		state = want
	}
	tokens, _ := json.Marshal(state)
	if want := `{"tokens":[{"id":"t4","el":"Catch","flow":"Flow_Loop","wait":"message","armed":[{"el":"Catch","key":"7"}]}],"seq":4}`; string(tokens) != want {
		t.Errorf("tokens column = %s, the pgbench script writes %s", tokens, want)
	}
}

// roundTrip stores and loads a state as the store does (variables and tokens
// as JSON), so the comparison sees what a claim loads.
func roundTrip(t *testing.T, s engine.State) engine.State {
	t.Helper()
	tokens, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	vars, err := json.Marshal(s.Variables)
	if err != nil {
		t.Fatal(err)
	}
	out := engine.State{Status: s.Status}
	if err := json.Unmarshal(tokens, &out); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(vars, &out.Variables); err != nil {
		t.Fatal(err)
	}
	return out
}

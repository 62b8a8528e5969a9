package store

import (
	"encoding/json"
	"fmt"

	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/fault"
)

// Limits of what one step may write (Options). A step past one is refused
// with fault.StepTooLarge before anything is sent: nothing is written and its
// claim is still held, for the caller to release.
const (
	// DefaultMaxVariablesBytes caps an instance's variables, as JSON.
	DefaultMaxVariablesBytes = 4 << 20
	// DefaultMaxCommitBytes caps the JSON documents one step's commit
	// writes: the instance's variables and tokens, and the payloads of its
	// effects (task inputs and headers, messages, child starts, the parent's
	// result), those of the buffered messages it applied included.
	DefaultMaxCommitBytes = 16 << 20
)

// stepDocs are the two documents of a step's commit UPDATE, encoded once for
// the statement that sends them.
type stepDocs struct {
	vars, tokens []byte
}

// encodeStep encodes c's variables and tokens and refuses c when they, or
// they with its effects' payloads, pass the store's limits.
func (s *Store) encodeStep(c StepWrites) (stepDocs, error) {
	tokens, err := json.Marshal(c.State)
	if err != nil {
		return stepDocs{}, fmt.Errorf("encoding tokens of %s: %w", c.InstanceID, err)
	}
	v := c.State.Variables
	if v == nil {
		v = map[string]any{}
	}
	vars, err := json.Marshal(v)
	if err != nil {
		return stepDocs{}, fmt.Errorf("encoding variables of %s: %w", c.InstanceID, err)
	}
	if len(vars) > s.maxVariablesBytes {
		return stepDocs{}, fault.New(fault.StepTooLarge, "the step of %s would leave its variables at %d bytes, over SUTRA_MAX_VARIABLES_BYTES (%d); nothing was written",
			c.InstanceID, len(vars), s.maxVariablesBytes)
	}
	n := len(vars) + len(tokens)
	if n <= s.maxCommitBytes {
		m := &payloadMeter{budget: s.maxCommitBytes - n}
		for _, p := range c.Earlier {
			m.effects(p.Effects)
		}
		m.effects(c.Effects)
		for _, x := range c.Consumed {
			m.effects(x.Effects)
		}
		n += m.n
	}
	if n > s.maxCommitBytes {
		return stepDocs{}, fault.New(fault.StepTooLarge, "the step of %s would write more than SUTRA_MAX_COMMIT_BYTES (%d bytes of JSON: %d of variables, %d of tokens, the rest its tasks, messages and child starts); nothing was written",
			c.InstanceID, s.maxCommitBytes, len(vars), len(tokens))
	}
	return stepDocs{vars: vars, tokens: tokens}, nil
}

// payloadMeter adds up the JSON size of effect payloads, and stops measuring
// once past its budget (a step of 4,000 large tasks is refused without
// encoding each). Its Encoder reuses encoding/json's pooled buffers: nothing
// measured is kept.
type payloadMeter struct {
	budget, n int
}

func (m *payloadMeter) Write(p []byte) (int, error) {
	m.n += len(p)
	return len(p), nil
}

// add measures v unless empty. An encoding error is left to the statement
// that sends v, which reports it with its context.
func (m *payloadMeter) add(v any, empty bool) {
	if m.n <= m.budget && !empty {
		_ = json.NewEncoder(m).Encode(v)
	}
}

func (m *payloadMeter) effects(e engine.Effects) {
	for _, t := range e.Tasks {
		m.add(t.Variables, len(t.Variables) == 0)
		m.add(t.Headers, len(t.Headers) == 0)
	}
	for _, p := range e.Publish {
		m.add(p.Variables, len(p.Variables) == 0)
	}
	for _, c := range e.StartChildren {
		m.add(c.Variables, len(c.Variables) == 0)
	}
	if p := e.NotifyParent; p != nil {
		m.add(p.Variables, len(p.Variables) == 0)
	}
}

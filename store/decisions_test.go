package store_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/store"
)

// drg is a DMN file of decision d, a literal value tagged tag.
func drg(value, tag string) []byte {
	return fmt.Appendf(nil, `<?xml version="1.0" encoding="UTF-8"?>
<definitions xmlns="https://www.omg.org/spec/DMN/20191111/MODEL/" xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="drg" name="DRG">
  <decision id="d" name="D"><extensionElements><zeebe:versionTag value="%s" /></extensionElements>
    <literalExpression><text>%s</text></literalExpression></decision>
</definitions>`, tag, value)
}

// caller is a process whose business rule tasks call d by every binding.
func caller(key string) []byte {
	task := func(id, attrs string) string {
		return `<bpmn:businessRuleTask id="` + id + `"><bpmn:extensionElements><zeebe:calledDecision decisionId="d" resultVariable="r" ` +
			attrs + ` /></bpmn:extensionElements></bpmn:businessRuleTask>`
	}
	return []byte(`<?xml version="1.0" encoding="UTF-8"?>
<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="D" targetNamespace="urn:t">
<bpmn:process id="` + key + `" isExecutable="true"><bpmn:startEvent id="S" />` +
		task("Latest", "") + task("Pinned", `bindingType="deployment"`) + task("T1", `bindingType="versionTag" versionTag="t1"`) +
		task("T2", `bindingType="versionTag" versionTag="t2"`) + task("T3", `bindingType="versionTag" versionTag="t3"`) +
		`</bpmn:process></bpmn:definitions>`)
}

func TestCalledDecisionsAreFoundByTheirBindings(t *testing.T) {
	env, ctx, st := open(t)
	early := deploy(t, st, caller("early"))[0] // before any decision: deploys all the same
	if d := deploy(t, st, drg("1", "t1")); len(d) != 1 || d[0].Kind != store.KindDMN || d[0].Key != "d" || d[0].Version != 1 || d[0].VersionTag != "t1" {
		t.Fatalf("deploy = %+v, want decision d version 1 tagged t1", d)
	}
	pinned := deploy(t, st, caller("pinned"))[0]
	deploy(t, st, drg("2", "t2"))
	if again := deploy(t, st, drg("1", "t1")); again[0].Version != 1 || again[0].Created {
		t.Errorf("redeploying version 1's bytes = %+v, want version 1 unchanged", again)
	}
	if n := env.Int(t, "SELECT count(*) FROM decisions"); n != 2 {
		t.Errorf("%d decision rows, want 2", n)
	}

	ref := func(binding, tag string) bpmn.DecisionRef {
		return bpmn.DecisionRef{DecisionID: "d", Binding: binding, VersionTag: tag}
	}
	for _, s := range []*store.Store{st, reopen(t, env)} { // parsed at deploy, and read back
		for _, tt := range []struct {
			proc    store.Deployed
			ref     bpmn.DecisionRef
			version int
		}{
			{pinned, ref(bpmn.BindingLatest, ""), 2},
			{pinned, ref(bpmn.BindingDeployment, ""), 1},
			{early, ref(bpmn.BindingDeployment, ""), 0},
			{pinned, ref(bpmn.BindingVersionTag, "t1"), 1},
			{pinned, ref(bpmn.BindingVersionTag, "t2"), 2},
			{pinned, ref(bpmn.BindingVersionTag, "t3"), 0},
		} {
			proc, err := s.Process(ctx, tt.proc.Key, tt.proc.Version)
			if err != nil {
				t.Fatal(err)
			}
			found, err := s.CalledDecisions(ctx, proc, tt.proc.Version)
			if err != nil {
				t.Fatal(err)
			}
			got := found[tt.ref]
			if got.Version != tt.version || (got.Definitions == nil) != (tt.version == 0) || (got.Missing == "") != (tt.version != 0) {
				t.Errorf("%s %+v = version %d (%q), want %d", tt.proc.Key, tt.ref, got.Version, got.Missing, tt.version)
			}
		}
	}
	latest, err := st.FindDecision(ctx, store.DecisionRef{ID: "d"})
	if err != nil || latest.Version != 2 || latest.Definitions.Decision("d").VersionTag != "t2" || latest.Keys["d"] != (store.DecisionKey{Version: 2, Key: latest.Key}) {
		t.Errorf("FindDecision(d, latest) = %+v, %v", latest, err)
	}
	if byKey, err := st.FindDecision(ctx, store.DecisionRef{Key: latest.Key}); err != nil || byKey.ID != "d" || byKey.Version != 2 || byKey.DRG.Key == 0 {
		t.Errorf("FindDecision(key %d) = %+v, %v", latest.Key, byKey, err)
	}
	if _, err := st.FindDecision(ctx, store.DecisionRef{ID: "d", Version: 3}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("FindDecision(d, 3) = %v, want ErrNotFound", err)
	}
	if _, err := st.FindDecision(ctx, store.DecisionRef{Key: 1 << 62}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("FindDecision(key 2^62) = %v, want ErrNotFound", err)
	}
	if xml, err := st.DecisionXML(ctx, "d", 1); err != nil || !strings.Contains(xml, "t1") {
		t.Errorf("DecisionXML(d, 1) = %.80q, %v", xml, err)
	}
}

func deploy(t *testing.T, st *store.Store, doc []byte) []store.Deployed {
	t.Helper()
	d, err := st.Deploy(t.Context(), doc)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// reopen is a second store on env's schema that has parsed nothing yet.
func reopen(t *testing.T, env *testkit.Env) *store.Store {
	t.Helper()
	st, err := store.Open(testkit.Ctx(t), env.Config.DatabaseURL, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}

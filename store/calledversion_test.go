package store_test

import (
	"strings"
	"testing"

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/fault"
)

// file holds processes, each a start event only, the first tagged tag.
func file(tag string, keys ...string) []byte {
	doc := `<?xml version="1.0" encoding="UTF-8"?>
<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="D" targetNamespace="urn:t">`
	for i, k := range keys {
		ext := ""
		if i == 0 && tag != "" {
			ext = `<bpmn:extensionElements><zeebe:versionTag value="` + tag + `" /></bpmn:extensionElements>`
		}
		doc += `<bpmn:process id="` + k + `" isExecutable="true">` + ext + `<bpmn:startEvent id="S" /></bpmn:process>`
	}
	return []byte(doc + `</bpmn:definitions>`)
}

func TestCalledVersionFollowsTheCallsBinding(t *testing.T) {
	env, ctx, st := open(t)
	deploy(t, st, file("stable", "callee", "parent")) // callee 1, beside parent 1
	deploy(t, st, file("next", "callee"))             // callee 2
	deploy(t, st, file("stable", "callee", "other"))  // callee 3, tagged stable too
	deploy(t, st, file("", "callee"))                 // callee 4, untagged
	if _, err := env.DB.Exec(ctx, `INSERT INTO instances (id, definition_key, definition_version, status) VALUES ('p-1', 'parent', 1, 'active')`); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		binding, tag string
		want         int
	}{
		{bpmn.BindingDeployment, "", 1}, // the parent's own file, not the latest
		{bpmn.BindingVersionTag, "next", 2},
		{bpmn.BindingVersionTag, "stable", 3}, // the latest of the tag
	} {
		if v, err := st.CalledVersion(ctx, "callee", tt.binding, tt.tag, "p-1"); err != nil || v != tt.want {
			t.Errorf("%s %q: version %d, %v; want %d", tt.binding, tt.tag, v, err, tt.want)
		}
	}
	for _, tt := range []struct{ key, binding, tag, want string }{
		{"other", bpmn.BindingDeployment, "", "not deployed in the same deployment"},
		{"callee", bpmn.BindingVersionTag, "nope", `no version of process "callee" tagged "nope"`},
	} {
		_, err := st.CalledVersion(ctx, tt.key, tt.binding, tt.tag, "p-1")
		if !fault.HasCode(err, fault.UnknownDefinition) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s %s: err = %v, want %s saying %q", tt.key, tt.binding, err, fault.UnknownDefinition, tt.want)
		}
	}
	// A version stored before tags were (the migration leaves them NULL)
	// takes its tag when its file is deployed again.
	if _, err := env.DB.Exec(ctx, `UPDATE definitions SET version_tag = NULL WHERE key = 'callee' AND version = 1`); err != nil {
		t.Fatal(err)
	}
	if again := deploy(t, st, file("stable", "callee", "parent")); again[0].Version != 1 || again[0].Created {
		t.Fatalf("redeploy = %+v", again)
	}
	if n := env.Int(t, "SELECT count(*) FROM definitions WHERE key = 'callee' AND version = 1 AND version_tag = 'stable'"); n != 1 {
		t.Error("the redeployed version did not take its tag")
	}
}

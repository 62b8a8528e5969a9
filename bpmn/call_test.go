package bpmn

import (
	"strings"
	"testing"

	"github.com/sutra-run/worker/fault"
)

func TestParseCallActivityBindings(t *testing.T) {
	call := func(attrs string) string {
		return doc(`<bpmn:extensionElements><zeebe:versionTag value="v2.1" /></bpmn:extensionElements><bpmn:startEvent id="S" />
			<bpmn:callActivity id="C"><bpmn:extensionElements><zeebe:calledElement processId="child" `+attrs+` /></bpmn:extensionElements></bpmn:callActivity>`, "")
	}
	for attrs, want := range map[string][2]string{
		``:                                    {BindingLatest, ""},
		`bindingType="latest" versionTag="x"`: {BindingLatest, ""},
		`bindingType="deployment"`:            {BindingDeployment, ""},
		`bindingType="versionTag" versionTag="v1"`: {BindingVersionTag, "v1"},
	} {
		p := mustParse(t, call(attrs))
		if c := p.Element("C").Call; c.Binding != want[0] || c.VersionTag != want[1] {
			t.Errorf("%s: binding %q tag %q, want %v", attrs, c.Binding, c.VersionTag, want)
		}
		if p.VersionTag != "v2.1" {
			t.Errorf("process version tag = %q", p.VersionTag)
		}
	}
	for attrs, want := range map[string]string{
		`bindingType="versionTag"`: `bindingType versionTag and no versionTag`,
		`bindingType="newest"`:     `unknown bindingType "newest"`,
	} {
		_, err := Parse(strings.NewReader(call(attrs)))
		if !fault.HasCode(err, fault.BPMNInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %s", attrs, err, want)
		}
	}
}

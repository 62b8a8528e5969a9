package bpmn

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/sutra-run/worker/fault"
)

// FuzzParse checks that no input makes Parse panic or fail without a code,
// and that whatever it accepts is internally consistent.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("..", "examples", "*.bpmn"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(doc(`<bpmn:startEvent id="S" /><bpmn:subProcess id="Sub"><bpmn:startEvent id="SS" /></bpmn:subProcess>`+
		`<bpmn:sequenceFlow id="F" sourceRef="S" targetRef="Sub" />`, msgDefs)))
	f.Fuzz(func(t *testing.T, src []byte) {
		p, err := Parse(bytes.NewReader(src))
		if err != nil {
			if fault.Code(err) == "" {
				t.Fatalf("error without a code: %v", err)
			}
			return
		}
		if p.Start == nil || p.Start.Kind != KindStart || p.Element(p.Start.ID) != p.Start {
			t.Fatalf("accepted a process without its start event: %+v", p.Start)
		}
		for _, el := range p.Elements() {
			for _, fl := range el.Outgoing {
				if fl.Source != el || fl.Target == nil || fl.Target.Parent != el.Parent {
					t.Fatalf("flow %s is inconsistent", fl.ID)
				}
			}
			if el.Kind == KindSubProcess && (el.SubStart == nil || el.SubStart.Parent != el) {
				t.Fatalf("subprocess %s has no start of its own", el.ID)
			}
		}
	})
}

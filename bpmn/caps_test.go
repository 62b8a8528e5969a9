package bpmn

import (
	"runtime"
	"strings"
	"testing"

	"github.com/sutra-run/worker/fault"
)

func TestADocumentPastTheParsersCapsIsRefusedNamingTheCap(t *testing.T) {
	// 500,000 levels in 3.5 MB: the tree of it held 256 MB.
	deep := doc(strings.Repeat("<x:a xmlns:x='urn:x'>", 500_000)+strings.Repeat("</x:a>", 500_000), "")
	many := doc(strings.Repeat("<x:b xmlns:x='urn:x'/>", MaxElements), "")
	for _, tt := range []struct {
		name, src, cap string
	}{
		{"deep", deep, "bpmn.MaxDepth"},
		{"many", many, "bpmn.MaxElements"},
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := ParseAll(strings.NewReader(tt.src))
		runtime.ReadMemStats(&after)
		if fault.Code(err) != fault.BPMNInvalid || !strings.Contains(err.Error(), tt.cap) {
			t.Errorf("%s: err = %v, want %s naming %s", tt.name, err, fault.BPMNInvalid, tt.cap)
		}
		// The refusal comes as the cap is reached, before the rest is read.
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
			t.Errorf("%s: refusing the document allocated %d MB", tt.name, grew>>20)
		}
	}
	// A file at the caps' edges parses.
	edge := doc(`<bpmn:startEvent id="S" />`+strings.Repeat("<x:a xmlns:x='urn:x'>", MaxDepth-2)+strings.Repeat("</x:a>", MaxDepth-2), "")
	if _, err := ParseAll(strings.NewReader(edge)); err != nil {
		t.Errorf("a document %d deep: %v", MaxDepth, err)
	}
}

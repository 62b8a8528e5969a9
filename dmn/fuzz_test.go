package dmn

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/feel"
)

// FuzzParse checks that no input makes Parse panic or fail without a DMN
// code, and that every decision of what it accepts evaluates, under small
// limits, to a result or an error with a code.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "tck", "compliance-level-2", "*", "*.dmn"))
	modeler, _ := filepath.Glob(filepath.Join("testdata", "*.dmn"))
	files = append(files, modeler...)
	// Decision services, item definitions as types, function values.
	for _, dir := range []string{"0085-decision-services", "0092-feel-lambda", "0070-feel-instance-of"} {
		more, _ := filepath.Glob(filepath.Join("testdata", "tck", "compliance-level-3", dir, "*.dmn"))
		files = append(files, more...)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(doc(drg)))
	f.Add([]byte(tableDoc(`hitPolicy="COLLECT" aggregation="SUM"`, []string{oneOut}, `? > 1|1`, `not(1, [2..3])|2`)))
	f.Fuzz(func(t *testing.T, src []byte) {
		d, err := Parse(bytes.NewReader(src))
		if err != nil {
			if c := fault.Code(err); c != fault.DMNInvalid && c != fault.DMNUnsupported {
				t.Fatalf("error with code %q: %v", c, err)
			}
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		opts := Options{Env: feel.Env{Limits: feel.Limits{MaxSteps: 10000, MaxBytes: 1 << 16}}}
		for _, dec := range d.Decisions {
			res, err := d.Evaluate(ctx, dec.ID, map[string]any{"x": 1.0}, opts)
			if err != nil {
				if c := fault.Code(err); c != fault.IncidentDecisionFailed && c != fault.IncidentExpressionLimit {
					t.Fatalf("decision %q: error with code %q: %v", dec.ID, c, err)
				}
				continue
			}
			if last := res.Decisions[len(res.Decisions)-1]; last.ID != dec.ID {
				t.Fatalf("decision %q: the last result is %q's", dec.ID, last.ID)
			}
		}
	})
}

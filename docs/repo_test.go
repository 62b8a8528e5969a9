package docs_test

import (
	"bytes"
	"os"
	"testing"
)

// The repository's documents and history in the shape a reader can scan.

// BENCHMARKS.md is today's method, figures and targets, not a notebook: the
// runs behind a figure belong in the commit that records it (issue 42).
func TestBenchmarksStaysWithinThreeHundredLines(t *testing.T) {
	t.Parallel()
	text, err := os.ReadFile("../BENCHMARKS.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(text, []byte("\n")); n > 300 {
		t.Errorf("BENCHMARKS.md has %d lines, over 300: move dated runs and superseded figures into commit messages", n)
	}
}

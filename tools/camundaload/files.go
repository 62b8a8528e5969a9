package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Files are Camunda's realistic load-test resources, which this repository
// does not hold (they are camunda/camunda's): the benchmark reads them from
// a directory given by -files or SUTRA_CAMUNDA_LOAD_FILES.
var Files = []string{
	"bankCustomerComplaintDisputeHandling.bpmn",
	"refundingProcess.bpmn",
	"determineFraudRatingConfidence.dmn",
	"realisticPayload.json",
}

// layouts are where under the given directory the files may be: flat, or
// as in camunda/camunda's load-tester resources or the repository itself.
var layouts = []string{".", "bpmn/realistic", "load-tests/load-tester/src/main/resources/bpmn/realistic"}

// errNoFiles is wrapped by findFiles when a file is missing.
var errNoFiles = errors.New("Camunda's realistic load-test files are missing")

// findFiles returns the directory under dir that holds every one of Files,
// or an error wrapping errNoFiles that names what is missing where.
func findFiles(dir string) (string, error) {
	var missing []string
	for _, l := range layouts {
		d := filepath.Join(dir, l)
		missing = missing[:0]
		for _, f := range Files {
			if st, err := os.Stat(filepath.Join(d, f)); err != nil || st.IsDir() {
				missing = append(missing, f)
			}
		}
		if len(missing) == 0 {
			return d, nil
		}
		if len(missing) < len(Files) {
			// Some are here: name what is missing in this place.
			return "", fmt.Errorf("%w: %s holds some but not %s", errNoFiles, d, strings.Join(missing, ", "))
		}
	}
	return "", fmt.Errorf("%w: %s holds none of %s (flat, or under bpmn/realistic/): copy them there from camunda/camunda's "+
		"load-tests/load-tester/src/main/resources/bpmn/realistic/, or give their directory with -files or SUTRA_CAMUNDA_LOAD_FILES",
		errNoFiles, dir, strings.Join(Files, ", "))
}

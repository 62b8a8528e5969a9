package bpmn_test

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/fault"
)

// The corpus is real BPMN files from public repositories (testdata/corpus,
// provenance in SOURCES.md). expected.tsv records what Parse does with each
// one today, so that a change of outcome, for better or worse, is noticed.
var updateCorpus = flag.Bool("update-corpus", false,
	"rewrite testdata/corpus/expected.tsv from the current parser")

const (
	corpusDir      = "testdata/corpus"
	corpusExpected = "expected.tsv"
	corpusSources  = "SOURCES.md"

	outcomeAccepted = "accepted"
	outcomeRefused  = "refused"
	noElement       = "-"
)

const corpusHeader = `# Outcome of bpmn.ParseAll (what a deploy reads) for each file of this corpus, checked by TestCorpus.
# Columns (tab-separated): file, outcome (accepted or refused), and for a refused
# file the fault code and the element id the error names ("-" if it names none).
# After a parser change, regenerate with: go test ./bpmn -run TestCorpus -update-corpus
`

// corpusOutcome is what Parse did with one file. Msg is informative only:
// expectations compare the outcome, the code and the element id.
type corpusOutcome struct {
	Outcome, Code, Element string
	Msg                    string
}

func (o corpusOutcome) key() string {
	if o.Outcome == outcomeAccepted {
		return outcomeAccepted
	}
	return fmt.Sprintf("%s %s at %s", o.Outcome, o.Code, o.Element)
}

func (o corpusOutcome) String() string {
	if o.Msg == "" {
		return o.key()
	}
	return o.key() + ": " + o.Msg
}

func TestCorpus(t *testing.T) {
	files := readCorpus(t)
	checkCorpusHygiene(t, files)

	if *updateCorpus {
		writeCorpusExpectations(t, files)
	} else {
		expected := readCorpusExpectations(t)
		names := map[string]bool{}
		changed := false
		for _, f := range files {
			names[f.name] = true
			want, ok := expected[f.name]
			switch {
			case !ok:
				t.Errorf("%s: corpus file has no line in %s (add one, or run go test ./bpmn -run TestCorpus -update-corpus)",
					f.name, corpusExpected)
			case f.outcome.key() != want.key():
				changed = true
				t.Errorf("%s: outcome changed\n\texpected: %s\n\tactual:   %s", f.name, want, f.outcome)
			}
		}
		if changed {
			t.Log("if the changes are intended (a feature landed), run go test ./bpmn -run TestCorpus -update-corpus " +
				"and update testdata/corpus/BLOCKERS.md")
		}
		for _, name := range slices.Sorted(maps.Keys(expected)) {
			if !names[name] {
				t.Errorf("%s: %s has an expectation for a file that is not in %s", name, corpusExpected, corpusDir)
			}
		}
	}

	accepted, c8, c8Accepted := 0, 0, 0
	for _, f := range files {
		ok := f.outcome.Outcome == outcomeAccepted
		if ok {
			accepted++
		}
		if !f.camunda7() {
			c8++
			if ok {
				c8Accepted++
			}
		}
	}
	t.Logf("corpus: %d of %d files accepted (%.0f%%)", accepted, len(files), percent(accepted, len(files)))
	t.Logf("corpus: %d of %d Camunda 8 files accepted (%.0f%%)", c8Accepted, c8, percent(c8Accepted, c8))
}

func percent(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return 100 * float64(n) / float64(of)
}

// corpusFile is one file of the corpus and what Parse did with it.
type corpusFile struct {
	name    string
	data    []byte
	outcome corpusOutcome
}

// readCorpus reads and parses every .bpmn file of the corpus, sorted by name.
func readCorpus(t *testing.T) []corpusFile {
	t.Helper()
	entries, err := os.ReadDir(corpusDir)
	if err != nil {
		t.Fatal(err)
	}
	var files []corpusFile
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".bpmn") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(corpusDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		o := corpusOutcome{Outcome: outcomeAccepted}
		if _, err := bpmn.ParseAll(bytes.NewReader(data)); err != nil {
			o = refusal(err)
		}
		files = append(files, corpusFile{name: e.Name(), data: data, outcome: o})
	}
	if len(files) == 0 {
		t.Fatalf("no .bpmn files in %s", corpusDir)
	}
	return files
}

// refusal describes a Parse error: its code and the element id it names.
func refusal(err error) corpusOutcome {
	o := corpusOutcome{Outcome: outcomeRefused, Code: fault.Code(err), Element: noElement, Msg: fault.Reason(err)}
	if o.Code == "" {
		o.Code = noElement
	}
	var fe *fault.Error
	if errors.As(err, &fe) {
		o.Element = elementID(fe.Msg)
	}
	return o
}

// elementID returns the first double-quoted string of a fault message, which
// is the element the parser names: `element "Gateway_1" (inclusiveGateway) is
// not supported`, `serviceTask "Task_1" has no zeebe:taskDefinition`,
// `condition of "Flow_1": "..."`. It reads the fault's own message only, not
// the wrapped cause (a FEEL or XML error quoting source text), and returns "-"
// when there is no quoted string or the first one cannot be an id (it is
// empty or holds white space).
func elementID(msg string) string {
	i := strings.IndexByte(msg, '"')
	if i < 0 {
		return noElement
	}
	q, err := strconv.QuotedPrefix(msg[i:])
	if err != nil {
		return noElement
	}
	id, err := strconv.Unquote(q)
	if err != nil || id == "" || strings.ContainsAny(id, " \t\n") {
		return noElement
	}
	return id
}

// checkCorpusHygiene checks what holds whatever the parser supports: each
// file is Camunda 8 or Camunda 7, a Camunda 7 file is never accepted, and
// SOURCES.md names every file (provenance and licence).
func checkCorpusHygiene(t *testing.T, files []corpusFile) {
	t.Helper()
	sources, err := os.ReadFile(filepath.Join(corpusDir, corpusSources))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !f.camunda8() && !f.camunda7() {
			t.Errorf("%s: neither a Camunda 8 (Zeebe) nor a Camunda 7 file; the corpus holds only those", f.name)
		}
		if f.camunda7() && f.outcome.Outcome == outcomeAccepted {
			t.Errorf("%s: a Camunda 7 file was accepted; it must be refused", f.name)
		}
		if !bytes.Contains(sources, []byte("`"+f.name+"`")) {
			t.Errorf("%s: not listed in %s; name its repository, path, commit and licence there", f.name, corpusSources)
		}
	}
}

const (
	nsZeebe    = "http://camunda.org/schema/zeebe/1.0"
	nsCamunda7 = "http://camunda.org/schema/1.0/bpmn"
)

// camunda8 reports whether the file is written for Camunda 8: it declares the
// Zeebe namespace or Camunda Modeler's Camunda Cloud execution platform.
func (f corpusFile) camunda8() bool {
	return bytes.Contains(f.data, []byte(nsZeebe)) || bytes.Contains(f.data, []byte(`executionPlatform="Camunda Cloud"`))
}

// camunda7 reports whether the file is written for Camunda 7: the Camunda 7
// namespace without any sign of Camunda 8 (files saved by Web Modeler for
// Camunda 8 may declare the Camunda 7 namespace too).
func (f corpusFile) camunda7() bool {
	return bytes.Contains(f.data, []byte(nsCamunda7)) && !f.camunda8()
}

func readCorpusExpectations(t *testing.T) map[string]corpusOutcome {
	t.Helper()
	f, err := os.Open(filepath.Join(corpusDir, corpusExpected))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	expected := map[string]corpusOutcome{}
	s := bufio.NewScanner(f)
	for n := 1; s.Scan(); n++ {
		line := s.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cols := strings.Split(line, "\t")
		var o corpusOutcome
		switch {
		case len(cols) == 2 && cols[1] == outcomeAccepted:
			o = corpusOutcome{Outcome: outcomeAccepted}
		case len(cols) == 4 && cols[1] == outcomeRefused && cols[2] != "" && cols[3] != "":
			o = corpusOutcome{Outcome: outcomeRefused, Code: cols[2], Element: cols[3]}
		default:
			t.Errorf("%s:%d: want file<TAB>accepted or file<TAB>refused<TAB>code<TAB>element, got %q", corpusExpected, n, line)
			continue
		}
		if _, dup := expected[cols[0]]; dup {
			t.Errorf("%s:%d: second line for %s", corpusExpected, n, cols[0])
		}
		expected[cols[0]] = o
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return expected
}

func writeCorpusExpectations(t *testing.T, files []corpusFile) {
	t.Helper()
	var b strings.Builder
	b.WriteString(corpusHeader)
	for _, f := range files {
		if o := f.outcome; o.Outcome == outcomeAccepted {
			fmt.Fprintf(&b, "%s\t%s\n", f.name, o.Outcome)
		} else {
			fmt.Fprintf(&b, "%s\t%s\t%s\t%s\n", f.name, o.Outcome, o.Code, o.Element)
		}
	}
	if err := os.WriteFile(filepath.Join(corpusDir, corpusExpected), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("rewrote %s/%s for %d files", corpusDir, corpusExpected, len(files))
}

func TestCorpusElementID(t *testing.T) {
	tests := []struct{ msg, want string }{
		{`element "Gateway_1" (inclusiveGateway) is not supported`, "Gateway_1"},
		{`element "Task_1" (userTask): extension zeebe:formDefinition is not supported`, "Task_1"},
		{`serviceTask "Task_1" has no zeebe:taskDefinition`, "Task_1"},
		{`condition of "Flow_1": "=x > \"a b\""`, "Flow_1"},
		{`the file holds 2 executable processes ("a", "b"); deploy one per file`, "a"},
		{`reading BPMN XML`, noElement},
		{`timer "" has an empty timeDuration`, noElement},
		{`mapping of "broken`, noElement},
	}
	for _, tt := range tests {
		if got := elementID(tt.msg); got != tt.want {
			t.Errorf("elementID(%q) = %q, want %q", tt.msg, got, tt.want)
		}
	}
}

package docs_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"unicode/utf8"
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

// historyStart is the last commit before commit messages were checked: the
// history up to it is published and cannot be rewritten (issue 42).
const historyStart = "2cd8276"

// TestNewCommitsHaveAShortSubjectAndABody reads every commit after
// historyStart: a subject of at most 72 characters says what changed, and a
// body says why (CONTRIBUTING.md). A clone without that commit (a shallow
// one, an export without .git) has nothing to check.
func TestNewCommitsHaveAShortSubjectAndABody(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not found")
	}
	if err := exec.Command("git", "cat-file", "-e", historyStart+"^{commit}").Run(); err != nil {
		t.Skipf("this clone lacks commit %s: nothing to compare with", historyStart)
	}
	out, err := exec.Command("git", "log", historyStart+"..HEAD", "--no-merges", "--format=%h%x00%s%x00%b%x1e").Output()
	if err != nil {
		t.Fatalf("git log: %v", err)
	}
	for _, problem := range commitProblems(string(out)) {
		t.Error(problem)
	}
}

// commitProblems checks the records of git log --format=%h%x00%s%x00%b%x1e.
func commitProblems(log string) []string {
	var problems []string
	for _, record := range strings.Split(log, "\x1e") {
		fields := strings.SplitN(strings.TrimLeft(record, "\n"), "\x00", 3)
		if len(fields) != 3 {
			continue // the newline after the last record
		}
		hash, subject, body := fields[0], fields[1], fields[2]
		if n := utf8.RuneCountInString(subject); n > 72 {
			problems = append(problems, fmt.Sprintf("%s: a subject of %d characters, over 72: %s", hash, n, subject))
		}
		if strings.TrimSpace(body) == "" {
			problems = append(problems, fmt.Sprintf("%s: no body saying why: %s", hash, subject))
		}
	}
	return problems
}

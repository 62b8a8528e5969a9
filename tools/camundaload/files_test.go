package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func place(t *testing.T, dir string, names ...string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFindFilesFlatOrAsInCamundasRepository(t *testing.T) {
	flat := t.TempDir()
	place(t, flat, Files...)
	if d, err := findFiles(flat); err != nil || d != flat {
		t.Fatalf("flat: %q, %v", d, err)
	}
	nested := t.TempDir()
	place(t, filepath.Join(nested, "bpmn", "realistic"), Files...)
	if d, err := findFiles(nested); err != nil || d != filepath.Join(nested, "bpmn", "realistic") {
		t.Fatalf("under bpmn/realistic: %q, %v", d, err)
	}
}

func TestFindFilesSaysWhatIsMissingWhere(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "absent")
	_, err := findFiles(empty)
	if !errors.Is(err, errNoFiles) || !strings.Contains(err.Error(), empty) || !strings.Contains(err.Error(), "SUTRA_CAMUNDA_LOAD_FILES") {
		t.Fatalf("no directory: %v", err)
	}
	some := t.TempDir()
	place(t, some, Files[:2]...)
	_, err = findFiles(some)
	if !errors.Is(err, errNoFiles) || !strings.Contains(err.Error(), Files[2]) || strings.Contains(err.Error(), Files[0]+",") {
		t.Fatalf("some files: %v", err)
	}
}

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRealisticRunsUnchanged drives the worker binary with Camunda's files
// for 10 s at 1 root/s, as make bench-camunda does, and checks that every
// root started completes with its 50 refunding children and nothing ends
// otherwise. Skipped when the files are not there (they are not this
// repository's: SUTRA_CAMUNDA_LOAD_FILES, default ../shared/camunda-load-tests
// beside the repository) or the Node SDK is not installed
// (scripts/node-deps.sh).
func TestRealisticRunsUnchanged(t *testing.T) {
	files, err := findFiles(envOr("SUTRA_CAMUNDA_LOAD_FILES", "../../../shared/camunda-load-tests"))
	if err != nil {
		t.Skip(err)
	}
	if _, err := os.Stat("testdata/camunda8-js/node_modules/@camunda8/sdk"); err != nil {
		t.Skip("Camunda's Node SDK is not installed (scripts/node-deps.sh)")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("no node")
	}
	bin := filepath.Join(t.TempDir(), "worker")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/worker").CombinedOutput(); err != nil {
		t.Fatalf("building the worker: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	o := options{files: files, worker: bin, node: "node", script: "testdata/camunda8-js/load.mjs",
		db:       envOr("SUTRA_BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/sutra_camundaload"),
		amqp:     envOr("SUTRA_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/"),
		duration: 10 * time.Second, drain: 2 * time.Minute, sample: time.Second}
	r, err := runRate(ctx, o, 1)
	if err != nil {
		t.Fatal(err)
	}
	last := r.samples[len(r.samples)-1]
	if r.rootsIn < 5 || last.rootsDone != last.roots || last.rootsActive != 0 {
		t.Fatalf("roots: %d started in the window; at the end %d started, %d completed, %d active", r.rootsIn, last.roots, last.rootsDone, last.rootsActive)
	}
	if last.children != 50*last.roots || last.childDone != last.children || last.other != 0 || last.jobs != 0 {
		t.Fatalf("at the end: %+v", last)
	}
	// A completion refused NOT_FOUND is of a job that outlived Camunda's
	// 1.8 s timeout (a busy machine) and was completed by its next
	// activation, which the counts above saw through; anything else is not.
	for _, e := range r.clientErrors {
		if !strings.HasPrefix(e, "complete ") || !strings.Contains(e, "NOT_FOUND") {
			t.Errorf("the client's error: %s", e)
		}
	}
}

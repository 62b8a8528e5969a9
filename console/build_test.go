package console_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// consoleBuild is one run of scripts/console.sh on a copy of the console's
// sources, made once for the tests that read it.
type consoleBuild struct {
	root   string // the copy: scripts/, console/web, console/dist
	spawns string // every command line a node process of the build spawned
	err    error
	output []byte
}

var (
	buildOnce sync.Once
	build     consoleBuild
)

// buildConsole runs scripts/console.sh (a fresh npm ci and the bundle) on a
// copy of the tree, as CI and the Dockerfile do: with CI=true, under which
// @ibm/telemetry-js would start its background process, and with whatever
// IBM_TELEMETRY_DISABLED the caller has removed, so that only the script's
// own setting counts. testdata/spawnlog.cjs records what node spawns.
func buildConsole(t *testing.T) consoleBuild {
	t.Helper()
	if testing.Short() {
		t.Skip("a console build (npm ci) takes about 20 s")
	}
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("npm not found")
	}
	buildOnce.Do(func() {
		root, err := os.MkdirTemp("", "console-build-")
		if err != nil {
			build.err = err
			return
		}
		build.root = root
		for _, p := range []string{"scripts/console.sh", "console/web/package.json", "console/web/package-lock.json",
			"console/web/index.html", "console/web/favicon.ico", "console/web/src", "console/web/notices.mjs"} {
			cp := exec.Command("cp", "-r", "--parents", p, root)
			cp.Dir = ".." // the repository
			if out, err := cp.CombinedOutput(); err != nil {
				build.err, build.output = err, out
				return
			}
		}
		hook, err := filepath.Abs("testdata/spawnlog.cjs")
		if err != nil {
			build.err = err
			return
		}
		log := filepath.Join(root, "spawns.log")
		cmd := exec.Command(filepath.Join(root, "scripts/console.sh"))
		cmd.Dir = root
		cmd.Env = append(environWithout("IBM_TELEMETRY_DISABLED", "NODE_OPTIONS", "CI"),
			"CI=true", "SPAWN_LOG="+log, "NODE_OPTIONS=--require "+hook)
		build.output, build.err = cmd.CombinedOutput()
		spawns, _ := os.ReadFile(log)
		build.spawns = string(spawns)
	})
	if build.err != nil {
		t.Fatalf("scripts/console.sh on a copy: %v\n%s", build.err, build.output)
	}
	return build
}

func TestMain(m *testing.M) {
	code := m.Run()
	if build.root != "" {
		os.RemoveAll(build.root)
	}
	os.Exit(code)
}

func environWithout(names ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		keep := true
		for _, n := range names {
			if name == n {
				keep = false
			}
		}
		if keep {
			env = append(env, kv)
		}
	}
	return env
}

func TestTheConsoleBuildStartsNoTelemetry(t *testing.T) {
	b := buildConsole(t)
	// The recorder works and the packages that carry telemetry ran their
	// install script: otherwise an empty record would prove nothing.
	if !strings.Contains(b.spawns, "ibmtelemetry --config=telemetry.yml") {
		t.Fatalf("no install script of @carbon/grid or @carbon/layout was recorded; spawns:\n%s", b.spawns)
	}
	for _, line := range strings.Split(b.spawns, "\n") {
		if strings.Contains(line, "@ibm/telemetry-js") {
			t.Errorf("the console build started a telemetry process: %s", line)
		}
	}
}

// TestTheThirdPartyNoticeListsEveryBundledPackage reads esbuild's own list of
// what went into the bundle (its metafile) and finds each npm package in it,
// by name and version, in the notice, with a licence.
func TestTheThirdPartyNoticeListsEveryBundledPackage(t *testing.T) {
	b := buildConsole(t)
	web := filepath.Join(b.root, "console/web")
	raw, err := os.ReadFile(filepath.Join(web, "node_modules/.esbuild-meta.json"))
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Inputs map[string]json.RawMessage `json:"inputs"`
	}
	if err := json.Unmarshal(raw, &meta); err != nil {
		t.Fatal(err)
	}
	notice, err := os.ReadFile(filepath.Join(b.root, "console/dist/third-party-notices.txt"))
	if err != nil {
		t.Fatal(err)
	}
	packages := map[string]bool{}
	for input := range meta.Inputs {
		parts := strings.Split(input, "/")
		at := -1
		for i, p := range parts {
			if p == "node_modules" {
				at = i
			}
		}
		if at < 0 {
			continue // the console's own source
		}
		n := 2
		if strings.HasPrefix(parts[at+1], "@") {
			n = 3
		}
		dir := filepath.Join(append([]string{web}, parts[:at+n]...)...)
		var pkg struct{ Name, Version string }
		raw, err := os.ReadFile(filepath.Join(dir, "package.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &pkg); err != nil {
			t.Fatal(err)
		}
		packages[pkg.Name+"@"+pkg.Version] = true
	}
	for _, want := range []string{"bpmn-js@", "dmn-js-decision-table@", "@bpmn-io/form-js-viewer@", "diagram-js@", "preact@"} {
		found := false
		for p := range packages {
			found = found || strings.HasPrefix(p, want)
		}
		if !found {
			t.Errorf("the metafile lists no %s package: is the bundle built from it?", want)
		}
	}
	text := string(notice)
	for p := range packages {
		at := strings.Index(text, "\n"+p+"\n")
		if at < 0 {
			t.Errorf("the third-party notice has no entry for %s", p)
			continue
		}
		entry := text[at+len(p)+2:]
		if !strings.HasPrefix(entry, "License: ") || strings.HasPrefix(entry, "License: UNKNOWN") {
			t.Errorf("the notice's entry for %s declares no licence: %.80q", p, entry)
		}
	}
	t.Logf("%d packages in the bundle; the notice: %d bytes", len(packages), len(notice))
}

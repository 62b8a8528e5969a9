package console_test

import (
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
			"console/web/index.html", "console/web/src"} {
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

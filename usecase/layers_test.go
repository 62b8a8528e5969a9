package usecase_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/sutra-run/worker/"

// protocols are the packages that speak a protocol, each with the packages
// that are its own (its wire types).
var protocols = map[string][]string{
	"api/tasks": {"api/tasks"},
	"api/admin": {"api/admin", "api/admin/wire"},
	"api/zeebe": {"api/zeebe"},
}

// deps lists the packages of the module that pkg imports. (Directly: every
// package that imports the store still reaches api/admin/wire through it,
// the exception below.)
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", `{{join .Imports " "}}`, module+pkg).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", pkg, err)
	}
	var ds []string
	for _, p := range strings.Fields(string(out)) {
		if rest, ok := strings.CutPrefix(p, module); ok && rest != pkg {
			ds = append(ds, rest)
		}
	}
	return ds
}

// TestNoProtocolImportsAnotherAndTheLayersBelowImportNone checks the
// layering of docs/design.md: the protocols translate, the use cases act.
// No protocol package imports another's; neither the use cases nor the
// store imports any protocol's.
func TestNoProtocolImportsAnotherAndTheLayersBelowImportNone(t *testing.T) {
	owner := map[string]string{}
	for p, own := range protocols {
		for _, o := range own {
			owner[o] = p
		}
	}
	check := func(pkg, self string, allowed ...string) {
		for _, d := range deps(t, pkg) {
			if p, ok := owner[d]; ok && p != self && !slices.Contains(allowed, d) {
				t.Errorf("%s imports %s, a package of the protocol %s", pkg, d, p)
			}
		}
	}
	for p := range protocols {
		check(p, p)
	}
	check("usecase", "")
	check("operations", "")
	// The store still builds some of the admin API's answers in its wire
	// types (instances, definitions, decisions, history, parked outbox
	// rows, migrations): the one exception left, which must shrink.
	check("store", "", "api/admin/wire")
	for _, d := range deps(t, "store") {
		if strings.HasPrefix(d, "api") && d != "api/admin/wire" {
			t.Errorf("store imports %s: the store imports no api package", d)
		}
	}
}

package usecase_test

import (
	"os/exec"
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
	"api/rest":  {"api/rest"},
}

// deps lists the packages of the module that pkg imports: directly with
// field Imports, at any depth with field Deps.
func deps(t *testing.T, pkg, field string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", `{{join .`+field+` " "}}`, module+pkg).Output()
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
	check := func(pkg, self string) {
		for _, d := range deps(t, pkg, "Imports") {
			if p, ok := owner[d]; ok && p != self {
				t.Errorf("%s imports %s, a package of the protocol %s", pkg, d, p)
			}
		}
	}
	for p := range protocols {
		check(p, p)
	}
	check("usecase", "")
	check("operations", "")
	// The store returns its own types: each protocol maps them to its wire
	// types, so the store reaches no api package, at any depth.
	for _, d := range deps(t, "store", "Deps") {
		if d == "api" || strings.HasPrefix(d, "api/") {
			t.Errorf("store imports %s: the store imports no api package", d)
		}
	}
}

package main

import (
	"os"
	"regexp"
	"testing"

	"github.com/sutra-run/worker/app"
)

// The README's configuration table is what users read: it lists every
// variable the worker reads, with the default it really has.
func TestTheREADMEListsEveryVariableWithItsDefault(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(SUTRA_[A-Z_]+)` \\| ([^|]*) \\|").FindAllStringSubmatch(string(readme), -1) {
		rows[m[1]] = m[2]
	}
	for _, v := range app.Variables() {
		row, ok := rows[v.Name]
		if !ok {
			t.Errorf("README's configuration table has no row for %s", v.Name)
			continue
		}
		if def := v.Default; def != "" && row != "`"+def+"`" && !regexp.MustCompile("^`"+regexp.QuoteMeta(def)+"`").MatchString(row) {
			t.Errorf("README says %s defaults to %s; the worker's default is %q", v.Name, row, def)
		}
		delete(rows, v.Name)
	}
	for name := range rows {
		t.Errorf("README lists %s, which the worker does not read", name)
	}
}

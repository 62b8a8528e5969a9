package main

import (
	"os"
	"reflect"
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
	typ := reflect.TypeOf(app.Config{})
	for i := range typ.NumField() {
		f := typ.Field(i)
		name := f.Tag.Get("envconfig")
		if name == "" {
			continue
		}
		row, ok := rows["SUTRA_"+name]
		if !ok {
			t.Errorf("README's configuration table has no row for SUTRA_%s", name)
			continue
		}
		if def := f.Tag.Get("default"); def != "" && row != "`"+def+"`" && !regexp.MustCompile("^`"+regexp.QuoteMeta(def)+"`").MatchString(row) {
			t.Errorf("README says SUTRA_%s defaults to %s; the worker's default is %q", name, row, def)
		}
		delete(rows, "SUTRA_"+name)
	}
	for name := range rows {
		t.Errorf("README lists %s, which the worker does not read", name)
	}
}

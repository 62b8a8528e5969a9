package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sutra-run/worker/api/admin/wire"
)

// table writes aligned columns under a header row.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	t.row(header...)
	return t
}

// row writes one row; an empty cell shows as "-" so that columns stay
// readable, and tabs or newlines in a value cannot break the alignment.
func (t *table) row(cells ...string) {
	for i, c := range cells {
		c = strings.Join(strings.Fields(c), " ")
		if c == "" {
			c = "-"
		}
		cells[i] = c
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

// flush ends the table. Tables are written to the run's output buffer,
// where writes cannot fail.
func (t *table) flush() { _ = t.tw.Flush() }

// section writes a titled table after a blank line (the parts of one object).
func section(w io.Writer, title string, header ...string) *table {
	fmt.Fprintf(w, "\n%s\n", title)
	return newTable(w, header...)
}

// printJSON prints the API's JSON as it came, indented.
func printJSON(w io.Writer, data []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, data, "", "  "); err != nil {
		return fmt.Errorf("the API answered something that is not JSON: %w", err)
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// variablesTable lists variables by name, each value as compact JSON.
func variablesTable(t *table, vars map[string]any) {
	for _, name := range slices.Sorted(maps.Keys(vars)) {
		value, err := json.Marshal(vars[name])
		if err != nil {
			value = []byte(fmt.Sprint(vars[name]))
		}
		t.row(name, string(value))
	}
}

// stamp shows a time as the API sent it (RFC 3339).
func stamp(t time.Time) string { return t.Format(time.RFC3339Nano) }

// stampOf shows an optional time; none is "".
func stampOf(t *time.Time) string {
	if t == nil {
		return ""
	}
	return stamp(*t)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func defRef(d wire.DefinitionRef) string { return d.Key + ":" + strconv.Itoa(d.Version) }

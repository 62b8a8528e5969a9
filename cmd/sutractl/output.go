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
func variablesTable(t *table, vars map[string]json.RawMessage) {
	for _, name := range slices.Sorted(maps.Keys(vars)) {
		var buf bytes.Buffer
		if json.Compact(&buf, vars[name]) != nil {
			buf.Write(vars[name])
		}
		t.row(name, buf.String())
	}
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

func defRef(d definitionRef) string { return d.Key + ":" + strconv.Itoa(d.Version) }

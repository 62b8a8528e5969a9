package store_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sutra-run/worker/store"
)

// manyProcesses is a file of n executable processes, each start → end.
func manyProcesses(n int) []byte {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>
<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" id="D" targetNamespace="urn:t">`)
	for k := range n {
		fmt.Fprintf(&b, `<bpmn:process id="p%d" isExecutable="true"><bpmn:startEvent id="S" /><bpmn:endEvent id="E" />
<bpmn:sequenceFlow id="F" sourceRef="S" targetRef="E" /></bpmn:process>`, k)
	}
	b.WriteString(`</bpmn:definitions>`)
	return []byte(b.String())
}

func TestAFileOfManyProcessesIsStoredOnceAndEachProcessLoadsFromIt(t *testing.T) {
	env, ctx, st := open(t)
	const n = 300
	xml := manyProcesses(n)
	for round, created := range []bool{true, false} { // a redeploy of the same file is a no-op
		got, err := st.Deploy(ctx, xml)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != n || got[n-1].Key != fmt.Sprintf("p%d", n-1) || got[n-1].Version != 1 || got[n-1].Created != created {
			t.Fatalf("deploy %d: %d definitions, last %+v, want %d at version 1, created %v", round, len(got), got[len(got)-1], n, created)
		}
	}
	if files, bytes := env.Int(t, "SELECT count(*) FROM deployed_files"), env.Int(t, "SELECT sum(octet_length(xml)) FROM deployed_files"); files != 1 || bytes != int64(len(xml)) {
		t.Errorf("the file is stored as %d rows of %d bytes in all, want once, %d bytes", files, bytes, len(xml))
	}
	if n := env.Int(t, "SELECT count(*) FROM definitions"); n != 300 {
		t.Errorf("%d definitions, want 300", n)
	}

	// A store that has parsed nothing yet loads each process from the file.
	fresh, err := store.Open(ctx, env.Config.DatabaseURL, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	for _, key := range []string{"p0", "p299"} {
		p, err := fresh.Process(ctx, key, 1)
		if err != nil || p.ID != key {
			t.Errorf("Process(%s, 1) = %v, %v", key, p, err)
		}
		if got, err := fresh.DefinitionXML(ctx, key, 1); err != nil || got != string(xml) {
			t.Errorf("DefinitionXML(%s, 1): %d bytes, %v; want the file", key, len(got), err)
		}
	}
	if _, err := fresh.Process(ctx, "p0", 2); err == nil {
		t.Error("a version never deployed loaded")
	}

	// Another file: its processes get their next versions from it, and it is
	// stored beside the first.
	if got, err := st.Deploy(ctx, append(xml, "<!-- changed -->"...)); err != nil || got[0].Version != 2 {
		t.Fatalf("deploying a changed file: %+v, %v", got, err)
	}
	if files := env.Int(t, "SELECT count(*) FROM deployed_files"); files != 2 {
		t.Errorf("%d files stored, want 2", files)
	}
}

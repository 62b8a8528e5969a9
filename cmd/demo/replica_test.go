package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// script writes an executable shell script standing in for bin/worker.
func script(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "worker")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// started is a script line printing a worker's text log line "worker
// started" with addr as both listeners.
func started(addr string) string {
	return `echo 'time=2026-12-04T15:00:00Z level=INFO msg="worker started" lanes=4 prefetch=64 http=` + addr + ` api=` + addr + `'`
}

// A replica listens on ports the system picks, so no other process can take
// them first (a demo once lost that race: "bind: address already in use"),
// and the demo reads them off the replica's log.
func TestTheDemoFindsItsReplicasListenersInTheirLog(t *testing.T) {
	worker := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			rw.Write([]byte(`{"status":"ok","replica":"demo-test"}`))
		}
	}))
	defer worker.Close()
	addr := strings.TrimPrefix(worker.URL, "http://")
	// The stand-in fails unless asked for system-picked ports.
	bin := script(t, `[ "$SUTRA_HTTP_ADDR" = 127.0.0.1:0 ] && [ "$SUTRA_API_ADDR" = 127.0.0.1:0 ] || { echo "ports $SUTRA_HTTP_ADDR $SUTRA_API_ADDR" >&2; exit 3; }
echo 'time=2026-12-04T15:00:00Z level=INFO msg="connected to the broker"'
`+started(addr)+`
exec sleep 60`)
	r, err := startReplica(bin, t.TempDir(), "demo-test", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.stop(5 * time.Second)
	if err := r.waitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r.addr != addr || r.api != addr {
		t.Fatalf("listeners %s and %s, want %s as the log said", r.addr, r.api, addr)
	}
}

// The demo once printed a normal summary while its own replica had died
// with "address already in use", believing another process's /readyz.
func TestDemoFailsWhenItsReplicaExits(t *testing.T) {
	bin := script(t, `echo 'listening on 127.0.0.1:9464: bind: address already in use' >&2; exit 1`)
	r, err := startReplica(bin, t.TempDir(), "demo-test", nil)
	if err != nil {
		t.Fatal(err)
	}
	err = r.waitReady(context.Background())
	if err == nil || !strings.Contains(err.Error(), "replica demo-test exited") || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("waitReady = %v, want the replica's exit with its log's last line", err)
	}
	if err := r.stop(time.Second); err == nil {
		t.Fatal("stop of a replica that had died reported success")
	}
}

func TestDemoRefusesAnotherProcessAnsweringOnItsPort(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			rw.Write([]byte(`{"status":"ok","replica":"someone-else"}`))
		}
	}))
	defer other.Close()
	addr := strings.TrimPrefix(other.URL, "http://")
	r, err := startReplica(script(t, started(addr)+"\nexec sleep 60"), t.TempDir(), "demo-test", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.stop(5 * time.Second)
	err = r.waitReady(context.Background())
	if err == nil || !strings.Contains(err.Error(), `replica "someone-else", not the demo's demo-test`) {
		t.Fatalf("waitReady = %v, want a refusal naming the other replica", err)
	}
}

func TestDemoNoticesAReplicaDyingAfterItWasReady(t *testing.T) {
	r, err := startReplica(script(t, `exec sleep 60`), t.TempDir(), "demo-test", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.alive(); err != nil {
		t.Fatalf("alive = %v while the replica runs", err)
	}
	if err := r.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-r.exited
	d := &demo{ctx: context.Background(), replicas: []*replica{r}}
	err = d.waitFor("nothing", func() (bool, string, error) { return false, "", nil })
	if err == nil || !strings.Contains(err.Error(), "replica demo-test exited") {
		t.Fatalf("waitFor = %v, want the replica's death", err)
	}
}

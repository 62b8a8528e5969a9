package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// replica is a worker process the demo started and watches: a replica that
// exits is noticed at once, and a listener that answers for another
// process is not taken for this one.
type replica struct {
	id              string
	addr, api       string // metrics and API listeners, on ports the demo picked
	cmd             *exec.Cmd
	log             *os.File
	exited          chan struct{} // closed when the process exits
	exitErr         error         // the process's exit status, set before exited closes
	readyTimeoutDur time.Duration
}

// startReplica starts binary run with env added to the demo's environment.
// Its output goes to a log file in dir.
func startReplica(binary, dir, id string, env []string) (*replica, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	log, err := os.Create(dir + "/" + id + ".log")
	if err != nil {
		return nil, err
	}
	r := &replica{id: id, addr: ports[0], api: ports[1], log: log, exited: make(chan struct{}), readyTimeoutDur: 60 * time.Second}
	r.cmd = exec.Command(binary, "run")
	r.cmd.Env = append(append(os.Environ(), env...),
		"SUTRA_REPLICA_ID="+id, "SUTRA_HTTP_ADDR="+r.addr, "SUTRA_API_ADDR="+r.api,
		"SUTRA_MIGRATE=false", "SUTRA_LOG_FORMAT=text")
	r.cmd.Stdout, r.cmd.Stderr = log, log
	if err := r.cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("starting replica %s: %w", id, err)
	}
	go func() {
		r.exitErr = r.cmd.Wait()
		close(r.exited)
	}()
	return r, nil
}

// freePorts returns n loopback addresses with ports free at the time of the
// call. Another process may take one before the replica listens on it; the
// replica then exits with "address already in use", which the demo reports.
func freePorts(n int) ([]string, error) {
	var addrs []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs, nil
}

// died reports why the replica exited, with the last lines of its log.
func (r *replica) died() error {
	return fmt.Errorf("replica %s exited (%v); its log ends:\n%s", r.id, r.exitErr, tail(r.log.Name(), 5))
}

// alive returns an error once the replica has exited.
func (r *replica) alive() error {
	select {
	case <-r.exited:
		return r.died()
	default:
		return nil
	}
}

// waitReady waits until this replica (checked by the id /healthz reports)
// answers /readyz with 200. A replica that exits meanwhile, or another
// process answering on its port, fails it at once.
func (r *replica) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, r.readyTimeoutDur)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := r.alive(); err != nil {
			return err
		}
		id, err := r.healthID(ctx)
		if err == nil && id != r.id {
			return fmt.Errorf("the process answering on %s is replica %q, not the demo's %s: another worker listens there", r.addr, id, r.id)
		}
		if err == nil && r.get(ctx, "/readyz") == nil {
			return nil
		}
		select {
		case <-r.exited:
			return r.died()
		case <-ctx.Done():
			return fmt.Errorf("replica %s not ready after %v; see %s", r.id, r.readyTimeoutDur, r.log.Name())
		case <-tick.C:
		}
	}
}

// healthID is the replica id the process on r.addr reports in /healthz.
func (r *replica) healthID(ctx context.Context) (string, error) {
	var health struct {
		Replica string `json:"replica"`
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.addr+"/healthz", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&health); err != nil {
		return "", fmt.Errorf("/healthz on %s: %w", r.addr, err)
	}
	return health.Replica, nil
}

func (r *replica) get(ctx context.Context, path string) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.addr+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", path, resp.Status)
	}
	return nil
}

// stop sends SIGTERM and waits for the exit. It returns an error when the
// replica had died before (it did not do the demo's work to the end) or
// did not exit cleanly.
func (r *replica) stop(timeout time.Duration) error {
	if err := r.alive(); err != nil {
		return err
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.exited:
	case <-time.After(timeout):
		_ = r.cmd.Process.Kill()
		<-r.exited
		return fmt.Errorf("replica %s did not stop within %v of SIGTERM; see %s", r.id, timeout, r.log.Name())
	}
	r.log.Close()
	if r.exitErr != nil {
		return fmt.Errorf("replica %s stopped with %v; see %s", r.id, r.exitErr, r.log.Name())
	}
	return nil
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "  (" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

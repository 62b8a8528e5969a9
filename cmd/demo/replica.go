package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
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
	id string
	// addr and api are the metrics and API listeners the replica bound (on
	// ports the system picked), set before started closes.
	addr, api       string
	started         chan struct{}
	cmd             *exec.Cmd
	log             *os.File
	exited          chan struct{} // closed when the process exits
	exitErr         error         // the process's exit status, set before exited closes
	readyTimeoutDur time.Duration
}

// startReplica starts binary run with env added to the demo's environment.
// Its output goes to a log file in dir. It listens on ports the system
// picks (no port the demo chose can be taken first), and its log line
// "worker started" says which.
func startReplica(binary, dir, id string, env []string) (*replica, error) {
	log, err := os.Create(dir + "/" + id + ".log")
	if err != nil {
		return nil, err
	}
	r := &replica{id: id, log: log, started: make(chan struct{}), exited: make(chan struct{}), readyTimeoutDur: 60 * time.Second}
	r.cmd = exec.Command(binary, "run")
	r.cmd.Env = append(append(os.Environ(), env...),
		"SUTRA_REPLICA_ID="+id, "SUTRA_HTTP_ADDR=127.0.0.1:0", "SUTRA_API_ADDR=127.0.0.1:0", "SUTRA_GATEWAY_ADDR=127.0.0.1:0",
		"SUTRA_MIGRATE=false", "SUTRA_LOG_FORMAT=text")
	out := &startWatcher{w: log, r: r}
	r.cmd.Stdout, r.cmd.Stderr = out, out
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

// startWatcher passes a replica's output to its log file and reads the
// bound addresses off its text log line "worker started" (http=… api=…).
// exec calls Write from one goroutine at a time (Stdout and Stderr are this
// one writer).
type startWatcher struct {
	w    io.Writer
	r    *replica
	line []byte
	done bool
}

func (s *startWatcher) Write(p []byte) (int, error) {
	for rest := p; !s.done && len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			s.line = append(s.line, rest...)
			break
		}
		s.line = append(s.line, rest[:i]...)
		rest = rest[i+1:]
		if bytes.Contains(s.line, []byte(`msg="worker started"`)) {
			for _, f := range strings.Fields(string(s.line)) {
				if v, ok := strings.CutPrefix(f, "http="); ok {
					s.r.addr = v
				} else if v, ok := strings.CutPrefix(f, "api="); ok {
					s.r.api = v
				}
			}
			s.done = true
			close(s.r.started)
		}
		s.line = s.line[:0]
	}
	return s.w.Write(p)
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

// waitReady waits until this replica has said where it listens and (checked
// by the id /healthz reports) answers /readyz with 200. A replica that exits
// meanwhile, or another process answering on its port, fails it at once.
func (r *replica) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, r.readyTimeoutDur)
	defer cancel()
	select {
	case <-r.started:
	case <-r.exited:
		return r.died()
	case <-ctx.Done():
		return fmt.Errorf("replica %s did not start within %v; see %s", r.id, r.readyTimeoutDur, r.log.Name())
	}
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

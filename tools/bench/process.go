package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Process is the worker binary running as a child process of a benchmark.
type Process struct {
	cmd *exec.Cmd
	// HTTPAddr is its HTTP listener (metrics, /readyz).
	HTTPAddr string
	exited   chan struct{}
	err      error
	once     sync.Once
}

// StartProcess runs `bin run` with env as its whole environment, its HTTP
// listener at httpAddr (which env must name as SUTRA_HTTP_ADDR), and waits
// until it is ready: /readyz answers 200, within a minute.
func StartProcess(ctx context.Context, bin string, env []string, httpAddr string) (*Process, error) {
	cmd := exec.Command(bin, "run")
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s (make build): %w", bin, err)
	}
	p := &Process{cmd: cmd, HTTPAddr: httpAddr, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	for deadline := time.Now().Add(time.Minute); ; {
		resp, err := http.Get("http://" + httpAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		select {
		case <-p.exited:
			return nil, fmt.Errorf("the worker exited before it was ready: %v", p.err)
		case <-ctx.Done():
			p.Stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.Stop()
			return nil, errors.New("the worker was not ready within a minute")
		}
	}
}

// Pid is the process's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited is closed when the process has exited; Err then says how.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Err is how the process exited, once Exited is closed.
func (p *Process) Err() error { return p.err }

// Stop stops the worker gracefully (SIGTERM) and waits for it, once; past
// 45 seconds it is killed.
func (p *Process) Stop() {
	p.once.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(45 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
}

// FreeAddr is a loopback address with a port free at the time of asking.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return "127.0.0.1:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port), nil
}

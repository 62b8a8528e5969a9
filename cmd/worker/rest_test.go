package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sutra-run/worker/internal/testkit"
)

// adminToken is the admin token of the replicas that serve /v2's admin
// calls (instance creation).
const adminToken = "cmd-worker-test-admin"

// restClient is a Camunda REST client over /v2 of two replicas: a call that
// cannot reach the one it uses (the replica died) goes to the other.
type restClient struct {
	mu    sync.Mutex
	addrs []string
	at    int
}

func (c *restClient) addr() (string, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.addrs[c.at], c.at
}

// failOver moves the calls off replica i, once.
func (c *restClient) failOver(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at == i {
		c.at = (i + 1) % len(c.addrs)
	}
}

// post sends body to path and answers the status and body; err is a call
// whose outcome is unknown (no answer: the replica died, or it answered
// that it stops), after which the calls go to the other replica.
// The replica that answered is i. A busy answer (503, 504) is an error too,
// tried again after a pause.
func (c *restClient) post(ctx context.Context, token, path string, body any) (status int, out []byte, i int, err error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return 0, nil, 0, err
	}
	addr, i := c.addr()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+path, bytes.NewReader(raw))
	if err != nil {
		return 0, nil, i, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		defer resp.Body.Close()
		out, err = io.ReadAll(resp.Body)
	}
	if err != nil {
		c.failOver(i)
		return 0, nil, i, err
	}
	if resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusGatewayTimeout {
		time.Sleep(20 * time.Millisecond) // a client's back-off before it tries again
		return resp.StatusCode, out, i, fmt.Errorf("%s: %d %s", path, resp.StatusCode, out)
	}
	return resp.StatusCode, out, i, nil
}

// completion is what a REST worker was answered for one job's completion.
type completion struct {
	instance string
	// status is the last answer (204, 404 ...); unknown says that an
	// earlier try had no answer, so that the job may have been completed by it.
	status  int
	unknown bool
	// onB is a 204 from the replica that survived.
	onB bool
}

// A replica killed with -9 mid-run loses nothing of what /v2 answered: a
// REST worker (Camunda's calls: POST /v2/process-instances, /v2/jobs/activation,
// /v2/jobs/{key}/completion) works n instances through a service task on
// replica a, which is killed mid-run; the worker carries on against
// replica b, retrying what had no answer. Every instance ends once, with
// the variables of the one completion that succeeded for it; no job is
// answered 204 twice, and a 404 (the job is done) only follows a try with
// no answer.
func TestAReplicaKilledMidRunLosesNothingAnsweredOverV2(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	env.Deploy(t, "../../api/rest/testdata/orders.bpmn")
	fast := []string{"SUTRA_CLAIM_TIMEOUT=2s", "SUTRA_STEP_TIMEOUT=1500ms", "SUTRA_SWEEP_INTERVAL=200ms", "SUTRA_LEASE_TTL=2s",
		"SUTRA_ADMIN_TOKEN=" + adminToken}
	apiA, apiB := freeAddr(t), freeAddr(t)
	// Replica a holds each step of a task outcome open a while before its
	// commit, so that the kill finds completions it answered not committed.
	a := startProcess(t, env, "replica-a", append(fast, "SUTRA_API_ADDR="+apiA, "SUTRA_TEST_HOLD_STEP=task:", "SUTRA_TEST_HOLD_FOR=300ms")...)
	startProcess(t, env, "replica-b", append(fast, "SUTRA_API_ADDR="+apiB)...)
	c := &restClient{addrs: []string{apiA, apiB}}
	ctx, cancel := context.WithTimeout(testkit.Ctx(t), 2*time.Minute)
	defer cancel()
	// With the token: a probe without one would be a failed credential,
	// and enough of them throttle this address (SUTRA_API_AUTH_FAILURE_BURST).
	testkit.Eventually(t, 60*time.Second, "both replicas serve /v2", func() bool {
		for _, addr := range c.addrs {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v2/topology", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+adminToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return false
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return false
			}
		}
		return true
	})

	const n = 60
	instances := map[string]bool{}
	for i := range n {
		status, body, _, err := c.post(ctx, adminToken, "/v2/process-instances", map[string]any{"processDefinitionId": "rest_charge",
			"variables": map[string]any{"orderId": fmt.Sprintf("o-%d", i)}})
		if err != nil || status != http.StatusOK {
			t.Fatalf("creating instance %d: %d %s %v", i, status, body, err)
		}
		var created struct{ ProcessInstanceKey string }
		if err := json.Unmarshal(body, &created); err != nil {
			t.Fatal(err)
		}
		instances[created.ProcessInstanceKey] = true
	}

	var (
		mu   sync.Mutex
		jobs = map[string]*completion{}
		done = map[string]int{} // 204s by instance
		// settled are the instances answered 204, or 404 after a try with
		// no answer: the worker has nothing left to do for them.
		settled = map[string]bool{}
		fromA   []int64 // instances whose job replica a answered 204
		third   = make(chan struct{})
		once    sync.Once
	)
	work := func(worker string) error {
		for {
			mu.Lock()
			finished := len(settled) == n
			mu.Unlock()
			if finished {
				return nil
			}
			status, body, _, err := c.post(ctx, apiToken, "/v2/jobs/activation", map[string]any{"type": "rest-charge", "worker": worker,
				"maxJobsToActivate": 4, "timeout": 5000, "requestTimeout": 500})
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				continue // no answer: the jobs it may have locked come back after their timeout
			}
			if status != http.StatusOK {
				return fmt.Errorf("activation: %d %s", status, body)
			}
			var got struct {
				Jobs []struct{ JobKey, ProcessInstanceKey string }
			}
			if err := json.Unmarshal(body, &got); err != nil {
				return err
			}
			for _, j := range got.Jobs {
				cp := &completion{instance: j.ProcessInstanceKey}
				var at int
				for {
					status, body, at, err = c.post(ctx, apiToken, "/v2/jobs/"+j.JobKey+"/completion",
						map[string]any{"variables": map[string]any{"by": j.JobKey}})
					if ctx.Err() != nil {
						return ctx.Err()
					}
					if err == nil {
						break
					}
					cp.unknown = true
				}
				cp.status = status
				mu.Lock()
				if prev, ok := jobs[j.JobKey]; ok && prev.status == http.StatusNoContent && status == http.StatusNoContent {
					mu.Unlock()
					return fmt.Errorf("job %s answered 204 twice", j.JobKey)
				}
				if status == http.StatusNoContent || jobs[j.JobKey] == nil {
					jobs[j.JobKey] = cp
				}
				if status == http.StatusNotFound && cp.unknown {
					settled[j.ProcessInstanceKey] = true
				}
				if status == http.StatusNoContent {
					cp.onB = at == 1
					if at == 0 {
						key, _ := strconv.ParseInt(j.ProcessInstanceKey, 10, 64)
						fromA = append(fromA, key)
					}
					done[j.ProcessInstanceKey]++
					settled[j.ProcessInstanceKey] = true
					if len(done) >= n/3 {
						once.Do(func() { close(third) })
					}
				}
				mu.Unlock()
				switch status {
				case http.StatusNoContent:
				case http.StatusNotFound, http.StatusConflict:
					// The job is done or another activation holds it: the
					// assertions below tell which.
				default:
					return fmt.Errorf("completing job %s: %d %s", j.JobKey, status, body)
				}
			}
		}
	}
	errs := make(chan error, 2)
	for _, w := range []string{"w1", "w2"} {
		go func() { errs <- work(w) }()
	}
	select {
	case <-third:
	case err := <-errs:
		t.Fatalf("the REST worker stopped before the kill: %v", err)
	case <-ctx.Done():
		t.Fatal("a third of the jobs were not completed in time")
	}
	a.kill(t)
	mu.Lock()
	answered := append([]int64(nil), fromA...)
	mu.Unlock()
	// The claims of a's held steps stay a's until stale (2s): read at once,
	// what a answered and did not commit is still open.
	open := env.Int(t, "SELECT count(*) FROM instances WHERE zeebe_key = ANY($1) AND status <> 'completed'", answered)
	if open == 0 {
		t.Errorf("every one of the %d completions replica a answered had committed: the kill was not mid-step", len(answered))
	}
	for range 2 {
		if err := <-errs; err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("the REST worker: %v", err)
		}
	}

	testkit.Eventually(t, 60*time.Second, "every instance ended", func() bool {
		return env.Int(t, "SELECT count(*) FROM instances WHERE definition_key = 'rest_charge' AND status = 'completed'") == n
	})
	if got := env.Int(t, "SELECT count(*) FROM instances WHERE definition_key = 'rest_charge'"); got != n {
		t.Errorf("%d instances, want %d", got, n)
	}
	// One step created the job, one applied its completion.
	if got := env.Int(t, "SELECT count(*) FROM instances WHERE definition_key = 'rest_charge' AND version = 2"); got != n {
		t.Errorf("%d instances stepped exactly twice, want %d", got, n)
	}
	rows, err := env.DB.Query(testkit.Ctx(t), "SELECT zeebe_key::text, coalesce(variables->>'by', '') FROM instances WHERE definition_key = 'rest_charge'")
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]string{}
	for rows.Next() {
		var key, job string
		if err := rows.Scan(&key, &job); err != nil {
			t.Fatal(err)
		}
		by[key] = job
	}
	rows.Close()
	onB := 0
	for key := range instances {
		job, ok := jobs[by[key]]
		switch {
		case !ok || job.instance != key:
			t.Errorf("instance %s ended with the variables of job %q, which no worker completed for it", key, by[key])
		case job.status == http.StatusNoContent:
			if done[key] != 1 {
				t.Errorf("instance %s: %d completions answered 204, want 1", key, done[key])
			}
			if job.onB {
				onB++
			}
		case job.status == http.StatusNotFound && job.unknown && done[key] == 0:
			// Applied by the try that had no answer, then found done.
		default:
			t.Errorf("instance %s ended by job %s, whose completion was answered %d (a try with no answer: %v) and %d 204s",
				key, by[key], job.status, job.unknown, done[key])
		}
	}
	for job, cp := range jobs {
		if cp.status == http.StatusNoContent && by[cp.instance] != job {
			t.Errorf("job %s answered 204, but its instance %s ended by job %q", job, cp.instance, by[cp.instance])
		}
	}
	if onB == 0 {
		t.Error("no completion was answered by replica b: the kill was not mid-run")
	}
	if got := env.Int(t, "SELECT count(*) FROM incidents"); got != 0 {
		t.Errorf("%d incidents", got)
	}
	t.Logf("replica a answered %d completions, %d not committed at the kill; replica b answered %d", len(answered), open, onB)
	env.AssertNoOverlap(t, true)
	env.AssertNoClaimsHeld(t)
}

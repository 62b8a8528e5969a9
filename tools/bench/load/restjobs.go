package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/sutra-run/worker/tools/bench"
)

// restWorker works jobs over /v2 as Camunda 8.8's REST clients do, until
// ctx ends: one activation long poll at a time (one job, waiting up to
// 10 s, Camunda's default), then the job's completion, then the next poll.
// Its accounting is the Go client's (jobClient).
func restWorker(ctx context.Context, hc *http.Client, addr string, name string, c *jobClient) {
	post := func(path string, body any) ([]byte, error) { return restPost(ctx, hc, addr, path, body) }
	for ctx.Err() == nil {
		out, err := post("/v2/jobs/activation", map[string]any{"type": bench.TaskTopic, "worker": name, "timeout": 60000,
			"maxJobsToActivate": 1, "requestTimeout": 10000})
		if err != nil {
			if ctx.Err() == nil {
				c.fail(err)
			}
			return
		}
		var got struct {
			Jobs []struct {
				JobKey             string `json:"jobKey"`
				ProcessInstanceKey string `json:"processInstanceKey"`
			} `json:"jobs"`
		}
		if err := json.Unmarshal(out, &got); err != nil {
			c.fail(err)
			return
		}
		for _, j := range got.Jobs {
			var instance int64
			if _, err := fmt.Sscan(j.ProcessInstanceKey, &instance); err != nil {
				c.fail(err)
				return
			}
			c.activated(instance, time.Now())
			if _, err := post("/v2/jobs/"+j.JobKey+"/completion", map[string]any{}); err != nil {
				c.fail(err)
				return
			}
			c.completedNow(instance)
		}
	}
}

// restPost posts body to /v2's path with the admin token and answers the
// body of a 2xx answer.
func restPost(ctx context.Context, hc *http.Client, addr, path string, body any) ([]byte, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+path, bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode/100 != 2 {
		err = fmt.Errorf("%s answered %d %s", path, resp.StatusCode, out)
	}
	return out, err
}

package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/sutra-run/worker/tools/bench"
)

// The web console's budget (issue 27): the instance list and an instance's
// page answered in 100 ms or less with a million instances. On a data run
// the worker, its tables seeded, is asked the /v1 calls of those pages,
// one after the other, after the relays are timed.

const (
	// adminToken is the admin token of the bench's workers.
	adminToken = "bench-admin"
	apiBudget  = 100 * time.Millisecond
	// apiCalls is how many times each call is timed (after one untimed).
	apiCalls = 20
)

// apiTiming is one call's answer times.
type apiTiming struct {
	call     string
	p50, max time.Duration
}

// measureAPI times the console's instance list and instance page calls on
// the worker at addr (an open API: the bench sets no token), the ids of
// instance pages drawn from the seeded instances.
func measureAPI(ctx context.Context, addr string, d bench.Data) ([]apiTiming, error) {
	base := "http://" + addr
	r := rand.New(rand.NewPCG(3, 4))
	seeded := func() string { return bench.SeedID(r.IntN(max(d.Instances, 1))) }
	calls := []struct {
		name string
		path func() string
	}{
		{"list: first page", func() string { return "/v1/instances?limit=50" }},
		{"list: by process", func() string { return "/v1/instances?limit=50&definition=" + bench.ProcessKey }},
		{"list: a page by cursor", func() string { return "/v1/instances?limit=50&after=" + url.QueryEscape(seeded()) }},
		{"list: status filter no instance passes (one walk of SUTRA_API_MAX_SCAN)", func() string { return "/v1/instances?limit=50&status=completed" }},
		{"list: variable filter", func() string { return "/v1/instances?limit=50&variable=nope&value=1" }},
		{"instance: GET /v1/instances/{id}", func() string { return "/v1/instances/" + seeded() }},
		{"instance: its history", func() string { return "/v1/instances/" + seeded() + "/history" }},
	}
	var out []apiTiming
	for _, c := range calls {
		var took []time.Duration
		for i := range apiCalls + 1 {
			began := time.Now()
			if err := get(ctx, base+c.path()); err != nil {
				return out, fmt.Errorf("%s: %w", c.name, err)
			}
			if i > 0 { // the first warms the connection and the plan
				took = append(took, time.Since(began))
			}
		}
		slices.Sort(took)
		out = append(out, apiTiming{call: c.name, p50: took[len(took)/2], max: took[len(took)-1]})
	}
	return out, nil
}

func get(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// reportAPI prints the API answer times of every data run.
func reportAPI(w io.Writer, all []result) {
	header := false
	for _, r := range all {
		if r.kind != "data" || len(r.api) == 0 {
			continue
		}
		if !header {
			fmt.Fprintf(w, "\nThe console's /v1 calls on the seeded tables (each %d times, one after the other, after an untimed one; round trip on loopback), budget %v.\n\n", apiCalls, apiBudget)
			fmt.Fprintln(w, "| round | data | call | p50 | max | met |")
			fmt.Fprintln(w, "|--:|---|---|--:|--:|---|")
			header = true
		}
		for _, a := range r.api {
			met := "yes"
			if a.max > apiBudget {
				met = "**no**"
			}
			fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %s |\n", r.round+1, r.data, a.call, ms(a.p50), ms(a.max), met)
		}
	}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

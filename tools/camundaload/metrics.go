package main

import (
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// hist is a histogram of the worker's /metrics summed over its series, or a
// counter (count alone).
type hist struct {
	count, sum float64
	// bounds and cumulative counts of the buckets, in the exposition's order.
	bounds, cum []float64
}

// scrape reads the worker's histograms and counters by name.
func scrape(httpAddr string) (map[string]hist, error) {
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]hist{}
	for name, f := range fams {
		var h hist
		for _, m := range f.GetMetric() {
			switch {
			case m.GetHistogram() != nil:
				hh := m.GetHistogram()
				h.count += float64(hh.GetSampleCount())
				h.sum += hh.GetSampleSum()
				for i, b := range hh.GetBucket() {
					if len(h.bounds) <= i {
						h.bounds = append(h.bounds, b.GetUpperBound())
						h.cum = append(h.cum, 0)
					}
					h.cum[i] += float64(b.GetCumulativeCount())
				}
			case m.GetCounter() != nil:
				h.count += m.GetCounter().GetValue()
			}
		}
		out[name] = h
	}
	return out, nil
}

// minus is h less an earlier scrape of it.
func (h hist) minus(before hist) hist {
	d := hist{count: h.count - before.count, sum: h.sum - before.sum, bounds: h.bounds}
	for i := range h.cum {
		c := h.cum[i]
		if i < len(before.cum) {
			c -= before.cum[i]
		}
		d.cum = append(d.cum, c)
	}
	return d
}

// mean is the mean observation, as a duration.
func (h hist) mean() time.Duration {
	if h.count == 0 {
		return 0
	}
	return time.Duration(h.sum / h.count * float64(time.Second))
}

// quantile is the upper bound of the bucket holding the q-quantile, as a
// duration: "≤ bound", or "> bound" past the last bucket.
func (h hist) quantile(q float64) bound {
	if h.count == 0 {
		return bound{}
	}
	for i, c := range h.cum {
		if c >= q*h.count {
			return bound{d: time.Duration(h.bounds[i] * float64(time.Second))}
		}
	}
	if len(h.bounds) == 0 {
		return bound{}
	}
	return bound{d: time.Duration(h.bounds[len(h.bounds)-1] * float64(time.Second)), over: true}
}

// bound is a quantile read from buckets: at most d, or over d.
type bound struct {
	d    time.Duration
	over bool
}

func (b bound) String() string {
	if b.over {
		return "> " + ms(b.d).String()
	}
	return "≤ " + ms(b.d).String()
}

// workerFigures are what the worker's metrics say of the Starter's window.
type workerFigures struct {
	steps, bounces         float64
	stepMean, laneWaitMean time.Duration
	stepP99, laneWaitP99   bound
	activationP99          bound
	busy                   float64
}

func figures(before, after map[string]hist) workerFigures {
	d := func(name string) hist { return after[name].minus(before[name]) }
	step, wait := d("sutra_step_duration_seconds"), d("sutra_lane_wait_seconds")
	return workerFigures{
		steps: step.count, bounces: d("sutra_claim_bounces_total").count,
		stepMean: step.mean(), stepP99: step.quantile(0.99),
		laneWaitMean: wait.mean(), laneWaitP99: wait.quantile(0.99),
		activationP99: d("sutra_job_activation_seconds").quantile(0.99),
		busy:          d("sutra_api_busy_total").count,
	}
}

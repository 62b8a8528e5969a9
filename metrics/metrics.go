// Package metrics defines every Prometheus collector of the worker in one
// struct, registered on an injected Registerer (never the global one).
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Paths of the claim bounce counter.
const (
	PathRelay = "relay"
	PathTimer = "timer"
	PathAdmin = "admin"
)

// Relay outcomes.
const (
	OutcomeCommitted    = "committed"
	OutcomeDuplicate    = "duplicate"
	OutcomeRequeued     = "requeued"
	OutcomeDeadLettered = "dead_lettered"
)

// Metrics holds the worker's collectors. Labels are bounded: no instance ids.
type Metrics struct {
	Relays        *prometheus.CounterVec
	RelayRequeues *prometheus.CounterVec
	ClaimBounces  *prometheus.CounterVec
	StepDuration  prometheus.Histogram
	LaneDepth     *prometheus.GaugeVec
	LaneWait      prometheus.Histogram
	StepsFenced   prometheus.Counter
	LanePanics    prometheus.Counter
}

// New creates the collectors and registers them on reg.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Relays: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sutra_relays_total",
			Help: "Relays handled, by outcome (committed, duplicate, requeued, dead_lettered).",
		}, []string{"outcome"}),
		RelayRequeues: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sutra_relay_requeues_total",
			Help: "Relays nacked with requeue, by reason (claim_held, fenced, unavailable, shutdown).",
		}, []string{"reason"}),
		ClaimBounces: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sutra_claim_bounces_total",
			Help: "Resumes refused because another owner held the instance claim, by path.",
		}, []string{"path"}),
		StepDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sutra_step_duration_seconds",
			Help:    "Time from claim to commit of a step.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		LaneDepth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sutra_lane_queue_depth",
			Help: "Resumes waiting in a lane's inbox.",
		}, []string{"lane"}),
		LaneWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sutra_lane_wait_seconds",
			Help:    "Time a resume waited in its lane's inbox before its step began.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}),
		StepsFenced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sutra_steps_fenced_total",
			Help: "Step commits rolled back because the claim was swept or stolen meanwhile.",
		}),
		LanePanics: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sutra_lane_panics_total",
			Help: "Steps that panicked; the claim was released and the lane kept running.",
		}),
	}
	reg.MustRegister(m.Relays, m.RelayRequeues, m.ClaimBounces, m.StepDuration, m.LaneDepth, m.LaneWait, m.StepsFenced, m.LanePanics)
	for _, o := range []string{OutcomeCommitted, OutcomeDuplicate, OutcomeRequeued, OutcomeDeadLettered} {
		m.Relays.WithLabelValues(o)
	}
	for _, p := range []string{PathRelay, PathTimer, PathAdmin} {
		m.ClaimBounces.WithLabelValues(p)
	}
	return m
}

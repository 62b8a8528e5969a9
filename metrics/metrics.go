// Package metrics defines every Prometheus collector of the worker in one
// struct, registered on an injected Registerer (never the global one).
package metrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/buildinfo"
)

// Paths of the claim bounce counter.
const (
	PathRelay = "relay"
	PathTimer = "timer"
	PathTask  = "task"
	PathAdmin = "admin"
)

// Relay outcomes.
const (
	// OutcomeCommitted is a relay whose resume applied (lanes.Applied): the
	// published label value, kept as an alias of "applied".
	OutcomeCommitted    = "committed"
	OutcomeDuplicate    = "duplicate"
	OutcomeRequeued     = "requeued"
	OutcomeDeadLettered = "dead_lettered"
	// OutcomeBuffered: a correlate-by-key relay with a ttl that no
	// subscription matched yet was stored until one opens; acked.
	OutcomeBuffered = "buffered"
	// OutcomeStale: a task outcome whose task was cancelled meanwhile (a
	// boundary event fired, the instance was cancelled): nothing to apply; acked.
	OutcomeStale = "stale"
)

// FastPathInvalid labels a task outcome's relay that the fast path could
// not decode (sutra_task_fast_path_total); the consumer dead-letters its
// published copy.
const FastPathInvalid = "invalid"

// Metrics holds the worker's collectors. Labels are bounded: no instance ids.
type Metrics struct {
	Relays        *prometheus.CounterVec
	RelayRequeues *prometheus.CounterVec
	ClaimBounces  *prometheus.CounterVec
	StepDuration  prometheus.Histogram
	BatchSteps    prometheus.Histogram
	LaneDepth     *prometheus.GaugeVec
	LaneWait      prometheus.Histogram
	StepsFenced   prometheus.Counter
	LanePanics    prometheus.Counter

	TimersFired    prometheus.Counter
	TimerDeferrals *prometheus.CounterVec
	TimersStale    prometheus.Counter
	TimerFireLag   prometheus.Histogram

	TasksLocked      *TopicCounter
	TasksCompleted   *TopicCounter
	TasksLockExpired prometheus.Counter
	TaskWait         prometheus.Histogram
	TaskFastPath     *prometheus.CounterVec

	AdminRequests      *prometheus.CounterVec
	APIBusy            *prometheus.CounterVec
	APIAuthFailures    *prometheus.CounterVec
	APILongPolls       prometheus.Gauge
	APILongPollsOver   prometheus.Counter
	RESTLongPolls      prometheus.Gauge
	MigrationInstances *prometheus.CounterVec

	GatewayRequests *prometheus.CounterVec
	// GatewayConnectionsRefused counts connections closed at once because
	// SUTRA_GATEWAY_MAX_CONNECTIONS were open.
	GatewayConnectionsRefused prometheus.Counter
	GatewayStreams            prometheus.Gauge
	JobActivation             *prometheus.HistogramVec

	ClaimsSwept      prometheus.Counter
	LeaseHeld        *prometheus.GaugeVec
	InboxTrimmed     prometheus.Counter
	BufferedConsumed prometheus.Counter
	BufferedExpired  prometheus.Counter

	OutboxPublished     prometheus.Counter
	OutboxPublishErrors *prometheus.CounterVec
	OutboxLag           prometheus.Histogram
	OutboxBacklog       prometheus.Gauge
	OutboxParked        prometheus.Counter
	OutboxParkedRows    prometheus.Gauge
	ClaimOldestAge      prometheus.Gauge
	DeadLetterMessages  prometheus.Gauge
	IncidentsOpen       prometheus.Gauge
	TasksOpen           *prometheus.GaugeVec
	DeadLetters         *prometheus.CounterVec
	OutboxTrimmed       prometheus.Counter

	BrokerBlocked *prometheus.GaugeVec
}

// The broker connections, by what they carry.
const (
	BrokerConsuming  = "consume"
	BrokerPublishing = "publish"
)

// Reasons of the outbox publish error counter.
const (
	PublishReturned    = "returned"
	PublishNacked      = "nacked"
	PublishUnavailable = "unavailable"
)

// New creates the collectors and registers them on reg.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Relays: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sutra_relays_total",
			Help: "Relays handled, by outcome (committed, duplicate, requeued, dead_lettered, buffered, stale).",
		}, []string{"outcome"}),
		RelayRequeues: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sutra_relay_requeues_total",
			Help: "Relays nacked with requeue, by reason (claim_held, fenced, unavailable, transient, shutdown, lane_full, dead_letter_failed).",
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
		BatchSteps: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sutra_batch_steps",
			Help:    "Steps of each lane batch that committed (SUTRA_BATCH_MAX; the writer may put several lanes' batches in one group transaction); steps committed one at a time are not counted.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128},
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
	m.TimersFired = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sutra_timers_fired_total",
		Help: "Timer fires whose step committed.",
	})
	m.TimerDeferrals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sutra_timer_deferrals_total",
		Help: "Timer fires deferred to a later due time with backoff, by reason (claim_held, fenced, unavailable, transient, shutdown, lane_full, error).",
	}, []string{"reason"})
	m.TimersStale = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sutra_timers_stale_total",
		Help: "Timer fires that found their wait already closed and did nothing.",
	})
	m.TimerFireLag = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "sutra_timer_fire_lag_seconds",
		Help:    "Time from a timer's due time to the commit of its fire.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 14),
	})
	topics := &topicLabels{seen: map[string]struct{}{}}
	topicsHelp := fmt.Sprintf("the first %d topics seen; later ones under %q", MaxTopicLabels, OtherTopic)
	m.TasksLocked = &TopicCounter{topics: topics, CounterVec: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sutra_tasks_locked_total",
		Help: "Pull tasks locked to a worker by fetchAndLock, by topic (" + topicsHelp + ").",
	}, []string{"topic"})}
	m.TasksCompleted = &TopicCounter{topics: topics, CounterVec: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sutra_tasks_completed_total",
		Help: "Outcomes of pull tasks reported by their workers and recorded, by topic (" + topicsHelp + ") and outcome (completed, failed, bpmn_error).",
	}, []string{"topic", "outcome"})}
	m.TasksLockExpired = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sutra_tasks_lock_expired_total",
		Help: "Pull tasks locked again after the lock of their previous worker expired.",
	})
	m.TaskWait = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "sutra_task_wait_seconds",
		Help:    "Time from a pull task's creation to its (first or next) lock by a worker.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 16),
	})
	m.TaskFastPath = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sutra_task_fast_path_total",
		Help: "Task outcomes handed to this replica's lanes at once (SUTRA_TASK_FAST_PATH), by outcome: applied, duplicate, stale, rejected, or why it was left to its outbox relay (claim_held, fenced, unavailable, transient, shutdown, lane_full), or invalid.",
	}, []string{"outcome"})
	m.AdminRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sutra_admin_requests_total",
		Help: "Calls of the admin API, by operation and outcome code (OK, or the refusal's code).",
	}, []string{"op", "code"})
	m.APIBusy = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sutra_api_busy_total",
		Help: "API calls refused with 503 SUTRA.API.BUSY, by the cap they found full (max_bytes_in_flight, max_db_conns).",
	}, []string{"cap"})
	m.APIAuthFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sutra_api_auth_failures_total",
		Help: "Calls refused for their credentials (no valid token, a wrong client secret) and calls refused unchecked from an address that failed too often (throttled), by surface (api, oauth, gateway).",
	}, []string{"surface"})
	m.APILongPolls = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sutra_api_long_polls",
		Help: "Long polls (fetchAndLock with asyncResponseTimeout) waiting for tasks on this replica.",
	})
	m.APILongPollsOver = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sutra_api_long_polls_over_cap_total",
		Help: "Long polls answered at once, without waiting, because SUTRA_API_MAX_LONG_POLLS were waiting.",
	})
	m.RESTLongPolls = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sutra_rest_long_polls",
		Help: "Job activations of Camunda's REST API v2 (POST /v2/jobs/activation with a requestTimeout) waiting for jobs on this replica.",
	})
	m.GatewayRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sutra_gateway_requests_total",
		Help: "Calls of the Zeebe gateway (gRPC), by RPC and gRPC status code name (OK, NotFound, ResourceExhausted, ...).",
	}, []string{"rpc", "code"})
	m.GatewayConnectionsRefused = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sutra_gateway_connections_refused_total",
		Help: "Connections the Zeebe gateway closed at once because SUTRA_GATEWAY_MAX_CONNECTIONS were open.",
	})
	m.GatewayStreams = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sutra_gateway_streams_open",
		Help: "Job streams (StreamActivatedJobs) and ActivateJobs long polls open on this replica's Zeebe gateway.",
	})
	m.JobActivation = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "sutra_job_activation_seconds",
		Help:    "Time from a job's (task's) creation to its activation (lock) by a worker, by protocol (zeebe, engine-rest).",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 16),
	}, []string{"protocol"})
	m.MigrationInstances = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sutra_migrations_instances_total",
		Help: "Instances handled by bulk migrations, by outcome (migrated, retried, refused).",
	}, []string{"outcome"})
	m.ClaimsSwept = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sutra_claims_swept_total",
		Help: "Stale claims cleared by the sweep (their owner died or stalled past the claim timeout).",
	})
	m.LeaseHeld = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sutra_lease_held",
		Help: "1 while this replica holds the named lease.",
	}, []string{"name"})
	m.InboxTrimmed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sutra_inbox_trimmed_total",
		Help: "Relay message ids of the inbox of before its partitioning by day discarded past the retention (days past it are dropped whole, and logged).",
	})
	m.BufferedConsumed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sutra_buffered_consumed_total",
		Help: "Buffered messages applied by the step that opened their subscription.",
	})
	m.BufferedExpired = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sutra_buffered_expired_total",
		Help: "Buffered messages dead-lettered because their TTL passed with no subscription.",
	})
	m.OutboxPublished = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sutra_outbox_published_total",
		Help: "Outbox rows published and confirmed by the broker.",
	})
	m.OutboxPublishErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sutra_outbox_publish_errors_total",
		Help: "Outbox publishes not confirmed, by reason (returned: no queue bound; nacked; unavailable: no connection or it closed); the row is retried.",
	}, []string{"reason"})
	m.OutboxLag = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "sutra_outbox_lag_seconds",
		Help:    "Time from the commit that wrote an outbox row to the broker's confirm of its publish.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 1.5, 28), // 0.5 ms … 28 s, fine enough for a p99
	})
	m.OutboxBacklog = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sutra_outbox_backlog",
		Help: "Outbox rows not published yet, counted by the sweeper lease holder (0 on every other replica: sum over replicas).",
	})
	m.OutboxParked = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sutra_outbox_parked_total",
		Help: "BPMN messages parked (SUTRA.OUTBOX.UNROUTABLE) after the broker returned them on every one of SUTRA_OUTBOX_MAX_ATTEMPTS publishes.",
	})
	m.OutboxParkedRows = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sutra_outbox_parked",
		Help: "Parked outbox rows waiting for an operator's retry or discard, counted by the sweeper lease holder (0 on every other replica: sum over replicas).",
	})
	m.OutboxTrimmed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sutra_outbox_trimmed_total",
		Help: "Published outbox rows deleted after the retention.",
	})
	m.ClaimOldestAge = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sutra_claim_oldest_age_seconds",
		Help: "Age of the oldest claim held, by the sweeper lease holder (0 on every other replica: max over replicas). Past the claim timeout the sweep is not running.",
	})
	m.DeadLetterMessages = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sutra_dead_letter_messages",
		Help: "Messages in the dead-letter queue, by the sweeper lease holder (0 on every other replica: sum over replicas).",
	})
	m.IncidentsOpen = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sutra_incidents_open",
		Help: "Incidents not resolved, by the sweeper lease holder (0 on every other replica: sum over replicas).",
	})
	m.TasksOpen = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sutra_tasks_open",
		Help: "Pull tasks waiting for a worker's outcome, by topic, by the sweeper lease holder (none on every other replica: sum over replicas).",
	}, []string{"topic"})
	m.DeadLetters = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sutra_dead_letters_total",
		Help: "Messages dead-lettered and confirmed by the broker, by x-sutra-code (relays, and buffered messages whose ttl passed).",
	}, []string{"code"})
	info := buildinfo.Read()
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sutra_build_info",
		Help: "1, labelled with the running build's version, VCS revision and Go version.",
	}, []string{"version", "revision", "go_version"})
	build.WithLabelValues(info.Version, info.Revision, info.GoVersion).Set(1)
	reg.MustRegister(build)
	reg.MustRegister(m.Relays, m.RelayRequeues, m.ClaimBounces, m.StepDuration, m.BatchSteps, m.LaneDepth, m.LaneWait, m.StepsFenced, m.LanePanics,
		m.TimersFired, m.TimerDeferrals, m.TimersStale, m.TimerFireLag,
		m.TasksLocked, m.TasksCompleted, m.TasksLockExpired, m.TaskWait, m.TaskFastPath, m.AdminRequests, m.MigrationInstances,
		m.APIBusy, m.APIAuthFailures, m.APILongPolls, m.APILongPollsOver, m.RESTLongPolls, m.GatewayRequests, m.GatewayConnectionsRefused, m.GatewayStreams, m.JobActivation,
		m.ClaimsSwept, m.LeaseHeld, m.InboxTrimmed, m.BufferedConsumed, m.BufferedExpired,
		m.OutboxPublished, m.OutboxPublishErrors, m.OutboxLag, m.OutboxBacklog, m.OutboxParked, m.OutboxParkedRows, m.OutboxTrimmed,
		m.ClaimOldestAge, m.DeadLetterMessages, m.IncidentsOpen, m.TasksOpen, m.DeadLetters)
	for _, c := range []string{fault.RelayInvalid, fault.UnknownDefinition, fault.NotFound, fault.InstanceExists, fault.NotWaiting,
		fault.RelayUncorrelated, fault.StartKeyActive, fault.StepPanic, fault.StepFailed, fault.RetriesExhausted} {
		m.DeadLetters.WithLabelValues(c)
	}
	for _, r := range []string{PublishReturned, PublishNacked, PublishUnavailable} {
		m.OutboxPublishErrors.WithLabelValues(r)
	}
	for _, o := range []string{OutcomeCommitted, OutcomeDuplicate, OutcomeRequeued, OutcomeDeadLettered, OutcomeBuffered, OutcomeStale} {
		m.Relays.WithLabelValues(o)
	}
	for _, p := range []string{PathRelay, PathTimer, PathTask, PathAdmin} {
		m.ClaimBounces.WithLabelValues(p)
	}
	m.BrokerBlocked = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sutra_broker_blocked",
		Help: "1 while the broker blocks the connection (connection.blocked: a memory or disk alarm), by connection (consume, publish).",
	}, []string{"connection"})
	reg.MustRegister(m.BrokerBlocked)
	for _, c := range []string{BrokerConsuming, BrokerPublishing} {
		m.BrokerBlocked.WithLabelValues(c)
	}
	return m
}

package app

import (
	"time"

	"github.com/sutra-run/worker/api"
	apiadmin "github.com/sutra-run/worker/api/admin"
	"github.com/sutra-run/worker/api/rest"
	"github.com/sutra-run/worker/api/tasks"
	"github.com/sutra-run/worker/api/taskwait"
	"github.com/sutra-run/worker/api/zeebe"
	"github.com/sutra-run/worker/broker"
	"github.com/sutra-run/worker/consumer"
	"github.com/sutra-run/worker/docs"
	"github.com/sutra-run/worker/feel"
	"github.com/sutra-run/worker/internal/buildinfo"
	"github.com/sutra-run/worker/lanes"
	"github.com/sutra-run/worker/operations"
	"github.com/sutra-run/worker/outbox"
	"github.com/sutra-run/worker/replica"
	"github.com/sutra-run/worker/store"
	"github.com/sutra-run/worker/sweeper"
	"github.com/sutra-run/worker/timers"
	"github.com/sutra-run/worker/usecase"
)

// Defaults is the worker's configuration before the environment, each
// default written once: a knob a component has reads the component's own
// default (its DefaultConfig), and only the knobs no component has (the
// URLs, the metrics listener, the switches whose zero means off) are
// written here. cmd/worker reads the environment over it.
func Defaults() Config {
	ln, co, tm, sw, ob := lanes.DefaultConfig(), consumer.DefaultConfig(), timers.DefaultConfig(), sweeper.DefaultConfig(), outbox.DefaultConfig()
	br, ap, ad, ts, gw := broker.DefaultConfig(), api.DefaultConfig(), apiadmin.DefaultConfig(), tasks.DefaultConfig(), zeebe.DefaultConfig()
	return Config{
		Process: Process{HTTPAddr: ":9464", ShutdownTimeout: 30 * time.Second, Migrate: true, LogLevel: "info"},
		Database: Database{URL: "postgres://postgres@127.0.0.1:5432/sutra", MaxVariablesBytes: store.DefaultMaxVariablesBytes,
			MaxCommitBytes: store.DefaultMaxCommitBytes, SignalBroadcastPage: store.DefaultBroadcastPage},
		Broker: Broker{URL: br.URL, WriteTimeout: br.WriteTimeout, ChannelTimeout: br.ChannelTimeout,
			RelayExchange: ob.RelayExchange, RelayQueue: co.Queue, RelayBindingKey: broker.DefaultRelayBindingKey,
			DeadExchange: co.DeadExchange, DeadQueue: sw.DeadQueue, OutboxExchange: ob.Exchange},
		// A batch wait of 0 means never wait, so lanes has no default for it.
		Lanes: Lanes{Count: ln.Lanes, BatchMax: ln.BatchMax, BatchWait: 2 * time.Millisecond, ClaimTimeout: ln.ClaimTimeout,
			StepTimeout: ln.StepTimeout, FeelMaxSteps: feel.DefaultMaxSteps, FeelMaxBytes: feel.DefaultMaxBytes, StepHistory: true},
		Consumer: Consumer{Prefetch: co.Prefetch, RequeueBackoff: co.RequeueBackoff, RequeueBackoffMax: co.RequeueBackoffMax,
			MaxRetries: co.MaxRetries},
		Timers: Timers{PollInterval: tm.PollInterval, Batch: tm.BatchSize, MaxInFlight: tm.MaxInFlight, Lease: tm.Lease,
			Backoff: tm.Backoff, BackoffMax: tm.BackoffMax, MaxAttempts: tm.MaxAttempts},
		Sweeper: Sweeper{Interval: sw.Interval, LeaseTTL: sw.LeaseTTL, InboxRetention: sw.InboxRetention,
			OutboxRetention: sw.OutboxRetention, StepHistoryRetention: sw.StepHistoryRetention},
		Outbox: Outbox{PollInterval: ob.PollInterval, Lease: ob.Lease, Batch: ob.BatchSize, MaxAttempts: ob.MaxAttempts},
		API: API{Addr: ap.Addr, OAuthTokenTTL: api.DefaultTokenTTL, UI: true, MaxConns: ap.Limits.MaxConns,
			MaxBody: ap.Limits.MaxBody, MaxBytesInFlight: ap.Limits.MaxBytesInFlight, MaxDBConns: ap.Limits.MaxDBConns,
			MaxDeployBody: ad.MaxDeployBody, MaxScan: ad.MaxScan, AuthFailureBurst: api.DefaultAuthFailureBurst},
		Tasks: Tasks{MaxTasks: ts.MaxTasks, MaxTopics: ts.MaxTopics, MaxLongPolls: ts.MaxLongPolls,
			MaxLockDuration: ts.MaxLockDuration, MaxRetryTimeout: ts.MaxRetryTimeout, PollInterval: taskwait.DefaultPollInterval,
			FastPath: true},
		Gateway: Gateway{Addr: gw.Addr, MaxStreams: gw.MaxStreams, MaxJobs: gw.MaxJobsToActivate, MaxMessageSize: gw.MaxMessageSize,
			MaxConnections: gw.MaxConnections, MaxStreamsPerConnection: gw.MaxStreamsPerConnection, AuthTimeout: gw.AuthTimeout},
	}
}

// Each component's configuration from the worker's: the one place a knob
// meets the component it sets, so that Start only wires. A knob two
// components share (the step timeout, the relay exchange) is read here by
// both.

// Topology is the broker topology the configuration names.
func (b Broker) Topology() broker.Topology {
	return broker.Topology{
		RelayExchange: b.RelayExchange, RelayQueue: b.RelayQueue, RelayBindingKey: b.RelayBindingKey,
		DeadExchange: b.DeadExchange, DeadQueue: b.DeadQueue, QueueType: b.QueueType,
		OutboxExchange: b.OutboxExchange,
	}
}

func (c Config) storeOptions(syncClaims bool) store.Options {
	return store.Options{MaxConns: int32(c.PoolSize()), SyncClaims: syncClaims,
		MaxVariablesBytes: c.Database.MaxVariablesBytes, MaxCommitBytes: c.Database.MaxCommitBytes,
		BroadcastPage: c.Database.SignalBroadcastPage}
}

func (c Config) replicaConfig() replica.Config {
	bi := buildinfo.Read()
	return replica.Config{ID: c.ReplicaID, TTL: c.Sweeper.LeaseTTL,
		Version: store.ReplicaVersion{Release: bi.Version, Revision: bi.Revision, Schema: store.SchemaVersion()}}
}

func (c Config) feelLimits() feel.Limits {
	return feel.Limits{MaxSteps: c.Lanes.FeelMaxSteps, MaxBytes: c.Lanes.FeelMaxBytes}
}

// timerMaxInFlight is the timer fires the lanes' inboxes must have room for.
func (c Config) timerMaxInFlight() int {
	if c.Timers.MaxInFlight <= 0 {
		return timers.DefaultMaxInFlight
	}
	return c.Timers.MaxInFlight
}

func (c Config) credentials() api.Credentials {
	return api.Credentials{TaskToken: c.API.Token, TaskInsecure: c.API.Insecure,
		AdminToken: c.API.AdminToken, AdminInsecure: c.API.AdminInsecure, TokenTTL: c.API.OAuthTokenTTL}
}

func (c Config) apiConfig() api.Config {
	return api.Config{Addr: c.API.Addr, TLSCert: c.API.TLSCert, TLSKey: c.API.TLSKey, Credentials: c.credentials(),
		Limits: api.Limits{MaxConns: c.API.MaxConns, MaxBody: c.API.MaxBody,
			MaxBytesInFlight: c.API.MaxBytesInFlight, MaxDBConns: c.API.MaxDBConns}}
}

func (c Config) jobsConfig() taskwait.Config {
	return taskwait.Config{PollInterval: c.Tasks.PollInterval}
}

func (c Config) tasksConfig() tasks.Config {
	return tasks.Config{MaxTasks: c.Tasks.MaxTasks, MaxTopics: c.Tasks.MaxTopics, MaxLongPolls: c.Tasks.MaxLongPolls,
		MaxLockDuration: c.Tasks.MaxLockDuration, MaxRetryTimeout: c.Tasks.MaxRetryTimeout, MaxBody: c.API.MaxBody}
}

func (c Config) adminAPIConfig() apiadmin.Config {
	return apiadmin.Config{Replica: c.ReplicaID, OpenAPI: docs.OpenAPI, MaxBody: c.API.MaxBody, MaxDeployBody: c.API.MaxDeployBody,
		MaxScan: c.API.MaxScan}
}

func (c Config) restConfig() rest.Config {
	return rest.Config{MaxBody: c.API.MaxBody, MaxDeployBody: c.API.MaxDeployBody, MaxLongPolls: c.Tasks.MaxLongPolls,
		MaxJobsToActivate: c.Gateway.MaxJobs, MaxLockDuration: c.Tasks.MaxLockDuration}
}

func (c Config) useCasesConfig() usecase.Config {
	return usecase.Config{StepTimeout: c.Lanes.StepTimeout, FeelLimits: c.feelLimits()}
}

func (c Config) lanesConfig() lanes.Config {
	return lanes.Config{Replica: c.ReplicaID, Lanes: c.Lanes.Count,
		// Room for every resume that can be in flight: relays and timer fires.
		InboxSize:    c.Consumer.Prefetch + c.timerMaxInFlight() + 1,
		ClaimTimeout: c.Lanes.ClaimTimeout, BatchMax: c.Lanes.BatchMax, BatchWait: c.Lanes.BatchWait, StepTimeout: c.Lanes.StepTimeout,
		FeelLimits: c.feelLimits(), NoStepHistory: !c.Lanes.StepHistory}
}

func (c Config) gatewayConfig() zeebe.Config {
	return zeebe.Config{Addr: c.Gateway.Addr, TLSCert: c.Gateway.TLSCert, TLSKey: c.Gateway.TLSKey, Credentials: c.credentials(),
		MaxStreams: c.Gateway.MaxStreams, MaxJobsToActivate: c.Gateway.MaxJobs, MaxMessageSize: c.Gateway.MaxMessageSize,
		MaxConnections: c.Gateway.MaxConnections, MaxStreamsPerConnection: c.Gateway.MaxStreamsPerConnection, AuthTimeout: c.Gateway.AuthTimeout,
		MaxLockDuration: c.Tasks.MaxLockDuration}
}

func (c Config) migrationsConfig() operations.RunnerConfig {
	return operations.RunnerConfig{Replica: c.ReplicaID}
}

func (c Config) batchesConfig() operations.BatchConfig {
	return operations.BatchConfig{Replica: c.ReplicaID, Scan: c.API.MaxScan}
}

func (c Config) timersConfig() timers.Config {
	return timers.Config{Replica: c.ReplicaID, PollInterval: c.Timers.PollInterval, BatchSize: c.Timers.Batch,
		MaxInFlight: c.timerMaxInFlight(), Lease: c.Timers.Lease, Backoff: c.Timers.Backoff,
		BackoffMax: c.Timers.BackoffMax, MaxAttempts: c.Timers.MaxAttempts}
}

func (c Config) brokerConfig() broker.Config {
	return broker.Config{URL: c.Broker.URL, ConnectionName: "sutra-worker/" + c.ReplicaID,
		WriteTimeout: c.Broker.WriteTimeout, ChannelTimeout: c.Broker.ChannelTimeout, Topology: c.Broker.Topology()}
}

func (c Config) sweeperConfig() sweeper.Config {
	return sweeper.Config{Replica: c.ReplicaID, Interval: c.Sweeper.Interval, LeaseTTL: c.Sweeper.LeaseTTL,
		ClaimTimeout: c.Lanes.ClaimTimeout, InboxRetention: c.Sweeper.InboxRetention, OutboxRetention: c.Sweeper.OutboxRetention,
		StepHistoryRetention: c.Sweeper.StepHistoryRetention,
		DeadExchange:         c.Broker.DeadExchange, RelayExchange: c.Broker.RelayExchange, DeadQueue: c.Broker.DeadQueue}
}

func (c Config) consumerConfig() consumer.Config {
	return consumer.Config{Queue: c.Broker.RelayQueue, DeadExchange: c.Broker.DeadExchange, Prefetch: c.Consumer.Prefetch,
		RequeueBackoff: c.Consumer.RequeueBackoff, RequeueBackoffMax: c.Consumer.RequeueBackoffMax, MaxRetries: c.Consumer.MaxRetries}
}

func (c Config) outboxConfig() outbox.Config {
	return outbox.Config{Replica: c.ReplicaID, Exchange: c.Broker.OutboxExchange, RelayExchange: c.Broker.RelayExchange,
		PollInterval: c.Outbox.PollInterval, Lease: c.Outbox.Lease, BatchSize: c.Outbox.Batch, MaxAttempts: c.Outbox.MaxAttempts}
}

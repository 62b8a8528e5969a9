package app

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"reflect"
	"strings"
	"time"
)

// Config is every knob of the worker, read from SUTRA_* environment
// variables (envconfig), grouped by the component it configures. Each group
// is embedded, so envconfig adds no prefix: the variable names are those of
// the envconfig tags. Defaults (not tags) holds every default, one that
// works against local PostgreSQL and RabbitMQ.
type Config struct {
	Process
	Database
	Broker
	Lanes
	Consumer
	Timers
	Sweeper
	Outbox
	API
	Tasks
	Gateway
}

// Process configures the process: its identity, its own HTTP listener, its stop, its logs and migrations.
type Process struct {
	ReplicaID       string        `envconfig:"REPLICA_ID" desc:"this replica's id in claim owners (default: hostname plus a random suffix)"`
	HTTPAddr        string        `envconfig:"HTTP_ADDR" desc:"listen address of /metrics, /healthz and /readyz"`
	ShutdownTimeout time.Duration `envconfig:"SHUTDOWN_TIMEOUT" desc:"how long a stop lets in-flight steps finish; the process exits within it plus about 0.2s (2s more at most for a stuck step)"`
	Migrate         bool          `envconfig:"MIGRATE" desc:"apply migrations (and create the database) when run starts"`
	LogFormat       string        `envconfig:"LOG_FORMAT" desc:"json or text (default: text on a terminal, json otherwise)"`
	LogLevel        string        `envconfig:"LOG_LEVEL" desc:"debug, info, warn or error"`
}

// Database configures the store: the database and what one step may write (store.Options).
type Database struct {
	URL                 string `envconfig:"DATABASE_URL" desc:"PostgreSQL URL; the database is created by migrate if missing; several hosts (postgres://h1:5432,h2:5432/sutra?target_session_attrs=read-write) for a primary that fails over"`
	MaxVariablesBytes   int    `envconfig:"MAX_VARIABLES_BYTES" desc:"largest an instance's variables may grow, in bytes of JSON; a step past it is refused, nothing written (SUTRA.RUNTIME.STEP.TOO_LARGE: a relay is dead-lettered, an admin call answered 422)"`
	MaxCommitBytes      int    `envconfig:"MAX_COMMIT_BYTES" desc:"most bytes of JSON one step's commit may write (variables, tokens, task inputs, messages, child starts); a step past it is refused like one past SUTRA_MAX_VARIABLES_BYTES"`
	SignalBroadcastPage int    `envconfig:"SIGNAL_BROADCAST_PAGE" desc:"signal subscriptions one transaction of a signal broadcast reads and relays; a broadcast to more goes page by page"`
}

// Broker configures the broker connection and its topology (broker.Config).
type Broker struct {
	URL             string        `envconfig:"AMQP_URL" desc:"RabbitMQ URL, or a comma-separated list of the URLs of one cluster's nodes (one virtual host, one user): the worker connects to the first that answers and to the next when that connection is lost; isolate deployments by vhost"`
	WriteTimeout    time.Duration `envconfig:"AMQP_WRITE_TIMEOUT" desc:"longest one write to the broker may take (a publish, an ack, a heartbeat); past it the connection is closed and redialled: a broker that stopped reading from it (a stalled peer, a memory or disk alarm) holds nothing longer"`
	ChannelTimeout  time.Duration `envconfig:"AMQP_CHANNEL_TIMEOUT" desc:"longest the opening of a channel (the consumer's, with its QoS and consume; the dead-letter count's) waits for the broker's answers; then it is tried again"`
	RelayExchange   string        `envconfig:"RELAY_EXCHANGE" desc:"durable topic exchange relays are published to"`
	RelayQueue      string        `envconfig:"RELAY_QUEUE" desc:"durable queue the worker consumes"`
	RelayBindingKey string        `envconfig:"RELAY_BINDING_KEY" desc:"binding key of the relay queue"`
	DeadExchange    string        `envconfig:"DEAD_EXCHANGE" desc:"exchange dead letters are published to"`
	DeadQueue       string        `envconfig:"DEAD_QUEUE" desc:"queue bound to the dead-letter exchange"`
	QueueType       string        `envconfig:"QUEUE_TYPE" desc:"x-queue-type of the declared queues (classic, quorum); empty: the broker's default"`
	OutboxExchange  string        `envconfig:"OUTBOX_EXCHANGE" desc:"durable topic exchange BPMN messages are published to (routing key: the message name)"`
}

// Lanes configures the lanes and the step they run (lanes.Config).
type Lanes struct {
	Count        int           `envconfig:"LANES" desc:"lane goroutines; each runs one step at a time"`
	BatchMax     int           `envconfig:"BATCH_MAX" desc:"most relays a lane claims in one statement and commits in one transaction, from those already queued; 1: one step per transaction"`
	BatchWait    time.Duration `envconfig:"BATCH_WAIT" desc:"longest a relay waits for other lanes' relays to share its claim and its commit, and only while relays arrive at two or more per wait on average; 0: never wait"`
	ClaimTimeout time.Duration `envconfig:"CLAIM_TIMEOUT" desc:"age after which a claim is stale and may be taken over"`
	StepTimeout  time.Duration `envconfig:"STEP_TIMEOUT" desc:"longest the engine computes one step or admin operation; past it the expression being evaluated and the tokens left stop in SUTRA.INCIDENT.EXPRESSION_LIMIT incidents, which the step commits (below SUTRA_CLAIM_TIMEOUT)"`
	FeelMaxSteps int           `envconfig:"FEEL_MAX_STEPS" desc:"work one expression evaluation may do (nodes, iterations, items, 16 bytes of string read or built); over it: incident SUTRA.INCIDENT.EXPRESSION_LIMIT"`
	FeelMaxBytes int           `envconfig:"FEEL_MAX_BYTES" desc:"bytes one expression evaluation may build and return (strings, list items, context entries, its result as JSON); over it: incident SUTRA.INCIDENT.EXPRESSION_LIMIT"`
	StepHistory  bool          `envconfig:"STEP_HISTORY" desc:"write one row per step into the history of its instance (GET /v1/instances/{id}/history, the console); false leaves it out, which makes a cheap step's commit about a sixth cheaper (BENCHMARKS.md)"`
}

// Consumer configures relay consumption (consumer.Config).
type Consumer struct {
	Prefetch          int           `envconfig:"PREFETCH" desc:"unacknowledged relays in flight per replica"`
	RequeueBackoff    time.Duration `envconfig:"REQUEUE_BACKOFF" desc:"first delay before a refused relay is requeued; doubles per bounce"`
	RequeueBackoffMax time.Duration `envconfig:"REQUEUE_BACKOFF_MAX" desc:"cap of the requeue delay"`
	MaxRetries        int           `envconfig:"RELAY_MAX_RETRIES" desc:"transient failures of one relay before it is dead-lettered (RETRIES_EXHAUSTED); held claims and outages do not count"`
}

// Timers configures the timer poller (timers.Config).
type Timers struct {
	PollInterval time.Duration `envconfig:"TIMER_POLL_INTERVAL" desc:"longest the timer poller goes without looking for timers armed by other replicas"`
	Batch        int           `envconfig:"TIMER_BATCH" desc:"due timers leased per statement"`
	MaxInFlight  int           `envconfig:"TIMER_MAX_IN_FLIGHT" desc:"timer fires handed to lanes and not yet answered"`
	Lease        time.Duration `envconfig:"TIMER_LEASE" desc:"how long a leased timer is kept from other replicas' pollers"`
	Backoff      time.Duration `envconfig:"TIMER_BACKOFF" desc:"first deferral of a refused timer fire; doubles per attempt"`
	BackoffMax   time.Duration `envconfig:"TIMER_BACKOFF_MAX" desc:"cap of the timer deferral"`
	MaxAttempts  int           `envconfig:"TIMER_MAX_ATTEMPTS" desc:"failed fires of one timer before it stops in an incident (SUTRA.INCIDENT.TIMER_FAILED, retried by the admin API); held claims and outages do not count"`
}

// Sweeper configures the lease-gated sweeper and its trims (sweeper.Config).
type Sweeper struct {
	Interval             time.Duration `envconfig:"SWEEP_INTERVAL" desc:"time between sweeps of stale claims on the lease holder"`
	LeaseTTL             time.Duration `envconfig:"LEASE_TTL" desc:"how long the sweeper lease and the replica id registration last unrenewed; a replica restarted after a crash waits up to this long for its id"`
	InboxRetention       time.Duration `envconfig:"INBOX_RETENTION" desc:"how long applied relay message ids are kept to recognise redeliveries"`
	OutboxRetention      time.Duration `envconfig:"OUTBOX_RETENTION" desc:"how long published outbox rows are kept"`
	StepHistoryRetention time.Duration `envconfig:"STEP_HISTORY_RETENTION" desc:"how long the history of each instance's steps (GET /v1/instances/{id}/history) keeps a step before the sweeper deletes it"`
}

// Outbox configures the outbox publisher (outbox.Config).
type Outbox struct {
	PollInterval time.Duration `envconfig:"OUTBOX_POLL_INTERVAL" desc:"longest the outbox publisher goes without looking for rows written by other replicas"`
	Lease        time.Duration `envconfig:"OUTBOX_LEASE" desc:"how long leased outbox rows are kept from other replicas' publishers"`
	Batch        int           `envconfig:"OUTBOX_BATCH" desc:"outbox rows leased per statement"`
	MaxAttempts  int           `envconfig:"OUTBOX_MAX_ATTEMPTS" desc:"publishes of a BPMN message the broker may return (no queue bound) before it is parked (SUTRA.OUTBOX.UNROUTABLE, GET /v1/outbox/parked)"`
}

// API configures the API listener, its credentials and limits, the admin API and the console (api.Config, api/admin).
type API struct {
	Addr             string        `envconfig:"API_ADDR" desc:"listen address of the HTTP API (the Camunda external-task protocol under /engine-rest, the admin API under /v1); empty: no API listener"`
	TLSCert          string        `envconfig:"API_TLS_CERT" desc:"PEM certificate (chain) file of the API listener; with SUTRA_API_TLS_KEY it serves HTTPS (set both or neither)"`
	TLSKey           string        `envconfig:"API_TLS_KEY" desc:"PEM private key file of SUTRA_API_TLS_CERT"`
	Token            string        `envconfig:"API_TOKEN" desc:"token of task workers (Bearer, or HTTP Basic password): the external-task API and the user-task routes of /v1; required while the API listener is on, unless SUTRA_API_INSECURE=true"`
	Insecure         bool          `envconfig:"API_INSECURE" desc:"let a worker with no SUTRA_API_TOKEN serve its task API to every caller (a trusted network only: anyone who reaches the port may lock tasks and read their variables)"`
	AdminToken       string        `envconfig:"ADMIN_TOKEN" desc:"token of operators (Bearer) for the admin API under /v1 (sutractl sends it); must differ from SUTRA_API_TOKEN, which the admin API refuses (403 SUTRA.API.FORBIDDEN); unset: the admin API is off (403 SUTRA.ADMIN.DISABLED) unless SUTRA_ADMIN_INSECURE=true"`
	AdminInsecure    bool          `envconfig:"ADMIN_INSECURE" desc:"with no SUTRA_ADMIN_TOKEN, open the admin API to every caller (a trusted network only: anyone who reaches the port may cancel instances); refused beside SUTRA_API_TOKEN or SUTRA_ADMIN_TOKEN"`
	OAuthTokenTTL    time.Duration `envconfig:"OAUTH_TOKEN_TTL" desc:"how long an access token from POST /oauth/token lasts (OAuth 2.0 client credentials: the client secret is SUTRA_API_TOKEN or SUTRA_ADMIN_TOKEN, and the token opens that token's routes); whole seconds, at least 1s"`
	UI               bool          `envconfig:"UI" desc:"serve the web console at /ui/ on the API listener (docs/console.md); its page and assets hold no data and are served without credentials, the page asks for a token"`
	MaxConns         int           `envconfig:"API_MAX_CONNS" desc:"open connections of the API listener; more wait in the kernel's accept queue"`
	MaxBody          int64         `envconfig:"API_MAX_BODY" desc:"largest body in bytes of a task completion, failure or BPMN error and of the admin calls that carry variables (413 SUTRA.API.TOO_LARGE)"`
	MaxBytesInFlight int64         `envconfig:"API_MAX_BYTES_IN_FLIGHT" desc:"request body bytes the API reads and decodes at once on this replica; a call that finds no room within 1s is refused (503 SUTRA.API.BUSY)"`
	MaxDBConns       int           `envconfig:"API_MAX_DB_CONNS" desc:"database connections API calls use at once; a call that gets none within 1s is refused (503 SUTRA.API.BUSY); the pool has SUTRA_LANES + 2 + this many"`
	MaxDeployBody    int64         `envconfig:"API_MAX_DEPLOY_BODY" desc:"largest BPMN or DMN file in bytes a deploy may send (413 SUTRA.API.TOO_LARGE)"`
	AuthFailureBurst int           `envconfig:"API_AUTH_FAILURE_BURST" desc:"failed credentials one source address (an IPv4 address, an IPv6 /64) may have at once on the API listener, /oauth/token and the Zeebe gateway, regained at one a second; past them its calls are refused unchecked (429 SUTRA.API.AUTH_THROTTLED, gRPC ResourceExhausted) until one is regained; 0: count and log failures, throttle none (behind a proxy that hides the clients' addresses)"`
	MaxScan          int           `envconfig:"API_MAX_SCAN" desc:"most instances one page of GET /v1/instances walks to check the filters no index serves (version, status, incident, a variable, creation time), and one page of a version's element statistics may count (500 unless it asks); past it the page answers what it found and the cursor to go on"`
}

// Tasks configures the task protocols: /engine-rest's limits and the job waiters both protocols share (api/tasks, api/taskwait).
type Tasks struct {
	MaxTasks        int           `envconfig:"API_MAX_TASKS" desc:"largest maxTasks a fetchAndLock may ask for"`
	MaxTopics       int           `envconfig:"API_MAX_TOPICS" desc:"most topics one fetchAndLock may ask for (its body may have 1 KiB plus 512 bytes per topic allowed)"`
	MaxLongPolls    int           `envconfig:"API_MAX_LONG_POLLS" desc:"long polls waiting at once on this replica; one over it is answered at once with what one fetch locked, maybe an empty list"`
	MaxLockDuration time.Duration `envconfig:"API_MAX_LOCK_DURATION" desc:"longest lock a task worker may take or extend to"`
	MaxRetryTimeout time.Duration `envconfig:"API_MAX_RETRY_TIMEOUT" desc:"longest retryTimeout a task failure may ask for (400 SUTRA.API.INVALID_REQUEST)"`
	PollInterval    time.Duration `envconfig:"TASK_POLL_INTERVAL" desc:"how often waiting long polls and job streams (/engine-rest and Zeebe) look for tasks other replicas created, and the Zeebe gateway's CreateProcessInstanceWithResult for ends they committed (this replica's own wake them at once)"`
	FastPath        bool          `envconfig:"TASK_FAST_PATH" desc:"hand a recorded task outcome (external task, user task) to this replica's lanes at once; its outbox relay still follows and is acked as a duplicate (false: the relay alone applies it, a broker round trip later)"`
}

// Gateway configures the Zeebe gateway (api/zeebe).
type Gateway struct {
	Addr           string `envconfig:"GATEWAY_ADDR" desc:"listen address of the Zeebe gateway (gRPC; Camunda 8 clients, zbctl); it takes the tokens of the API listener; empty: no gateway"`
	TLSCert        string `envconfig:"GATEWAY_TLS_CERT" desc:"PEM certificate (chain) file of the Zeebe gateway; with SUTRA_GATEWAY_TLS_KEY it serves TLS (set both or neither)"`
	TLSKey         string `envconfig:"GATEWAY_TLS_KEY" desc:"PEM private key file of SUTRA_GATEWAY_TLS_CERT"`
	MaxStreams     int    `envconfig:"GATEWAY_MAX_STREAMS" desc:"job streams and ActivateJobs long polls open at once on this replica's Zeebe gateway, and apart from them CreateProcessInstanceWithResult calls waiting for their end; one over it is refused (ResourceExhausted)"`
	MaxJobs        int    `envconfig:"GATEWAY_MAX_JOBS" desc:"largest maxJobsToActivate an ActivateJobs may ask for (ResourceExhausted)"`
	MaxMessageSize int    `envconfig:"GATEWAY_MAX_MESSAGE_SIZE" desc:"largest gRPC request message in bytes the Zeebe gateway reads (ResourceExhausted)"`

	MaxConnections          int           `envconfig:"GATEWAY_MAX_CONNECTIONS" desc:"open connections of the Zeebe gateway; one over it is closed at once (sutra_gateway_connections_refused_total); with SUTRA_API_MAX_CONNS it must leave the process's descriptor limit room for the pool and the other listeners, or the start is refused"`
	MaxStreamsPerConnection int           `envconfig:"GATEWAY_MAX_STREAMS_PER_CONNECTION" desc:"concurrent gRPC streams of one Zeebe gateway connection; one over it is refused (REFUSED_STREAM)"`
	AuthTimeout             time.Duration `envconfig:"GATEWAY_AUTH_TIMEOUT" desc:"a Zeebe gateway connection on which no call presented valid credentials within it is closed"`
}

// Variable is one environment variable the worker reads, as its field in
// Config declares it.
type Variable struct {
	Name, Default, Description string
}

// Variables lists every variable the worker reads, in the order of Config
// and its groups, with its default (Defaults) as the environment spells it.
func Variables() []Variable {
	return variables(reflect.ValueOf(Defaults()))
}

func variables(v reflect.Value) []Variable {
	var vs []Variable
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			vs = append(vs, variables(v.Field(i))...) // a group: envconfig adds no prefix
			continue
		}
		if k := f.Tag.Get("envconfig"); k != "" {
			vs = append(vs, Variable{Name: "SUTRA_" + k, Default: spell(v.Field(i)), Description: f.Tag.Get("desc")})
		}
	}
	return vs
}

// spell writes a default as one would set it: 168h rather than 168h0m0s;
// an empty string for a knob with no default.
func spell(v reflect.Value) string {
	switch x := v.Interface().(type) {
	case time.Duration:
		s := x.String()
		if strings.HasSuffix(s, "m0s") {
			s = strings.TrimSuffix(s, "0s")
		}
		if strings.HasSuffix(s, "h0m") {
			s = strings.TrimSuffix(s, "0m")
		}
		return s
	case string:
		return x
	default:
		return fmt.Sprint(x)
	}
}

// DefaultReplicaID is the hostname plus a random suffix, so that two
// processes on one host never share claim owners.
func DefaultReplicaID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "worker"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return host + "-" + hex.EncodeToString(b[:])
}

// Package tasks serves Camunda 7's external-task protocol under
// /engine-rest on the API listener, which Camunda's external-task clients
// speak unchanged, so that pull tasks are worked by the clients users
// already have. Its callers present SUTRA_API_TOKEN (api.Tasks); its errors
// have Camunda's shape, {"type", "message", "code"}.
//
// Nothing here claims an instance: a worker's outcome is recorded on the
// task row, fenced on the lock holder, together with the outbox row that
// carries it to the step pipeline as a relay, and answered only once that is
// durable. The step then runs like any other (claim, engine, commit): the
// relay is handed to this replica's lanes at once (Deps.Handoff), and the
// outbox's copy, published later, applies it should that not.
package tasks

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/sutra-run/worker/api"
	"github.com/sutra-run/worker/api/taskwait"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/defaults"
	"github.com/sutra-run/worker/internal/testsignal"
	"github.com/sutra-run/worker/metrics"
	"github.com/sutra-run/worker/usecase"
)

// Store is what the task API needs from the database (*store.Store).
type Store interface {
	ExtendLock(ctx context.Context, id int64, worker string, d time.Duration) error
	Unlock(ctx context.Context, id int64) error
}

// Config configures the task API.
type Config struct {
	// MaxTasks caps fetchAndLock's maxTasks (default 100).
	MaxTasks int
	// MaxTopics caps the topics of one fetchAndLock (default 100); its body
	// is capped by FetchBodyLimit.
	MaxTopics int
	// MaxAsyncResponseTimeout caps a long poll (default taskwait.MaxLongPoll).
	MaxAsyncResponseTimeout time.Duration
	// MaxLongPolls caps the long polls waiting at once (default 256). A
	// long poll over it is served as a fetch that does not wait: it answers
	// at once, with what it locked or an empty list, which Camunda's clients
	// take as "nothing now" and poll again after their back-off.
	MaxLongPolls int
	// MaxLockDuration caps a task lock (default 24h), so that no client can
	// lock a task for ever.
	MaxLockDuration time.Duration
	// MaxRetryTimeout caps a failure's retryTimeout (default 24h).
	MaxRetryTimeout time.Duration
	// MaxBody caps the body of a completion, a failure and a BPMN error
	// (default 1 MiB).
	MaxBody int64
}

func (c *Config) setDefaults() {
	defaults.Set(&c.MaxTasks, 100)
	defaults.Set(&c.MaxTopics, 100)
	defaults.Set(&c.MaxAsyncResponseTimeout, taskwait.MaxLongPoll)
	defaults.Set(&c.MaxLongPolls, 256)
	defaults.Set(&c.MaxLockDuration, 24*time.Hour)
	defaults.Set(&c.MaxRetryTimeout, 24*time.Hour)
	defaults.Set(&c.MaxBody, 1<<20)
}

// DefaultConfig is the configuration New fills unset fields from; the
// worker's defaults (app.Defaults) are read here, not written again.
func DefaultConfig() Config {
	var c Config
	c.setDefaults()
	return c
}

// Deps are the task API's collaborators.
type Deps struct {
	Store Store
	// UseCases serve the calls: fetches wait for tasks in their one wait
	// (usecase.Activate), with the Zeebe gateway's.
	UseCases *usecase.UseCases
	Metrics  *metrics.Metrics
	Logger   *slog.Logger
}

// TestSignals tell tests what the task API did; inert unless Init'ed.
type TestSignals struct {
	// Waiting carries the topics of every long poll that found nothing and
	// starts to wait.
	Waiting testsignal.Signal[[]string]
}

// Init switches every signal on.
func (s *TestSignals) Init() { s.Waiting.Init() }

// API is the task API, served on an api.Server.
type API struct {
	TestSignals TestSignals
	cfg         Config
	deps        Deps
	srv         *api.Server
	// slots cap the long polls waiting at once (MaxLongPolls).
	slots *taskwait.Slots
	// stopping is closed when the listener stops: long polls answer at once.
	stopping chan struct{}
}

// base is the Camunda REST base path the external-task clients default to.
const base = "/engine-rest"

// smallBody caps the bodies of extendLock and unlock, which carry a worker
// id and a duration.
const smallBody = 4 << 10

// FetchBodyLimit caps a fetchAndLock's body: 512 bytes per topic allowed
// (a name, a lock duration, a few variable names and definition keys), and
// 1 KiB for the rest. A long poll keeps what it decoded of it while it
// waits (about four times its size).
func FetchBodyLimit(maxTopics int) int64 { return 1<<10 + int64(maxTopics)<<9 }

// protocol writes the listener's refusals in Camunda's error shape. A 401
// challenges with Basic too, which Camunda's clients use; a bodiless call
// may name no media type, as Camunda's Node client sends its unlock.
var protocol = api.Protocol{
	Refuse: func(w http.ResponseWriter, status int, code, msg string) {
		typ := "InvalidRequestException"
		if code == fault.APIUnauthorized || code == fault.APIForbidden {
			typ = "AuthenticationException"
		}
		writeError(w, status, typ, code, msg)
	},
	Challenge:       `Bearer realm="sutra", Basic realm="sutra"`,
	UntypedBodiless: true,
}

// New registers the task API's routes on srv.
func New(srv *api.Server, deps Deps, cfg Config) *API {
	cfg.setDefaults()
	a := &API{cfg: cfg, deps: deps, srv: srv, slots: taskwait.NewSlots(cfg.MaxLongPolls, deps.Metrics.APILongPolls.Set),
		stopping: make(chan struct{})}
	route := func(pattern string, limit int64, h http.HandlerFunc) {
		srv.Handle(protocol, api.Route{Pattern: "POST " + base + pattern, Scopes: api.Tasks, BodyLimit: limit, Handler: h})
	}
	route("/external-task/fetchAndLock", FetchBodyLimit(cfg.MaxTopics), a.fetchAndLock)
	route("/external-task/{id}/complete", cfg.MaxBody, a.complete)
	route("/external-task/{id}/failure", cfg.MaxBody, a.failure)
	route("/external-task/{id}/bpmnError", cfg.MaxBody, a.bpmnError)
	route("/external-task/{id}/extendLock", smallBody, a.extendLock)
	route("/external-task/{id}/unlock", smallBody, a.unlock)
	srv.Serves(cfg.MaxAsyncResponseTimeout)
	srv.Go(func(soft context.Context) {
		<-soft.Done()
		close(a.stopping)
	})
	return a
}

// restError is Camunda's error body, with our code.
type restError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	Code    string `json:"code"`
}

func writeError(w http.ResponseWriter, status int, typ, code, msg string) {
	api.WriteJSON(w, status, restError{Type: typ, Message: msg, Code: code})
}

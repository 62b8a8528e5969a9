// Package usecase holds each operation the protocols offer, once, beneath
// them: api/tasks (Camunda 7's external tasks), api/admin (/v1) and
// api/zeebe (the Zeebe gateway) decode a call, call a use case here and map
// the fault codes it answers to their protocol, each in one table. Nothing
// here knows a protocol: no HTTP, no gRPC, no wire type.
//
// A use case never claims an instance (DESIGN.md): it records what it must
// durably, then hands the work to the lanes' one resume core, through
// package operations for the admin operations.
package usecase

import (
	"context"
	"log/slog"
	"time"

	"github.com/sutra-run/worker/api/taskwait"
	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/feel"
	"github.com/sutra-run/worker/internal/defaults"
	"github.com/sutra-run/worker/metrics"
	"github.com/sutra-run/worker/operations"
	"github.com/sutra-run/worker/store"
)

// Store is what the use cases need from the database (*store.Store).
type Store interface {
	IncidentByID(ctx context.Context, id int64) (store.Incident, error)
	JobRetries(ctx context.Context, incidentID int64) (int, error)
	RetryTimer(ctx context.Context, incidentID int64) error
	FindDecision(ctx context.Context, ref store.DecisionRef) (store.FoundDecision, error)
	RecordOutcome(ctx context.Context, o store.TaskReport) (store.Recorded, error)
	UserTaskByID(ctx context.Context, id int64) (store.UserTask, error)
	AssignUserTask(ctx context.Context, id int64, assignee *string) error
	UpdateUserTask(ctx context.Context, id int64, c engine.UserTaskChanges) error
	Process(ctx context.Context, key string, version int) (*bpmn.Process, error)
	ListDefinitions(ctx context.Context) ([]store.DefinitionVersions, error)
	DefinitionXML(ctx context.Context, key string, version int) (string, error)
	ListDecisions(ctx context.Context, f store.DecisionFilter) ([]store.DecisionVersion, error)
	Instance(ctx context.Context, id string) (store.InstanceDetail, error)
	ListInstances(ctx context.Context, f store.InstanceFilter) (store.InstancePage, error)
	CountInstances(ctx context.Context, f store.InstanceFilter) (store.InstanceCount, error)
	ListIncidents(ctx context.Context, f store.IncidentFilter) ([]store.Incident, error)
	ElementStatistics(ctx context.Context, key string, version int, after string, limit int) (
		elements []store.ElementCount, walked int, next string, err error)
	Deploy(ctx context.Context, xml []byte) ([]store.Deployed, error)
	NextKey(ctx context.Context) (int64, error)
	MessageSeen(ctx context.Context, id string) (bool, error)
	MessageStarts(ctx context.Context, message string) ([]store.StartTarget, error)
	Subscribed(ctx context.Context, name, key string) (bool, error)
	Correlated(ctx context.Context, messageID string, waiting bool, starts []string) (string, error)
	ListUserTasks(ctx context.Context, f store.UserTaskFilter) ([]store.UserTask, error)
	InstanceTimesOf(ctx context.Context, id string) (store.InstanceTimes, error)
	SetLockTimeout(ctx context.Context, id int64, d time.Duration) error
	SetRetries(ctx context.Context, id int64, retries int) error
	InstanceByKey(ctx context.Context, key int64, vars bool) (store.KeyedInstance, error)
	InstanceKeys(ctx context.Context, id string, vars bool) (store.KeyedInstance, error)
	RecordAndBroadcastSignal(ctx context.Context, id, name string, vars map[string]any) (store.SignalReach, error)
}

// Config configures the use cases.
type Config struct {
	// StepTimeout and FeelLimits bound a decision's evaluation as they
	// bound a step's (defaults: 10s, feel's).
	StepTimeout time.Duration
	FeelLimits  feel.Limits
}

func (c *Config) setDefaults() {
	defaults.Set(&c.StepTimeout, 10*time.Second)
}

// Deps are the use cases' collaborators.
type Deps struct {
	Store   Store
	Metrics *metrics.Metrics
	Logger  *slog.Logger
	// Lanes run the admin operations' steps (on the admin lane).
	Lanes operations.Dispatcher
	// Waiters are where activations wait for tasks (api/taskwait).
	Waiters *taskwait.Waiters
	// PublishRelay publishes a relay body under messageID to the relay
	// exchange with routingKey and returns once the broker confirmed it.
	PublishRelay func(ctx context.Context, routingKey, messageID string, body []byte) error
	// Handoff, when set, hands a recorded task outcome's relay to this
	// replica's lanes at once (the fast path), or wakes the outbox
	// publisher (consumer.Handoff.Relay); it must not block. Unset, the
	// relay waits for the publisher's poll.
	Handoff func(store.RelayOut)
	// Ends are where starts with their result wait for the instance's end.
	Ends *Ends
}

// UseCases are the operations every protocol calls.
type UseCases struct {
	deps Deps
	cfg  Config
}

// New builds the use cases on deps.
func New(deps Deps, cfg Config) *UseCases {
	cfg.setDefaults()
	return &UseCases{deps: deps, cfg: cfg}
}

// Conn is how a call holds one of the database connections API calls may
// use (SUTRA_API_MAX_DB_CONNS) while a use case runs: Use takes one (or
// keeps the one the call holds) around each statement, Idle gives the
// call's back before a wait. The zero Conn does neither: a caller with no
// such budget (a test, a background runner).
type Conn struct {
	Use  func(ctx context.Context) (release func(), err error)
	Idle func()
}

func (c Conn) use(ctx context.Context) (func(), error) {
	if c.Use == nil {
		return func() {}, nil
	}
	return c.Use(ctx)
}

func (c Conn) idle() {
	if c.Idle != nil {
		c.Idle()
	}
}

// PreviewStep computes the step trigger would take on instance without
// writing or claiming anything: a preflight shows what the operation would
// do. It is bounded as a step is (StepTimeout, FeelLimits).
func (u *UseCases) PreviewStep(ctx context.Context, proc *bpmn.Process, in engine.Instance, tr engine.Trigger) (engine.State, error) {
	ctx, cancel := context.WithTimeout(ctx, u.cfg.StepTimeout)
	defer cancel()
	st, _, err := engine.StepContext(ctx, proc, in, tr, engine.Options{Now: time.Now(), Limits: u.cfg.FeelLimits})
	return st, err
}

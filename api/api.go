// Package api serves the worker's HTTP API on its own listener
// (SUTRA_API_ADDR): the Camunda 7 external-task protocol under
// /engine-rest, which Camunda's external-task clients speak unchanged, so
// that pull tasks are worked by the clients users already have.
//
// Nothing here claims an instance: a worker's outcome is recorded on the
// task row, fenced on the lock holder, together with the outbox row that
// carries it to the step pipeline as a relay, and answered only once that is
// durable. The step then runs like any other (claim, engine, commit).
package api

import (
	"bytes"
	"context"
	"crypto/subtle"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/netutil"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/defaults"
	"github.com/sutra-run/worker/internal/startstop"
	"github.com/sutra-run/worker/internal/testsignal"
	"github.com/sutra-run/worker/lanes"
	"github.com/sutra-run/worker/metrics"
	"github.com/sutra-run/worker/store"
)

// Store is what the API needs from the database (*store.Store).
type Store interface {
	FetchAndLock(ctx context.Context, worker string, topics []store.TopicLock, max int, byPriority bool) ([]store.LockedTask, error)
	RecordOutcome(ctx context.Context, o store.Outcome) (topic string, err error)
	ExtendLock(ctx context.Context, id int64, worker string, d time.Duration) error
	Unlock(ctx context.Context, id int64) error
	CountFetchable(ctx context.Context, asks []store.TopicLock, limits []int) ([]int, error)

	Deploy(ctx context.Context, xml []byte) ([]store.Deployed, error)
	ListDefinitions(ctx context.Context) ([]store.DefinitionVersions, error)
	DefinitionXML(ctx context.Context, key string, version int) (string, error)
	Instance(ctx context.Context, id string) (store.InstanceDetail, error)
	ListInstances(ctx context.Context, f store.InstanceFilter) ([]store.InstanceSummary, error)
	ListIncidents(ctx context.Context, f store.IncidentFilter) ([]store.Incident, error)
	IncidentByID(ctx context.Context, id int64) (store.Incident, error)
	RetryTimer(ctx context.Context, incidentID int64) error
	CreateMigration(ctx context.Context, id, definition string, from, to int, mapping map[string]string) error
	MigrationStatus(ctx context.Context, id string) (store.Migration, error)
	ListUserTasks(ctx context.Context, f store.UserTaskFilter) ([]store.UserTask, error)
	UserTaskByID(ctx context.Context, id int64) (store.UserTask, error)
	AssignUserTask(ctx context.Context, id int64, assignee *string) error
	ListParkedOutbox(ctx context.Context, f store.ParkedFilter) ([]store.ParkedOutboxRow, error)
	RetryParkedOutbox(ctx context.Context, id string) error
	DiscardParkedOutbox(ctx context.Context, id string) error
}

// Dispatcher runs administrative steps (the lanes).
type Dispatcher interface {
	Dispatch(lanes.Resume)
}

// Config configures the API.
type Config struct {
	// Addr is the listen address (default :8080).
	Addr string
	// Token, when set, is required on every call, as a Bearer token or as
	// the password of HTTP Basic authentication. app.Start refuses an empty
	// one unless SUTRA_API_INSECURE is set.
	Token string
	// MaxTasks caps fetchAndLock's maxTasks (default 100).
	MaxTasks int
	// MaxAsyncResponseTimeout caps a long poll (default 30 min, Camunda's cap).
	MaxAsyncResponseTimeout time.Duration
	// MaxLockDuration caps a task lock (default 24h), so that no client can
	// lock a task for ever.
	MaxLockDuration time.Duration
	// PollInterval is how often waiting long polls look for tasks that other
	// replicas created (default 250ms); tasks this replica creates wake them
	// at once.
	PollInterval time.Duration
	// MaxBody caps a deploy's body (default 4 MiB); Limits cap the others.
	MaxBody int64
	// Limits bound what the API holds and takes (limits.go).
	Limits Limits
	// Replica names the admin owner in logs (claims.AdminOwner).
	Replica string
	// AdminInsecure opens the admin routes without a token (never in
	// production: anyone who reaches the port may cancel instances).
	AdminInsecure bool
	// OpenAPI is the document served at /v1/openapi.yaml.
	OpenAPI []byte
	// TLSCert and TLSKey, when set, are PEM files: the listener serves HTTPS.
	TLSCert, TLSKey string
}

func (c *Config) setDefaults() {
	if c.Addr == "" {
		c.Addr = ":8080"
	}
	defaults.Set(&c.MaxTasks, 100)
	defaults.Set(&c.MaxAsyncResponseTimeout, 30*time.Minute)
	defaults.Set(&c.MaxLockDuration, 24*time.Hour)
	defaults.Set(&c.PollInterval, 250*time.Millisecond)
	defaults.Set(&c.MaxBody, 4<<20)
	c.Limits.setDefaults()
}

// Deps are the API's collaborators.
type Deps struct {
	Store   Store
	Metrics *metrics.Metrics
	Logger  *slog.Logger
	// Lanes run the admin calls' steps.
	Lanes Dispatcher
	// MigrationCreated, when set, wakes the bulk migration runner.
	MigrationCreated func()
	// PublishRelay publishes a relay body under messageID to the relay
	// exchange with routingKey and returns once the broker confirmed it.
	PublishRelay func(ctx context.Context, routingKey, messageID string, body []byte) error
}

// TestSignals tell tests what the API did; inert unless Init'ed.
type TestSignals struct {
	// Waiting carries the topics of every long poll that found nothing and
	// starts to wait.
	Waiting testsignal.Signal[[]string]
	// Looked carries, after each look of the waiting long polls for tasks
	// (lookForTasks), the number of statements it ran (0 or 1).
	Looked testsignal.Signal[int]
	// Reading carries the body bytes a call reserved under
	// MaxBytesInFlight, before it reads its body.
	Reading testsignal.Signal[int64]
}

// Init switches every signal on.
func (s *TestSignals) Init() { s.Waiting.Init(); s.Looked.Init(); s.Reading.Init() }

// Server is the API listener, a startstop component.
type Server struct {
	startstop.Base
	TestSignals TestSignals
	cfg         Config
	deps        Deps
	mux         *http.ServeMux
	waiters     *waiters
	budgets     budgets
	srv         *http.Server
	ln          net.Listener
	// patterns are the routes served, for the test that holds them to the
	// OpenAPI document.
	patterns []string
}

// handle serves pattern ("METHOD /path") with h. A state-changing route
// takes only its media type, and no call from a page of another origin.
func (s *Server) handle(pattern string, h http.HandlerFunc) {
	s.patterns = append(s.patterns, pattern)
	h = s.guard(pattern, h)
	method, _, _ := strings.Cut(pattern, " ")
	if method == http.MethodGet {
		s.mux.HandleFunc(pattern, h)
		return
	}
	types, ok := bodyTypes[pattern]
	if !ok {
		types = []string{"application/json"}
	}
	s.mux.HandleFunc(pattern, sameOrigin(mediaType(types, h)))
}

// bodyTypes are the media types of the state-changing routes whose body is
// not JSON; every other one takes application/json, with a body or without.
// None of them is a type a browser sends without asking the server first
// (CORS), so a form or a script on another page cannot make one of these
// calls with the credentials the browser holds.
var bodyTypes = map[string][]string{
	"POST /v1/definitions": {"application/xml", "text/xml", "application/octet-stream"},
}

// mediaType refuses a call whose Content-Type is not one of types (415).
// One exception: a task API call with no body may name no type, because
// Camunda's Node client sends its unlock so; a browser sends such a call
// only with an Origin, which sameOrigin checks.
func mediaType(types []string, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		mt, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
		mt = strings.ToLower(strings.TrimSpace(mt))
		bodiless := mt == "" && r.ContentLength == 0 && !isAdminPath(r.URL.Path)
		if !bodiless && !slices.Contains(types, mt) {
			refuseCall(w, r, http.StatusUnsupportedMediaType, fault.APIMediaType,
				fmt.Sprintf("Content-Type %q: this call takes %s, even with no body", mt, strings.Join(types, " or ")))
			return
		}
		next(w, r)
	}
}

// sameOrigin refuses a call that a page of another origin made (403): a
// browser names the page's origin in Origin, and other clients send none.
func sameOrigin(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" {
			if u, err := url.Parse(origin); err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
				refuseCall(w, r, http.StatusForbidden, fault.APICrossOrigin,
					fmt.Sprintf("a call from the origin %.100q is refused: only pages this listener serves may change state", origin))
				return
			}
		}
		next(w, r)
	}
}

// screen refuses, before any route runs, a path or query that no id can be:
// a NUL (PostgreSQL text cannot hold one) or a part longer than
// lanes.MaxIDBytes, so that neither reaches the database or a log line.
func screen(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, part := range strings.Split(r.URL.Path, "/") {
			if err := checkText("a part of the path", part); err != nil {
				refuseCall(w, r, http.StatusBadRequest, fault.APIInvalid, err.Error())
				return
			}
		}
		for name, values := range r.URL.Query() {
			for _, v := range append(values, name) {
				if err := checkText("a query parameter", v); err != nil {
					refuseCall(w, r, http.StatusBadRequest, fault.APIInvalid, err.Error())
					return
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// checkText refuses an id (or any text used as one) that the store cannot
// hold or that is longer than lanes.MaxIDBytes; what names it in the reason,
// which never echoes the text.
func checkText(what, v string) error {
	switch {
	case strings.IndexByte(v, 0) >= 0:
		return invalidf("%s holds a NUL character", what)
	case len(v) > lanes.MaxIDBytes:
		return invalidf("%s is %d bytes long; ids are at most %d", what, len(v), lanes.MaxIDBytes)
	}
	return nil
}

// hasNUL reports whether a JSON document holds the escape \u0000 in a
// string: PostgreSQL's text and jsonb cannot store it.
func hasNUL(doc []byte) bool {
	for i := 0; ; {
		j := bytes.Index(doc[i:], []byte(`\u0000`))
		if j < 0 {
			return false
		}
		j += i
		// An escape when the backslash is not itself escaped: an even
		// number of backslashes before it.
		n := 0
		for k := j - 1; k >= 0 && doc[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return true
		}
		i = j + 1
	}
}

// refuseCall answers a refusal in the format of the route's protocol:
// problem+json under /v1, Camunda's error body under /engine-rest.
func refuseCall(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	if isAdminPath(r.URL.Path) {
		writeProblem(w, refuse(status, code, msg))
		return
	}
	writeError(w, status, "InvalidRequestException", code, msg)
}

func isAdminPath(p string) bool { return p == "/v1" || strings.HasPrefix(p, "/v1/") }

// Routes lists the routes served, "METHOD /path/{param}".
func (s *Server) Routes() []string { return slices.Clone(s.patterns) }

// New builds the API; Start listens.
func New(deps Deps, cfg Config) *Server {
	cfg.setDefaults()
	s := &Server{cfg: cfg, deps: deps, mux: http.NewServeMux(), budgets: newBudgets(cfg.Limits),
		waiters: newWaiters(cfg.Limits.MaxLongPolls, deps.Metrics.APILongPolls.Set)}
	s.routes()
	s.adminRoutes()
	return s
}

// Handler is the API's handler (for tests that serve it themselves).
func (s *Server) Handler() http.Handler { return s.authenticate(screen(s.mux)) }

// Addr is the bound listen address, once started ("" before).
func (s *Server) Addr() string {
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// TasksCreated wakes long polls for the tasks a step of this replica
// created: topics holds the topic of each task, once per task. It never
// blocks.
func (s *Server) TasksCreated(topics []string) { s.waiters.wakeOne(topics) }

// Start binds the listener (an address in use fails Start) and serves until
// Stop. Stop ends waiting long polls with empty answers at once and lets
// other calls finish until its deadline.
func (s *Server) Start(ctx context.Context) error {
	switch {
	case s.cfg.Token == "" && s.cfg.AdminInsecure:
		s.deps.Logger.Warn("SUTRA_API_TOKEN is not set, SUTRA_API_INSECURE and SUTRA_ADMIN_INSECURE are true: the task and admin APIs accept every caller", "addr", s.cfg.Addr)
	case s.cfg.Token == "":
		s.deps.Logger.Warn("SUTRA_API_TOKEN is not set and SUTRA_API_INSECURE is true: the task API accepts every caller; the admin API is off", "addr", s.cfg.Addr)
	}
	var tlsConfig *tls.Config
	if s.cfg.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(s.cfg.TLSCert, s.cfg.TLSKey)
		if err != nil {
			return fault.Wrap(fault.ConfigInvalid, err, "SUTRA_API_TLS_CERT and SUTRA_API_TLS_KEY")
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("API listener on %s: %w", s.cfg.Addr, err)
	}
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
	}
	s.ln = netutil.LimitListener(ln, s.cfg.Limits.MaxConns)
	s.srv = &http.Server{
		TLSConfig:         tlsConfig,
		Handler:           s.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      s.cfg.MaxAsyncResponseTimeout + 30*time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	return s.Run(ctx, "api", s.run)
}

func (s *Server) run(soft, hard context.Context) {
	served := make(chan error, 1)
	go func() { served <- s.srv.Serve(s.ln) }()
	poll := time.NewTicker(s.cfg.PollInterval)
	defer poll.Stop()
	for {
		select {
		case <-poll.C:
			s.lookForTasks(soft)
		case <-s.waiters.look:
			s.lookForTasks(soft)
		case err := <-served:
			if !errors.Is(err, http.ErrServerClosed) {
				s.deps.Logger.Error("API listener failed", "err", err)
			}
			return
		case <-soft.Done():
			s.waiters.close() // long polls answer now
			if err := s.srv.Shutdown(hard); err != nil {
				_ = s.srv.Close()
			}
			<-served
			return
		}
	}
}

// authenticate refuses every call without the token when one is set:
// Bearer, or HTTP Basic with the token as password (Camunda's clients ship
// a Basic auth interceptor). The scheme is case-insensitive (RFC 7235);
// the token is compared in constant time.
func (s *Server) authenticate(next http.Handler) http.Handler {
	if s.cfg.Token == "" {
		return next
	}
	want := []byte(s.cfg.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var got []byte
		scheme, credentials, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		credentials = strings.TrimLeft(credentials, " ")
		switch {
		case strings.EqualFold(scheme, "Bearer"):
			got = []byte(credentials)
		case strings.EqualFold(scheme, "Basic"):
			if raw, err := base64.StdEncoding.DecodeString(credentials); err == nil {
				if _, pass, ok := strings.Cut(string(raw), ":"); ok {
					got = []byte(pass)
				}
			}
		}
		if subtle.ConstantTimeCompare(got, want) != 1 {
			// A Basic challenge makes a browser ask for credentials and
			// then send them with every call to the origin, a form posted
			// from another page included: /v1 names Bearer only. The task
			// API keeps Basic, which Camunda's clients use.
			challenge := `Bearer realm="sutra", Basic realm="sutra"`
			if isAdminPath(r.URL.Path) {
				challenge = `Bearer realm="sutra"`
			}
			w.Header().Set("WWW-Authenticate", challenge)
			writeError(w, http.StatusUnauthorized, "AuthenticationException", fault.APIUnauthorized,
				"a valid token is required (Authorization: Bearer <token>, or HTTP Basic with the token as password)")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// restError is Camunda's error body, with our code.
type restError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	Code    string `json:"code"`
}

func writeError(w http.ResponseWriter, status int, typ, code, msg string) {
	writeJSON(w, status, restError{Type: typ, Message: msg, Code: code})
}

// writeJSON answers with Content-Type exactly application/json: Camunda's
// Node client parses a body as JSON only then.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = jsonEncode(w, v)
}

func jsonEncode(w io.Writer, v any) error { return json.NewEncoder(w).Encode(v) }

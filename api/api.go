// Package api is the worker's API listener (SUTRA_API_ADDR) and what every
// protocol served on it shares: the listener and its TLS, the credentials
// and who they admit, the limits on what calls hold, the screening of paths
// and bodies, and the writing of refusals.
//
// Each protocol is a package of its own that registers its routes here:
// api/tasks serves Camunda 7's external-task protocol under /engine-rest,
// api/admin the admin API under /v1. A protocol names, for each route, the
// credentials that may call it (Scope) and how its refusals are written
// (Protocol); a call the listener refuses before the route runs (no
// credential, the wrong one, a body too large, no room under a cap) is
// answered in the route's own format.
//
// Nothing here claims an instance: a protocol records what it must durably,
// or hands its work to the lanes, which claim.
package api

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/netutil"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/startstop"
	"github.com/sutra-run/worker/internal/testsignal"
	"github.com/sutra-run/worker/metrics"
)

// Config configures the listener.
type Config struct {
	// Addr is the listen address (default :8080).
	Addr string
	// Credentials admit callers to the routes of each scope.
	Credentials Credentials
	// Limits bound what calls hold (limits.go).
	Limits Limits
	// TLSCert and TLSKey, when set, are PEM files: the listener serves HTTPS.
	TLSCert, TLSKey string
}

func (c *Config) setDefaults() {
	if c.Addr == "" {
		c.Addr = ":8080"
	}
	c.Limits.setDefaults()
}

// DefaultConfig is the configuration New fills unset fields from; the
// worker's defaults (app.Defaults) are read here, not written again.
func DefaultConfig() Config {
	var c Config
	c.setDefaults()
	return c
}

// Deps are the listener's collaborators.
type Deps struct {
	Metrics *metrics.Metrics
	Logger  *slog.Logger
	// AuthFailures counts and throttles failed credentials (shared with
	// the Zeebe gateway); nil: neither.
	AuthFailures *AuthFailures
}

// TestSignals tell tests what the listener did; inert unless Init'ed.
type TestSignals struct {
	// Reading carries the body bytes a call reserved under
	// MaxBytesInFlight, before it reads its body.
	Reading testsignal.Signal[int64]
}

// Init switches every signal on.
func (s *TestSignals) Init() { s.Reading.Init() }

// Protocol is how one protocol answers the calls the listener refuses
// before a route runs.
type Protocol struct {
	// Refuse writes a refusal in the protocol's format.
	Refuse func(w http.ResponseWriter, status int, code, msg string)
	// Challenge is the WWW-Authenticate header of a 401.
	Challenge string
	// UntypedBodiless lets a state-changing call with no body name no media
	// type (Camunda's Node client sends its unlock so).
	UntypedBodiless bool
}

// Route is one route of a protocol.
type Route struct {
	// Pattern is "METHOD /path/{param}".
	Pattern string
	// Scopes are the credentials that may call it.
	Scopes Scope
	// BodyTypes are the media types a state-changing call's body may have
	// (default application/json). None of them may be a type a browser
	// sends without asking the server first (CORS), so that a form or a
	// script on another page cannot make the call with the credentials the
	// browser holds (POST /oauth/token, which holds none, takes a form:
	// oauth.go).
	BodyTypes []string
	// BodyLimit is the largest body the route takes (default
	// Limits.MaxBody).
	BodyLimit int64
	Handler   http.HandlerFunc
}

// Server is the API listener, a startstop component.
type Server struct {
	startstop.Base
	TestSignals TestSignals
	cfg         Config
	deps        Deps
	mux         *http.ServeMux
	budgets     budgets
	srv         *http.Server
	ln          net.Listener
	// patterns are the routes served, for the test that holds them to the
	// OpenAPI document.
	patterns []string
	// background is the protocols' work beside their calls (Go).
	background []func(soft context.Context)
	// longestCall is the longest a protocol's call may take (Serves); a
	// minute at least, above the 30 s an admin call's publish or a task
	// outcome's statement may take.
	longestCall time.Duration
}

// New builds the listener; the protocols register their routes, then Start
// listens.
func New(deps Deps, cfg Config) *Server {
	cfg.setDefaults()
	s := &Server{cfg: cfg, deps: deps, mux: http.NewServeMux(), budgets: newBudgets(cfg.Limits), longestCall: time.Minute}
	s.serveTokens()
	return s
}

// Handle serves route in protocol p's format: the route's credentials, then
// what chain checks.
func (s *Server) Handle(p Protocol, route Route) {
	s.mux.HandleFunc(route.Pattern, s.authorize(p, route.Scopes, s.chain(p, route)))
}

// chain serves route to every caller, in protocol p's format: no path or
// query that no id can be, its media types and no call from a page of
// another origin for a state-changing route, its body limit and the
// replica-wide caps (guard).
func (s *Server) chain(p Protocol, route Route) http.HandlerFunc {
	s.patterns = append(s.patterns, route.Pattern)
	if route.BodyLimit == 0 {
		route.BodyLimit = s.cfg.Limits.MaxBody
	}
	h := s.guard(p, route.BodyLimit, route.Handler)
	if method, _, _ := strings.Cut(route.Pattern, " "); method != http.MethodGet {
		types := route.BodyTypes
		if types == nil {
			types = []string{"application/json"}
		}
		h = sameOrigin(p, mediaType(p, types, h))
	}
	return screen(p, h)
}

// Public serves h at pattern to every caller, without credentials: pages
// and assets that hold no data (the console under /ui/). It is no protocol's
// route and not in the OpenAPI document.
func (s *Server) Public(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// Go runs f beside the calls from Start until the listener stops: soft ends
// when Stop is called, and the listener waits for f to return.
func (s *Server) Go(f func(soft context.Context)) { s.background = append(s.background, f) }

// Serves says that a protocol's call may take up to d (a long poll): the
// listener's write timeout allows the longest with a margin.
func (s *Server) Serves(d time.Duration) { s.longestCall = max(s.longestCall, d) }

// Routes lists the routes served, "METHOD /path/{param}".
func (s *Server) Routes() []string { return slices.Clone(s.patterns) }

// Handler is the listener's handler (for tests that serve it themselves).
func (s *Server) Handler() http.Handler { return s.mux }

// Addr is the bound listen address, once started ("" before).
func (s *Server) Addr() string {
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Start binds the listener (an address in use fails Start) and serves until
// Stop. Stop ends the protocols' background work (a long poll's wait with
// it) and lets calls finish until its deadline.
func (s *Server) Start(ctx context.Context) error {
	s.cfg.Credentials.report(s.deps.Logger, s.cfg.Addr)
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
		WriteTimeout:      s.longestCall + 30*time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	return s.Run(ctx, "api", s.run)
}

func (s *Server) run(soft, hard context.Context) {
	// The background work ends with the listener, should it fail before a
	// stop.
	bg, cancel := context.WithCancel(soft)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	for _, f := range s.background {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(bg)
		}()
	}
	served := make(chan error, 1)
	go func() { served <- s.srv.Serve(s.ln) }()
	select {
	case err := <-served:
		if !errors.Is(err, http.ErrServerClosed) {
			s.deps.Logger.Error("API listener failed", "err", err)
		}
	case <-soft.Done():
		if err := s.srv.Shutdown(hard); err != nil {
			_ = s.srv.Close()
		}
		<-served
	}
}

// WriteJSON answers with Content-Type exactly application/json: Camunda's
// Node client parses a body as JSON only then.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = jsonEncode(w, v)
}

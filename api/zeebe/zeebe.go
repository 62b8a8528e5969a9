// Package zeebe serves the Zeebe gateway protocol (gRPC,
// gateway_protocol.Gateway) on its own listener (SUTRA_GATEWAY_ADDR), so
// that the job workers and clients Camunda 8 users already have — the Java
// and Go clients, zbctl, Camunda's Node.js SDK — work against Sutra
// unchanged. The types and the server interface are the ones Zeebe's Go
// client ships (github.com/camunda/zeebe/clients/go/v8/pkg/pb), not a copy
// of the proto.
//
// Like every protocol, nothing here claims an instance: a job's outcome is
// recorded durably on its task row, fenced on the lock holder, with the
// relay that applies it; a start, a cancel or a variables update is handed
// to the lanes' one resume core.
//
// Zeebe clients address everything by int64 keys: definitions and
// instances have a zeebe_key column, and the ids of tasks (jobs), incidents
// and buffered messages are their keys (store migration 0019).
package zeebe

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/camunda/zeebe/clients/go/v8/pkg/pb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	// Camunda's Node.js SDK compresses its calls with gzip: without the
	// codec registered every call answers Unimplemented.
	_ "google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/keepalive"

	"github.com/sutra-run/worker/api"
	"github.com/sutra-run/worker/api/taskwait"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/clock"
	"github.com/sutra-run/worker/internal/defaults"
	"github.com/sutra-run/worker/internal/startstop"
	"github.com/sutra-run/worker/internal/testsignal"
	"github.com/sutra-run/worker/metrics"
	"github.com/sutra-run/worker/store"
	"github.com/sutra-run/worker/usecase"
)

// Config configures the gateway.
type Config struct {
	// Addr is the listen address (SUTRA_GATEWAY_ADDR, default :26500,
	// Zeebe's port); app does not start the gateway when it is empty.
	Addr string
	// TLSCert and TLSKey, when set, are PEM files: the gateway serves TLS.
	TLSCert, TLSKey string
	// Credentials admit callers, as on the API listener: the same tokens,
	// and the tokens /oauth/token issues for them.
	Credentials api.Credentials
	// MaxStreams caps the job streams and ActivateJobs long polls open at
	// once on this replica (default 256); one over it is refused with
	// ResourceExhausted.
	MaxStreams int
	// MaxJobsToActivate caps an ActivateJobs' maxJobsToActivate (default
	// 1000); more is refused with ResourceExhausted.
	MaxJobsToActivate int
	// MaxMessageSize caps a request message in bytes (default 4 MiB, gRPC's
	// own default); a larger one is refused with ResourceExhausted.
	MaxMessageSize int
	// MaxLockDuration caps a job's activation timeout and UpdateJobTimeout
	// (SUTRA_API_MAX_LOCK_DURATION, default 24h), as /engine-rest's lock.
	MaxLockDuration time.Duration
	// MaxConnections caps the gateway's open connections (default 1024);
	// one over it is closed at once.
	MaxConnections int
	// MaxStreamsPerConnection caps the concurrent streams of one
	// connection (default 128); one over it is refused (REFUSED_STREAM).
	MaxStreamsPerConnection int
	// AuthTimeout closes a connection on which no stream presented valid
	// credentials within it (default 5s).
	AuthTimeout time.Duration
}

func (c *Config) setDefaults() {
	defaults.Set(&c.Addr, ":26500")
	defaults.Set(&c.MaxStreams, 256)
	defaults.Set(&c.MaxJobsToActivate, 1000)
	defaults.Set(&c.MaxMessageSize, 4<<20)
	defaults.Set(&c.MaxConnections, 1024)
	defaults.Set(&c.MaxStreamsPerConnection, 128)
	defaults.Set(&c.AuthTimeout, 5*time.Second)
	defaults.Set(&c.MaxLockDuration, 24*time.Hour)
}

// DefaultConfig is the configuration New fills unset fields from; the
// worker's defaults (app.Defaults) are read here, not written again.
func DefaultConfig() Config {
	var c Config
	c.setDefaults()
	return c
}

// Store is what the gateway needs from the database (*store.Store).
type Store interface {
	DefinitionByKey(ctx context.Context, zeebeKey int64) (key string, version int, err error)
	InstanceByKey(ctx context.Context, key int64, vars bool) (store.KeyedInstance, error)
	InstanceKeys(ctx context.Context, id string, vars bool) (store.KeyedInstance, error)
	NextKey(ctx context.Context) (int64, error)
	FindDecision(ctx context.Context, ref store.DecisionRef) (store.FoundDecision, error)
}

// Deps are the gateway's collaborators.
type Deps struct {
	Store   Store
	Metrics *metrics.Metrics
	Logger  *slog.Logger
	// UseCases serve the calls: the job RPCs' long polls and streams wait
	// for tasks in the one wait (usecase.Activate), with /engine-rest's.
	UseCases *usecase.UseCases
	// AcquireDB takes one of the database connections API calls may use
	// (api.Server.AcquireDB): the gateway's calls share
	// SUTRA_API_MAX_DB_CONNS with the API listener's.
	AcquireDB func(ctx context.Context) (release func(), err error)
	// AuthFailures counts and throttles failed credentials, with the API
	// listener's; nil: neither.
	AuthFailures *api.AuthFailures
	// Clock times AuthTimeout (default the real one).
	Clock clock.Clock
}

// TestSignals tell tests what the gateway did; inert unless Init'ed.
type TestSignals struct {
	// Waiting carries the job type of every ActivateJobs long poll that
	// found nothing and starts to wait.
	Waiting testsignal.Signal[string]
	// Streaming carries the job type of every job stream that found nothing
	// and waits (each time it does).
	Streaming testsignal.Signal[string]
	// Answered carries the number of jobs of every ActivateJobs answer.
	Answered testsignal.Signal[int]
}

// Init switches every signal on.
func (s *TestSignals) Init() { s.Waiting.Init(); s.Streaming.Init(); s.Answered.Init() }

// Gateway is the Zeebe gateway. Every RPC it does not implement answers
// Unimplemented, naming the method (pb.UnimplementedGatewayServer).
type Gateway struct {
	pb.UnimplementedGatewayServer
	startstop.Base
	TestSignals TestSignals
	cfg         Config
	deps        Deps
	ln          net.Listener
	srv         *grpc.Server
	// stopping is closed at the soft stop: long polls, job streams and
	// calls waiting for an instance's end answer and end, so that the
	// graceful stop does not wait for them.
	stopping chan struct{}
	// slots cap the job streams and long polls open at once (MaxStreams).
	slots *taskwait.Slots
	// conns are the open connections (MaxConnections, AuthTimeout).
	conns *conns
	// rpcs are the service's method names.
	rpcs map[string]bool
}

// New builds the gateway; Start binds its listener.
func New(deps Deps, cfg Config) *Gateway {
	cfg.setDefaults()
	g := &Gateway{cfg: cfg, deps: deps, stopping: make(chan struct{}),
		slots: taskwait.NewSlots(cfg.MaxStreams, deps.Metrics.GatewayStreams.Set)}
	g.conns = newConns(cfg.MaxConnections, cfg.AuthTimeout, deps.Clock, func() {
		deps.Metrics.GatewayConnectionsRefused.Inc()
	})
	return g
}

// keepaliveMinTime is the shortest ping interval the gateway tolerates.
// Zeebe's clients ping every 45 s (30 s for some versions); gRPC's default
// enforcement (5 min) would answer them GOAWAY "too_many_pings".
const keepaliveMinTime = 10 * time.Second

// Start binds the listener (an address in use fails Start) and serves until
// Stop, which lets calls finish until its deadline and then cuts them.
func (g *Gateway) Start(ctx context.Context) error {
	opts := []grpc.ServerOption{
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: keepaliveMinTime, PermitWithoutStream: true}),
		grpc.MaxRecvMsgSize(g.cfg.MaxMessageSize),
		grpc.InTapHandle(g.tap),
		grpc.MaxConcurrentStreams(uint32(g.cfg.MaxStreamsPerConnection)),
		grpc.MaxHeaderListSize(maxHeaderListSize),
		grpc.ChainUnaryInterceptor(g.unaryInterceptor),
		grpc.ChainStreamInterceptor(g.streamInterceptor),
	}
	if g.cfg.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(g.cfg.TLSCert, g.cfg.TLSKey)
		if err != nil {
			return fault.Wrap(fault.ConfigInvalid, err, "SUTRA_GATEWAY_TLS_CERT and SUTRA_GATEWAY_TLS_KEY")
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})))
	}
	ln, err := net.Listen("tcp", g.cfg.Addr)
	if err != nil {
		return fmt.Errorf("Zeebe gateway listener on %s: %w", g.cfg.Addr, err)
	}
	g.ln = limitListener{Listener: ln, conns: g.conns}
	g.srv = grpc.NewServer(opts...)
	pb.RegisterGatewayServer(g.srv, g)
	g.rpcs = rpcNames(g.srv)
	return g.Run(ctx, "zeebe gateway", g.run)
}

func (g *Gateway) run(soft, hard context.Context) {
	served := make(chan error, 1)
	go func() { served <- g.srv.Serve(g.ln) }()
	select {
	case err := <-served:
		if err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			g.deps.Logger.Error("Zeebe gateway listener failed", "err", err)
		}
	case <-soft.Done():
		close(g.stopping)
		stopped := make(chan struct{})
		go func() {
			g.srv.GracefulStop()
			close(stopped)
		}()
		select {
		case <-stopped:
		case <-hard.Done():
			g.srv.Stop()
			<-stopped
		}
		<-served
	}
}

// Addr is the bound listen address, once started ("" before).
func (g *Gateway) Addr() string {
	if g.ln == nil {
		return ""
	}
	return g.ln.Addr().String()
}

package zeebe

import (
	"context"
	"net"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/sutra-run/worker/api"
	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/clock"
)

// What a caller without credentials may cost: the gateway refuses a stream
// at its headers, before grpc-go reads its message (it reads a unary
// call's message whole before any interceptor runs), holds at most
// MaxConnections connections, closes one that has not presented valid
// credentials within AuthTimeout, and bounds the streams and the header
// bytes of each.

// maxHeaderListSize bounds a stream's headers (grpc-go's default is
// 16 MiB, read before the tap): Zeebe clients send well under 1 KiB.
const maxHeaderListSize = 16 << 10

// tap checks a stream's credentials at its headers (grpc.InTapHandle): a
// stream without valid ones is answered and reset before its body is read,
// and a source that keeps failing is refused unchecked
// (api.AuthFailures). It runs on the connection's reader, holding the
// transport's lock: it never blocks. The interceptors check the scope
// again (admit), with the call counted.
func (g *Gateway) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	rpc := rpcName(info.FullMethodName)
	if !g.rpcs[rpc] {
		rpc = "unknown" // a label an unauthenticated caller cannot multiply
	}
	var addr string
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		addr = p.Addr.String()
	}
	if _, err := g.deps.AuthFailures.Throttled(api.SurfaceGateway, addr); err != nil {
		err = status.Errorf(codes.ResourceExhausted, "%s: %s", fault.Code(err), fault.Reason(err))
		g.count(rpc, err)
		return ctx, err
	}
	if err := g.admitToken(info.Header, rpc); err != nil {
		if status.Code(err) == codes.Unauthenticated {
			g.deps.AuthFailures.Failed(api.SurfaceGateway, addr)
		}
		g.count(rpc, err)
		return ctx, err
	}
	g.conns.authenticated(addr)
	return ctx, nil
}

// rpcNames are the methods srv serves.
func rpcNames(srv *grpc.Server) map[string]bool {
	names := map[string]bool{}
	for _, svc := range srv.GetServiceInfo() {
		for _, m := range svc.Methods {
			names[m.Name] = true
		}
	}
	return names
}

// conns are the gateway's open connections: at most max, each closed
// authTimeout after it opened unless a stream on it presented valid
// credentials by then.
type conns struct {
	max         int
	authTimeout time.Duration
	clock       clock.Clock
	refused     func() // a connection over max was closed

	mu   sync.Mutex
	open map[string]*guardedConn // by remote address
}

func newConns(max int, authTimeout time.Duration, c clock.Clock, refused func()) *conns {
	if c == nil {
		c = clock.Real()
	}
	return &conns{max: max, authTimeout: authTimeout, clock: c, refused: refused, open: map[string]*guardedConn{}}
}

// authenticated marks the connection from addr as having presented valid
// credentials: it is no longer closed for want of them.
func (cs *conns) authenticated(addr string) {
	cs.mu.Lock()
	c := cs.open[addr]
	cs.mu.Unlock()
	if c != nil {
		c.stopTimer()
	}
}

// limitListener accepts at most conns.max connections at once: one over it
// is closed at once (its descriptor freed, the client told by the reset),
// rather than left to hold a descriptor and a goroutine.
type limitListener struct {
	net.Listener
	conns *conns
}

func (l limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		cs := l.conns
		cs.mu.Lock()
		if len(cs.open) >= cs.max {
			cs.mu.Unlock()
			_ = c.Close()
			cs.refused()
			continue
		}
		gc := &guardedConn{Conn: c, conns: cs, addr: c.RemoteAddr().String()}
		cs.open[gc.addr] = gc
		cs.mu.Unlock()
		stop := cs.clock.AfterFunc(cs.authTimeout, func() { _ = gc.Close() })
		gc.mu.Lock()
		gc.stop = stop
		gc.mu.Unlock()
		return gc, nil
	}
}

// guardedConn leaves conns when it closes.
type guardedConn struct {
	net.Conn
	conns *conns
	addr  string

	mu     sync.Mutex
	stop   func() bool // the auth timer's; nil once stopped
	closed sync.Once
}

func (c *guardedConn) stopTimer() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stop != nil {
		c.stop()
		c.stop = nil
	}
}

func (c *guardedConn) Close() error {
	c.closed.Do(func() {
		c.stopTimer()
		c.conns.mu.Lock()
		if c.conns.open[c.addr] == c {
			delete(c.conns.open, c.addr)
		}
		c.conns.mu.Unlock()
	})
	return c.Conn.Close()
}

// bearerOf is the token of a call's `authorization: Bearer <token>`.
func bearerOf(md metadata.MD) []byte {
	var token []byte
	for _, v := range md.Get("authorization") {
		if scheme, cred, ok := strings.Cut(v, " "); ok && strings.EqualFold(scheme, "Bearer") {
			token = []byte(strings.TrimLeft(cred, " "))
		}
	}
	return token
}

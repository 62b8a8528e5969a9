package zeebe_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/internal/clock"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/internal/testkit/apptest"
)

// h2 is a raw HTTP/2 connection to the gateway, as a hostile client drives
// one: frames written and read by hand, nothing buffered by a gRPC client.
type h2 struct {
	conn net.Conn
	fr   *http2.Framer
	enc  *hpack.Encoder
	hbuf bytes.Buffer
	next uint32 // the next stream id
}

// dialH2 opens a connection and exchanges the preface and SETTINGS.
func dialH2(t *testing.T, addr string) *h2 {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	// Bounds a test that fails by waiting: a passing one reads on signals.
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	c := &h2{conn: conn, fr: http2.NewFramer(conn, conn), next: 1}
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.enc = hpack.NewEncoder(&c.hbuf)
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	if err := c.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading the server's SETTINGS: %v", err)
		}
		if s, ok := f.(*http2.SettingsFrame); ok && !s.IsAck() {
			if err := c.fr.WriteSettingsAck(); err != nil {
				t.Fatal(err)
			}
			return c
		}
	}
}

// call opens a stream of method with header pairs and returns its id.
func (c *h2) call(t *testing.T, method string, endStream bool, header ...string) uint32 {
	t.Helper()
	c.hbuf.Reset()
	fields := append([]string{":method", "POST", ":scheme", "http", ":path", "/gateway_protocol.Gateway/" + method,
		":authority", "gateway", "content-type", "application/grpc", "te", "trailers"}, header...)
	for i := 0; i+1 < len(fields); i += 2 {
		_ = c.enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	id := c.next
	c.next += 2
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.hbuf.Bytes(), EndHeaders: true, EndStream: endStream}); err != nil {
		t.Fatal(err)
	}
	return id
}

// message sends a gRPC message prefix declaring size bytes, then body.
func (c *h2) message(t *testing.T, id uint32, size uint32, body []byte, endStream bool) {
	t.Helper()
	prefix := make([]byte, 5)
	binary.BigEndian.PutUint32(prefix[1:], size)
	if err := c.fr.WriteData(id, endStream, append(prefix, body...)); err != nil {
		t.Fatal(err)
	}
}

// end reads frames until stream id ends, failing if the server grants the
// stream more window on the way (it would be reading its body). It returns
// the stream's grpc-status ("" for a reset).
func (c *h2) end(t *testing.T, id uint32) string {
	t.Helper()
	status := ""
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			t.Fatalf("stream %d: %v", id, err)
		}
		if f.Header().StreamID != id {
			continue
		}
		switch f := f.(type) {
		case *http2.WindowUpdateFrame:
			t.Fatalf("the server granted stream %d %d more bytes: it reads the body", id, f.Increment)
		case *http2.RSTStreamFrame:
			return status
		case *http2.MetaHeadersFrame:
			if s := f.PseudoValue("status"); s != "" && s != "200" {
				t.Fatalf(":status %s", s)
			}
			for _, h := range f.RegularFields() {
				if h.Name == "grpc-status" {
					status = h.Value
				}
			}
			if f.StreamEnded() {
				return status
			}
		case *http2.DataFrame:
			if f.StreamEnded() {
				return status
			}
		}
	}
}

// closed reports whether the server closed the connection: the read ends
// with EOF or a reset, not with the test's deadline.
func (c *h2) closed(t *testing.T) {
	t.Helper()
	for {
		_, err := c.fr.ReadFrame()
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the connection is still open: %v", err)
		}
		return
	}
}

// A stream without a token is answered Unauthenticated and reset at its
// headers: the server never grants it window to send its declared 4 MB
// message (grpc-go reads a unary call's message whole before any
// interceptor runs), and the refusal is counted.
func TestAStreamWithoutATokenIsRefusedAtItsHeadersBeforeItsBodyIsRead(t *testing.T) {
	w, reg, _ := startGateway(t, nil, nil)
	c := dialH2(t, w.GatewayAddr())
	for range 3 {
		id := c.call(t, "DeployResource", false)
		// What the initial window allows, of a message declared 4,000,000 bytes.
		c.message(t, id, 4_000_000, make([]byte, 16<<10-5), false) // one frame of the default largest
		if st := c.end(t, id); st != "16" {                        // Unauthenticated
			t.Fatalf("grpc-status %q, want 16 (Unauthenticated)", st)
		}
	}
	// A stream with the token is served on the same connection.
	id := c.call(t, "Topology", false, "authorization", "Bearer "+taskToken)
	c.message(t, id, 0, nil, true)
	if st := c.end(t, id); st != "0" {
		t.Fatalf("Topology with a token: grpc-status %q", st)
	}
	if n := counter(t, reg, "sutra_api_auth_failures_total", "gateway"); n != 3 {
		t.Errorf("%v auth failures of the gateway, want 3", n)
	}
	if n := counter(t, reg, "sutra_gateway_requests_total", "Unauthenticated", "DeployResource"); n != 3 {
		t.Errorf("%v DeployResource calls counted Unauthenticated, want 3", n)
	}
}

// The gateway holds at most SUTRA_GATEWAY_MAX_CONNECTIONS connections (one
// over is closed at once, and /readyz still answers), and closes one on
// which no call presented valid credentials within
// SUTRA_GATEWAY_AUTH_TIMEOUT, while one that did stays open.
func TestTheGatewayCapsConnectionsAndClosesThoseThatNeverAuthenticate(t *testing.T) {
	clk := clock.NewFake(time.Now())
	cfg := func(c *app.Config) { c.Gateway.MaxConnections, c.Gateway.AuthTimeout = 2, 5*time.Second }
	w, reg, httpAddr := startGateway(t, cfg, clk)

	authed := dialH2(t, w.GatewayAddr())
	id := authed.call(t, "Topology", false, "authorization", "Bearer "+taskToken)
	authed.message(t, id, 0, nil, true)
	if st := authed.end(t, id); st != "0" {
		t.Fatalf("Topology: grpc-status %q", st)
	}
	silent := dialH2(t, w.GatewayAddr())

	over, err := net.Dial("tcp", w.GatewayAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer over.Close()
	_ = over.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadAll(over); err != nil && !isReset(err) {
		t.Fatalf("the connection over the cap: %v, want it closed", err)
	}
	resp, err := http.Get("http://" + httpAddr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/readyz with the gateway full: %d", resp.StatusCode)
	}

	clk.Advance(5 * time.Second)
	silent.closed(t)
	id = authed.call(t, "Topology", false, "authorization", "Bearer "+taskToken)
	authed.message(t, id, 0, nil, true)
	if st := authed.end(t, id); st != "0" {
		t.Fatalf("Topology after the timeout: grpc-status %q", st)
	}
	if n := counter(t, reg, "sutra_gateway_connections_refused_total"); n != 1 {
		t.Errorf("%v connections refused, want 1", n)
	}
}

func isReset(err error) bool { return strings.Contains(err.Error(), "reset") }

// startGateway starts a worker with both tokens, tweaked, on clk (nil: the
// real clock), and returns it, its registry and its metrics address.
func startGateway(t *testing.T, tweak func(*app.Config), clk clock.Clock) (*app.Worker, *prometheus.Registry, string) {
	t.Helper()
	env := testkit.New(t)
	cfg := apptest.Config(env)
	cfg.API.Token, cfg.AdminToken, cfg.API.Insecure = taskToken, adminToken, false
	if tweak != nil {
		tweak(&cfg)
	}
	reg := prometheus.NewRegistry()
	var httpAddr string
	w, err := app.Start(testkit.Ctx(t), cfg, app.Options{Logger: testkit.Logger(t), Registry: reg, Clock: clk,
		Listening: func(addr string) { httpAddr = addr }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.Stop(ctx); err != nil {
			t.Errorf("stopping the worker: %v", err)
		}
	})
	return w, reg, httpAddr
}

// counter is the value of the counter name whose label values are labels
// (in the order of the label names, sorted).
func counter(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			var got []string
			for _, l := range m.GetLabel() {
				got = append(got, l.GetValue())
			}
			if slices.Equal(got, labels) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

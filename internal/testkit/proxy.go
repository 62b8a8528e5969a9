package testkit

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy forwards TCP to a server, so a test can break the network: Cut drops
// every connection and refuses new ones until Restore (a partition); Reset
// drops the connections it carries but keeps accepting (a connection killed
// by a middlebox). DropCancelRequests swallows PostgreSQL cancel requests, so
// a statement whose client vanished runs to its end on the server.
// HoldReplies keeps what servers send from their clients (a publisher's
// confirms that never come) until ReleaseReplies; HoldWrites keeps what
// clients send from their servers (a server that stopped reading: once the
// sockets' buffers are full, the clients' writes block) until ReleaseWrites.
// A proxy of an AMQP server (NewAMQPProxy) forwards the server's frames
// whole, so that SendAMQP can put one of its own between two.
type Proxy struct {
	dropCancels atomic.Bool
	replies     gate
	writes      gate
	ln          net.Listener
	target      string
	// amqp is set for an AMQP server's proxy.
	amqp bool
	mu   sync.Mutex
	down bool
	// drops counts Cut and Reset calls: a connection being set up while one
	// ran is dropped too, not carried past the partition.
	drops int
	conns map[net.Conn]struct{}
	// framed are the AMQP clients' connections, each with the lock that
	// keeps a frame's bytes together.
	framed map[net.Conn]*sync.Mutex
	wg     sync.WaitGroup
}

// NewProxy listens on a free local port and forwards to target (host:port)
// until the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	return newProxy(t, target, false)
}

// NewAMQPProxy is NewProxy for the test broker.
func NewAMQPProxy(t testing.TB) *Proxy {
	t.Helper()
	u, err := url.Parse(AMQPURL())
	if err != nil {
		t.Fatal(err)
	}
	return newProxy(t, u.Host, true)
}

func newProxy(t testing.TB, target string, amqp bool) *Proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, amqp: amqp, conns: map[net.Conn]struct{}{}, framed: map[net.Conn]*sync.Mutex{}}
	p.replies.release()
	p.writes.release()
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		ln.Close()
		p.Cut()
		// A held read returns its closed connection's error.
		p.replies.release()
		p.writes.release()
		p.wg.Wait()
	})
	return p
}

// DropCancelRequests makes the proxy close, unforwarded, every new
// connection that opens with a PostgreSQL CancelRequest.
func (p *Proxy) DropCancelRequests() { p.dropCancels.Store(true) }

// Addr is the proxy's listen address.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Through points URL raw at the proxy.
func (p *Proxy) Through(t testing.TB, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = p.Addr()
	return u.String()
}

// cancelRequest is the start of a PostgreSQL CancelRequest packet: length 16,
// request code 80877102.
var cancelRequest = []byte{0, 0, 0, 16, 0x04, 0xd2, 0x16, 0x2e}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down, drops := p.down, p.drops
		p.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		var head []byte
		if p.dropCancels.Load() {
			head = make([]byte, len(cancelRequest))
			if _, err := io.ReadFull(c, head); err != nil || bytes.Equal(head, cancelRequest) {
				c.Close()
				continue
			}
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		if len(head) > 0 {
			if _, err := s.Write(head); err != nil {
				c.Close()
				s.Close()
				continue
			}
		}
		p.mu.Lock()
		if p.down || p.drops != drops {
			p.mu.Unlock()
			c.Close()
			s.Close()
			continue
		}
		p.conns[c], p.conns[s] = struct{}{}, struct{}{}
		wmu := &sync.Mutex{}
		if p.amqp {
			p.framed[c] = wmu
		}
		p.mu.Unlock()
		end := func() {
			c.Close()
			s.Close()
			p.mu.Lock()
			delete(p.framed, c)
			p.mu.Unlock()
		}
		p.wg.Go(func() {
			_, _ = io.Copy(s, heldReader{c, &p.writes})
			end()
		})
		p.wg.Go(func() {
			replies := heldReader{s, &p.replies}
			if p.amqp {
				_ = copyFrames(c, wmu, replies)
			} else {
				_, _ = io.Copy(c, replies)
			}
			end()
		})
	}
}

// copyFrames copies AMQP frames from src to dst, each whole under wmu.
func copyFrames(dst io.Writer, wmu *sync.Mutex, src io.Reader) error {
	r := bufio.NewReaderSize(src, 64<<10)
	for {
		// type (1), channel (2), payload size (4), payload, frame end (1)
		head, err := r.Peek(7)
		if err != nil {
			return err
		}
		frame := make([]byte, 7+int(binary.BigEndian.Uint32(head[3:]))+1)
		if _, err := io.ReadFull(r, frame); err != nil {
			return err
		}
		wmu.Lock()
		_, err = dst.Write(frame)
		wmu.Unlock()
		if err != nil {
			return err
		}
	}
}

// SendAMQP sends frame to every client of an AMQP proxy, between two of the
// server's frames.
func (p *Proxy) SendAMQP(t testing.TB, frame []byte) {
	t.Helper()
	if !p.amqp {
		t.Fatal("SendAMQP on a proxy that is not NewAMQPProxy's")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for c, wmu := range p.framed {
		wmu.Lock()
		_, _ = c.Write(frame)
		wmu.Unlock()
	}
}

// AMQPBlocked is the frame of connection.blocked with reason, as a broker
// short of memory or disk sends it to the connections that publish.
func AMQPBlocked(reason string) []byte {
	return amqpMethod(10, 60, append([]byte{byte(len(reason))}, reason...))
}

// AMQPUnblocked is the frame of connection.unblocked.
func AMQPUnblocked() []byte { return amqpMethod(10, 61, nil) }

// amqpMethod is a method frame on channel 0.
func amqpMethod(class, method uint16, args []byte) []byte {
	payload := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, class), method)
	payload = append(payload, args...)
	frame := binary.BigEndian.AppendUint32([]byte{1, 0, 0}, uint32(len(payload)))
	return append(append(frame, payload...), 0xce)
}

// gate holds reads: open is closed while they flow.
type gate struct {
	mu   sync.Mutex
	open chan struct{}
}

func (g *gate) wait() {
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	<-open
}

func (g *gate) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
		g.open = make(chan struct{})
	default: // held already
	}
}

func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open == nil {
		g.open = make(chan struct{})
	}
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

// heldReader holds each read, once done, while its gate is held.
type heldReader struct {
	net.Conn
	gate *gate
}

func (r heldReader) Read(b []byte) (int, error) {
	n, err := r.Conn.Read(b)
	r.gate.wait()
	return n, err
}

// HoldReplies keeps every byte servers send from its client until
// ReleaseReplies; what clients send still reaches the servers.
func (p *Proxy) HoldReplies() { p.replies.hold() }

// ReleaseReplies forwards the replies held and those that follow.
func (p *Proxy) ReleaseReplies() { p.replies.release() }

// HoldWrites keeps every byte clients send from their servers until
// ReleaseWrites, as a server that stopped reading would: once the sockets'
// buffers are full, a client's write blocks. Replies still flow.
func (p *Proxy) HoldWrites() { p.writes.hold() }

// ReleaseWrites forwards what clients sent meanwhile and what follows.
func (p *Proxy) ReleaseWrites() { p.writes.release() }

// Cut drops every connection and refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	p.closeAll()
}

// Reset drops every connection the proxy carries and keeps accepting new ones.
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeAll()
}

func (p *Proxy) closeAll() {
	p.drops++
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// Restore accepts connections again after Cut.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

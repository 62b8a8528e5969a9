package testkit

import (
	"bytes"
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
// confirms that never come) until ReleaseReplies.
type Proxy struct {
	dropCancels atomic.Bool
	// replies is closed while replies flow; HoldReplies replaces it with an
	// open channel, which ReleaseReplies closes.
	replies atomic.Pointer[chan struct{}]
	ln      net.Listener
	target  string
	mu      sync.Mutex
	down    bool
	// drops counts Cut and Reset calls: a connection being set up while one
	// ran is dropped too, not carried past the partition.
	drops int
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// NewProxy listens on a free local port and forwards to target (host:port)
// until the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.ReleaseReplies()
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		ln.Close()
		p.Cut()
		p.ReleaseReplies() // a held read returns its closed connection's error
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
		p.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			_, _ = io.Copy(dst, src)
			dst.Close()
			src.Close()
		}
		p.wg.Go(func() { pipe(s, c) })
		p.wg.Go(func() { pipe(c, heldReader{s, &p.replies}) })
	}
}

// heldReader reads a server's replies, holding each read while the proxy
// holds replies.
type heldReader struct {
	net.Conn
	replies *atomic.Pointer[chan struct{}]
}

func (r heldReader) Read(b []byte) (int, error) {
	n, err := r.Conn.Read(b)
	<-*r.replies.Load()
	return n, err
}

// HoldReplies keeps every byte servers send from its client until
// ReleaseReplies; what clients send still reaches the servers.
func (p *Proxy) HoldReplies() {
	held := make(chan struct{})
	p.replies.Store(&held)
}

// ReleaseReplies forwards the replies held and those that follow.
func (p *Proxy) ReleaseReplies() {
	flowing := make(chan struct{})
	close(flowing)
	if old := p.replies.Swap(&flowing); old != nil {
		select {
		case <-*old:
		default:
			close(*old)
		}
	}
}

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

package app_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sutra-run/worker/internal/testkit"
)

// proxy forwards TCP to a server until cut: then it drops every connection
// and refuses new ones until restored, as a network partition would.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		ln.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[s] = struct{}{}, struct{}{}
		p.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			_, _ = io.Copy(dst, src)
			dst.Close()
			src.Close()
		}
		p.wg.Go(func() { pipe(s, c) })
		p.wg.Go(func() { pipe(c, s) })
	}
}

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

func (p *proxy) restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

// through points URL raw at the proxy's address.
func through(t *testing.T, raw string, p *proxy) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = p.addr()
	return u.String()
}

func TestWorkerRidesOutBrokerAndDatabaseOutagesUnderLoadAndIsNotReadyMeanwhile(t *testing.T) {
	t.Parallel()
	env := testkit.New(t)
	pgURL, _ := url.Parse(env.Config.DatabaseURL)
	amqpURL, _ := url.Parse(env.Config.AMQPURL)
	pg, broker := newProxy(t, pgURL.Host), newProxy(t, amqpURL.Host)
	appName := "sutra-outage-" + env.Schema
	env.Deploy(t, "../examples/order.bpmn")
	b := &bundle{env: env, pub: env.Publisher(t)} // the test publishes around the outages
	q := pgURL.Query()
	q.Set("application_name", appName)
	pgURL.RawQuery = q.Encode()
	env.Config.DatabaseURL = through(t, pgURL.String(), pg)
	env.Config.AMQPURL = through(t, env.Config.AMQPURL, broker)
	b.start(t, nil)
	notReady := func(what string, cut func(), restore func()) {
		t.Helper()
		cut()
		testkit.Eventually(t, 10*time.Second, "not ready while "+what, func() bool {
			return b.w.Ready(context.Background()) != nil
		})
		time.Sleep(500 * time.Millisecond)
		restore()
		testkit.Eventually(t, 20*time.Second, "ready after "+what, func() bool {
			return b.w.Ready(context.Background()) == nil
		})
	}

	const n = 300
	var starts, paids, ships []testkit.Relay
	for i := range n {
		id := fmt.Sprintf("o-%d", i)
		starts, paids, ships = append(starts, start(id)), append(paids, paid(id)), append(ships, shippedByKey(id))
	}
	b.pub.Publish(starts...)
	notReady("the broker is unreachable", broker.cut, broker.restore)
	b.pub.Publish(paids...)
	notReady("the database is unreachable", pg.cut, pg.restore)
	b.pub.Publish(ships...)
	// And as an operator would: close the worker's broker connection and
	// terminate its database sessions, under load.
	testkit.CloseBrokerConnection(t, "sutra-worker/"+b.env.Config.ReplicaID)
	if _, err := b.env.DB.Exec(testkit.Ctx(t), "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", appName); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 90*time.Second, "every order completed", func() bool {
		return b.env.Int(t, "SELECT count(*) FROM instances WHERE status = 'completed' AND version = 3") == n
	})
	testkit.Eventually(t, 20*time.Second, "relay queue drained", func() bool { return b.pub.QueueDepth(b.env.Config.RelayQueue) == 0 })
	if got := b.env.Int(t, "SELECT count(*) FROM inbox"); got != 3*n {
		t.Errorf("inbox has %d message ids, want %d: every relay applied once", got, 3*n)
	}
	if got := b.pub.QueueDepth(b.env.Config.DeadQueue); got != 0 {
		dead := b.pub.DeadLetters(got, time.Second)
		var codes []string
		for _, d := range dead {
			codes = append(codes, d.MessageID+":"+d.Code)
		}
		t.Errorf("%d relays dead-lettered: %s", got, strings.Join(codes, ", "))
	}
	b.env.AssertNoOverlap(t, true)
	b.env.AssertNoClaimsHeld(t)
}

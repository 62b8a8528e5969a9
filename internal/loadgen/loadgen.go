// Package loadgen publishes relays as fast as the broker confirms them and
// measures publish→commit latency from the inbox, for the demo and the
// benchmarks. Each relay's message id ends with its publish time in unix
// nanoseconds; the inbox row's received_at is its commit time.
package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	amqp "github.com/rabbitmq/amqp091-go"
)

// Relay is one relay to publish; its message id gets the publish time appended.
type Relay struct {
	ID   string
	Body map[string]any
	// Copies publishes the same message (same message id) this many extra
	// times, as an at-least-once upstream does.
	Copies int
}

// Publisher publishes relays with confirms, keeping a window of unconfirmed
// publishes in flight.
type Publisher struct {
	conn     *amqp.Connection
	ch       *amqp.Channel
	exchange string
}

// Dial opens a confirming publisher on exchange.
func Dial(url, exchange string) (*Publisher, error) {
	conn, err := amqp.Dial(url)
	if err != nil {
		return nil, err
	}
	ch, err := conn.Channel()
	if err != nil {
		conn.Close()
		return nil, err
	}
	if err := ch.Confirm(false); err != nil {
		conn.Close()
		return nil, err
	}
	return &Publisher{conn: conn, ch: ch, exchange: exchange}, nil
}

// Close closes the connection.
func (p *Publisher) Close() error { return p.conn.Close() }

// Publish publishes relays and returns once all are confirmed.
func (p *Publisher) Publish(ctx context.Context, relays []Relay) error {
	return p.PublishAt(ctx, relays, 0)
}

// PublishAt publishes relays at about perSecond (as fast as the broker
// confirms them when 0) and returns once all are confirmed.
func (p *Publisher) PublishAt(ctx context.Context, relays []Relay, perSecond float64) error {
	return p.PublishEach(ctx, len(relays), perSecond, func(i int) Relay { return relays[i] })
}

// PublishEach publishes n relays, relay(i) the i-th, at about perSecond (as
// fast as the broker confirms them when 0), and returns once all are
// confirmed. The schedule is absolute (relay i is due i/perSecond after the
// first), so a publisher held back for a moment catches up rather than
// lowering the offered rate; relay is called only when its relay is due, so
// a long run holds none of them in memory.
func (p *Publisher) PublishEach(ctx context.Context, n int, perSecond float64, relay func(i int) Relay) error {
	const window = 512
	pending := make([]*amqp.DeferredConfirmation, 0, window)
	wait := func() error {
		for _, dc := range pending {
			ok, err := dc.WaitContext(ctx)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("broker nacked a relay")
			}
		}
		pending = pending[:0]
		return nil
	}
	began := time.Now()
	for i := range n {
		if perSecond > 0 {
			due := began.Add(time.Duration(float64(i) / perSecond * float64(time.Second)))
			if d := time.Until(due); d > 0 {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(d):
				}
			}
		}
		r := relay(i)
		body, err := json.Marshal(r.Body)
		if err != nil {
			return err
		}
		now := time.Now()
		msg := amqp.Publishing{
			MessageId: messageID(r.ID, now), ContentType: "application/json",
			DeliveryMode: amqp.Persistent, Timestamp: now, Body: body,
		}
		for range 1 + r.Copies {
			dc, err := p.ch.PublishWithDeferredConfirmWithContext(ctx, p.exchange, "relay", false, false, msg)
			if err != nil {
				return err
			}
			if pending = append(pending, dc); len(pending) == window {
				if err := wait(); err != nil {
					return err
				}
			}
		}
	}
	return wait()
}

// messageID is a relay's message id: id, then its publish time.
func messageID(id string, published time.Time) string {
	return id + "-" + strconv.FormatInt(published.UnixNano(), 10)
}

// PublishedAt is the publish time a relay's message id ends with.
func PublishedAt(messageID string) (time.Time, error) {
	i := strings.LastIndexByte(messageID, '-')
	ns, err := strconv.ParseInt(messageID[i+1:], 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("message id %q does not end with its publish time: %w", messageID, err)
	}
	return time.Unix(0, ns), nil
}

// Stats summarises the commits of relays whose message ids start with prefix.
type Stats struct {
	Committed  int
	First      time.Time // first publish
	Last       time.Time // last commit
	P50, P99   time.Duration
	P999       time.Duration
	StepsPerS  float64
	MaxLatency time.Duration
}

// Measure reads the inbox for relays with message ids starting with prefix.
func Measure(ctx context.Context, db *pgxpool.Pool, prefix string) (Stats, error) {
	var s Stats
	var p50, p99, p999, max float64
	var first, last *time.Time
	err := db.QueryRow(ctx, `
		WITH l AS (
			SELECT to_timestamp(substring(message_id FROM '([0-9]+)$')::numeric / 1e9) AS sent, received_at
			  FROM inbox WHERE starts_with(message_id, $1)
		)
		SELECT count(*),
		       COALESCE(percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM received_at - sent)), 0),
		       COALESCE(percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM received_at - sent)), 0),
		       COALESCE(percentile_cont(0.999) WITHIN GROUP (ORDER BY extract(epoch FROM received_at - sent)), 0),
		       COALESCE(max(extract(epoch FROM received_at - sent)), 0)::float8,
		       min(sent), max(received_at)
		  FROM l`, prefix).Scan(&s.Committed, &p50, &p99, &p999, &max, &first, &last)
	if err != nil {
		return s, err
	}
	s.P50, s.P99, s.P999, s.MaxLatency = seconds(p50), seconds(p99), seconds(p999), seconds(max)
	if first != nil && last != nil {
		s.First, s.Last = *first, *last
		if el := last.Sub(*first).Seconds(); el > 0 {
			s.StepsPerS = float64(s.Committed) / el
		}
	}
	return s, nil
}

func seconds(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

// Scrape sums the samples of the named counters and gauges at a /metrics
// URL, keyed by "name{label=value,...}".
func Scrape(ctx context.Context, url string, names ...string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, name := range names {
		mf, ok := families[name]
		if !ok {
			continue
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, lp := range m.GetLabel() {
				labels = append(labels, lp.GetName()+"="+lp.GetValue())
			}
			out[name+"{"+strings.Join(labels, ",")+"}"] += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return out, nil
}

// Package baseline is the plain consumer the worker is measured against: K
// goroutines take relays from one AMQP channel and run, per relay, the SQL the
// worker runs — store.Claim, then store.WriteStep with the state and effects
// the engine produces for the benchmark process (Step) — with no lanes, no
// engine and no metrics. A claim that another goroutine holds is nacked back
// at once: the simplest thing a consumer can do.
package baseline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/store"
	"github.com/sutra-run/worker/tools/bench"
)

// Config configures the consumer.
type Config struct {
	DatabaseURL string
	AMQPURL     string
	Queue       string
	// Workers is the number of goroutines and the AMQP prefetch.
	Workers int
	// Conns bounds the database pool.
	Conns int32
	// SyncClaims makes claims and releases wait for the WAL flush.
	SyncClaims bool
}

// Consumer is a running baseline consumer.
type Consumer struct {
	store     *store.Store
	conn      *amqp.Connection
	wg        sync.WaitGroup
	committed atomic.Int64
	requeued  atomic.Int64
}

// Start connects and consumes until Stop; ctx bounds every database call.
func Start(ctx context.Context, cfg Config) (*Consumer, error) {
	st, err := store.Open(ctx, cfg.DatabaseURL, store.Options{MaxConns: cfg.Conns, SyncClaims: cfg.SyncClaims})
	if err != nil {
		return nil, err
	}
	conn, err := amqp.Dial(cfg.AMQPURL)
	if err != nil {
		st.Close()
		return nil, err
	}
	c := &Consumer{store: st, conn: conn}
	deliveries, err := c.consume(cfg)
	if err != nil {
		conn.Close()
		st.Close()
		return nil, err
	}
	for w := range cfg.Workers {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			owner := "baseline/" + strconv.Itoa(w)
			for d := range deliveries {
				c.handle(ctx, owner, d)
			}
		}()
	}
	return c, nil
}

func (c *Consumer) consume(cfg Config) (<-chan amqp.Delivery, error) {
	ch, err := c.conn.Channel()
	if err != nil {
		return nil, err
	}
	if err := ch.Qos(cfg.Workers, 0, false); err != nil {
		return nil, err
	}
	return ch.Consume(cfg.Queue, "", false, false, false, false, nil)
}

// Committed is the number of relays committed so far.
func (c *Consumer) Committed() int64 { return c.committed.Load() }

// Requeued is the number of relays nacked back so far.
func (c *Consumer) Requeued() int64 { return c.requeued.Load() }

// Stop closes the connection (the broker redelivers what is unacked) and
// waits for the goroutines, which end when the delivery channel closes.
func (c *Consumer) Stop() {
	_ = c.conn.Close()
	c.wg.Wait()
	c.store.Close()
}

// handle runs one relay: claim and load, step, commit and release, ack.
func (c *Consumer) handle(ctx context.Context, owner string, d amqp.Delivery) {
	var relay struct {
		InstanceID string `json:"instance_id"`
		Message    string `json:"message"`
	}
	if err := json.Unmarshal(d.Body, &relay); err != nil || relay.Message != bench.Message {
		// Not a benchmark relay: dropping it makes the run fall short and fail.
		_ = d.Nack(false, false)
		return
	}
	inst, err := c.store.Claim(ctx, store.ClaimRequest{
		InstanceID: relay.InstanceID, Owner: owner, Timeout: bench.ClaimTimeout, InboxID: d.MessageId,
	})
	switch {
	case errors.Is(err, store.ErrDuplicate):
		_ = d.Ack(false)
		return
	case err != nil:
		c.requeue(d)
		return
	}
	next, eff := Step(inst.State)
	err = c.store.WriteStep(ctx, store.StepWrites{
		InstanceID: inst.ID, Owner: owner, Version: inst.Version, State: next, Effects: eff, InboxID: d.MessageId,
	})
	if err != nil {
		_ = c.store.Release(ctx, inst.ID, owner)
		c.requeue(d)
		return
	}
	_ = d.Ack(false)
	c.committed.Add(1)
}

func (c *Consumer) requeue(d amqp.Delivery) {
	c.requeued.Add(1)
	_ = d.Nack(false, true)
}

// Step is the state and effects engine.Step computes for a ping to an
// instance of the benchmark process (TestStepMatchesEngine holds it to that):
// the waiting token leaves under a new id and parks at the catch event again,
// closing its subscription and opening the next, having passed the catch
// event and its loop flow.
func Step(in engine.State) (engine.State, engine.Effects) {
	old := in.Tokens[0]
	seq := in.Seq + 1
	key := fmt.Sprint(in.Variables["key"])
	tok := engine.Token{
		ID: "t" + strconv.FormatInt(seq, 10), Element: bench.CatchElement, Flow: bench.LoopFlow,
		Wait: engine.WaitMessage, Armed: []engine.Armed{{Element: bench.CatchElement, Key: key}},
	}
	next := engine.State{Status: in.Status, Variables: in.Variables, Tokens: []engine.Token{tok}, Seq: seq}
	return next, engine.Effects{
		CloseWaits: []engine.WaitRef{{TokenID: old.ID}},
		Subscriptions: []engine.Subscription{{
			TokenID: tok.ID, Element: bench.CatchElement, Message: bench.Message, CorrelationKey: key,
		}},
		Passed: []string{bench.CatchElement, bench.LoopFlow},
	}
}

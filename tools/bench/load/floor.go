package main

import (
	"context"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/sutra-run/worker/internal/loadgen"
	"github.com/sutra-run/worker/tools/bench"
)

// brokerFloor measures what a worker run's relays cost before any worker
// touches them: the same publisher publishes the same relays, persistent and
// confirmed, to the same durable queue, and a consumer with the worker's
// prefetch acks them as they arrive (one multiple ack for every delivery
// already there), with no database and no engine. Its CPU per relay is the
// broker's and the load generator's part of every worker step, which
// neither pgbench ceiling pays; stepBudget uses it to tell the load
// generator's share of a worker run's client CPU from the worker's own.
func (b *bencher) brokerFloor(ctx context.Context) (result, error) {
	r := result{kind: "floor", conc: b.o.prefetch}
	env, err := b.env(ctx, "floor", bench.ProcessXML)
	if err != nil {
		return r, err
	}
	defer env.Close()
	conn, err := amqp.Dial(env.Config.Broker.URL)
	if err != nil {
		return r, err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return r, err
	}
	if err := ch.Qos(b.o.prefetch, 0, false); err != nil {
		return r, err
	}
	deliveries, err := ch.Consume(env.Config.RelayQueue, "", false, false, false, false, nil)
	if err != nil {
		return r, err
	}
	pub, err := loadgen.Dial(env.Config.Broker.URL, env.Config.RelayExchange)
	if err != nil {
		return r, err
	}
	defer pub.Close()
	relays := env.Pings(b.o.relays)
	b.waitQuiet(ctx, "broker floor")
	stopProfile, err := b.profile("broker-floor")
	if err != nil {
		return r, err
	}
	defer stopProfile()
	cpu := startCPU(b.dbName)
	began := time.Now()
	published := make(chan error, 1)
	go func() { published <- pub.PublishAt(ctx, relays, 0) }()
	acked, err := ackAll(ctx, deliveries, len(relays))
	r.cpu = cpu.finish()
	if err != nil {
		return r, err
	}
	if err := <-published; err != nil {
		return r, fmt.Errorf("publishing: %w", err)
	}
	r.steps, r.perSecond = len(relays), float64(len(relays))/acked.Sub(began).Seconds()
	return r, nil
}

// ackAll acks n deliveries, each batch already delivered with one multiple
// ack, and returns when the last was acked.
func ackAll(ctx context.Context, deliveries <-chan amqp.Delivery, n int) (time.Time, error) {
	stall := time.NewTimer(time.Minute)
	defer stall.Stop()
	for got := 0; got < n; {
		var last amqp.Delivery
		select {
		case d, ok := <-deliveries:
			if !ok {
				return time.Time{}, fmt.Errorf("deliveries closed after %d of %d", got, n)
			}
			last, got = d, got+1
		case <-stall.C:
			return time.Time{}, fmt.Errorf("stuck at %d of %d relays acked", got, n)
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		}
	drain:
		for got < n {
			select {
			case d := <-deliveries:
				last, got = d, got+1
			default:
				break drain
			}
		}
		if err := last.Ack(true); err != nil {
			return time.Time{}, err
		}
		stall.Reset(time.Minute)
	}
	return time.Now(), nil
}

// budget splits a worker step's CPU against what target 10-2 allows on
// this machine: batchCeilingShare (70%) of the batch ceiling's rate, on cores kept as busy as
// the batch ceiling keeps them, leaves allowed µs of CPU a step. The worker's
// run spent broker on RabbitMQ (its backlog included), load on the load
// generator (the floor's client: publishing, and a trivial ack), postgres on
// the database, and own on its Go process beyond that; kernel is the rest.
// cores and batchCores are how busy each run kept the machine.
type budget struct {
	allowed, broker, load, postgres, own, kernel float64
	cores, batchCores                            float64
}

// cores is how many cores a run kept busy on average.
func cores(r result) float64 {
	return r.cpu.machine.Seconds() * r.perSecond / float64(r.steps)
}

func stepBudget(floor, worker, batch result) (budget, bool) {
	if floor.steps == 0 || worker.steps == 0 || batch.steps == 0 {
		return budget{}, false
	}
	per := func(r result, d time.Duration) float64 { return float64(d.Microseconds()) / float64(r.steps) }
	load := per(floor, floor.cpu.client)
	return budget{
		allowed: per(batch, batch.cpu.machine) / batchCeilingShare,
		broker:  per(worker, worker.cpu.broker), load: load, postgres: per(worker, worker.cpu.postgres),
		own: per(worker, worker.cpu.client) - load, kernel: per(worker, worker.cpu.kernel()+worker.cpu.foreign),
		cores: cores(worker), batchCores: cores(batch),
	}, true
}

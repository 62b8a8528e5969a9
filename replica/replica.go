// Package replica makes a replica id belong to one live process. Claims are
// owned by "<replica>/lane/<n>" and "<replica>/admin", and a claim re-enters
// for its own owner: two live processes started with the same
// SUTRA_REPLICA_ID would each re-enter the other's claims and their steps of
// one instance could run at once. So a process registers its id under a
// lease (table leases, name "replica/<id>") before it claims anything,
// renews it like the sweeper's lease, and gives it up when it stops.
//
//   - A second live process with the same id sees the lease renewed under
//     another holder and refuses to start with fault.ReplicaIDInUse.
//   - A process restarted after a crash takes the id over once the dead
//     process's lease lapses (within about one TTL).
//   - A process that cannot renew in time stops claiming (Valid fails) until
//     it renews again; one that finds its lease taken by another process
//     reports it on Lost and the worker stops.
//
// Beside the lease, the process records the release and the schema version
// it runs (table replica_versions, keyed by the lease's holder), so that a
// contract migration waits while an older replica is live (store.Migrate).
package replica

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sutra-run/worker/fault"
	"github.com/sutra-run/worker/internal/defaults"
	"github.com/sutra-run/worker/internal/startstop"
	"github.com/sutra-run/worker/store"
)

// Store is what the registration needs from the database (*store.Store).
type Store interface {
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error)
	ReleaseLease(ctx context.Context, name, holder string) error
	Lease(ctx context.Context, name string) (holder string, expiresAt time.Time, found bool, err error)
	RecordReplicaVersion(ctx context.Context, holder string, v store.ReplicaVersion) error
	ForgetReplicaVersion(ctx context.Context, holder string) error
}

// Config configures the registration.
type Config struct {
	// ID is the replica id to register.
	ID string
	// TTL is how long the registration lasts unrenewed (default 15s); it is
	// renewed every third of that.
	TTL time.Duration
	// Release, Revision and Schema are what this process runs (its ID is
	// filled in from ID).
	Version store.ReplicaVersion
}

// LeaseName is the lease under which replica id is registered.
func LeaseName(id string) string { return "replica/" + id }

// Registration holds one replica id for this process.
type Registration struct {
	startstop.Base
	cfg    Config
	store  Store
	log    *slog.Logger
	holder string // this process, never reused
	// validUntil is when the lease lapses by the local clock (unix ns),
	// measured from before the statement that took or renewed it.
	validUntil atomic.Int64
	lost       chan struct{}
	lostOnce   sync.Once
}

// New builds a registration; Start registers.
func New(st Store, log *slog.Logger, cfg Config) *Registration {
	defaults.Set(&cfg.TTL, 15*time.Second)
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &Registration{cfg: cfg, store: st, log: log, holder: cfg.ID + "#" + hex.EncodeToString(b[:]), lost: make(chan struct{})}
}

// Start registers the id and renews it until Stop, which gives it up. When
// another process holds the id, Start waits for its lease to lapse (a
// crashed predecessor) for up to about 1.5 TTL; if that process renews it
// meanwhile, Start refuses with fault.ReplicaIDInUse.
func (r *Registration) Start(ctx context.Context) error {
	if err := r.register(ctx); err != nil {
		return err
	}
	return r.Run(ctx, "replica registration", r.run)
}

func (r *Registration) register(ctx context.Context) error {
	name := LeaseName(r.cfg.ID)
	give := time.Now().Add(r.cfg.TTL + r.cfg.TTL/2)
	var seen time.Time // the other holder's expiry last read
	for {
		asked := time.Now()
		held, err := r.store.AcquireLease(ctx, name, r.holder, r.cfg.TTL)
		if err != nil {
			return err
		}
		if held {
			r.validUntil.Store(asked.Add(r.cfg.TTL).UnixNano())
			v := r.cfg.Version
			v.ID = r.cfg.ID
			return r.store.RecordReplicaVersion(ctx, r.holder, v)
		}
		holder, expires, found, err := r.store.Lease(ctx, name)
		if err != nil {
			return err
		}
		switch {
		case found && !seen.IsZero() && expires.After(seen):
			return fault.New(fault.ReplicaIDInUse, "replica id %q is in use by another live process (%s), which renewed it just now: give each process its own SUTRA_REPLICA_ID", r.cfg.ID, holder)
		case time.Now().After(give):
			return fault.New(fault.ReplicaIDInUse, "replica id %q is held by %s and its registration did not lapse within %s", r.cfg.ID, holder, r.cfg.TTL+r.cfg.TTL/2)
		}
		if found && seen.IsZero() {
			r.log.Warn("replica id registered by another process; waiting for its registration to lapse",
				"replica", r.cfg.ID, "holder", holder, "expires_at", expires, "code", fault.ReplicaIDInUse)
		}
		seen = expires
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(max(r.cfg.TTL/10, 10*time.Millisecond)):
		}
	}
}

func (r *Registration) run(ctx, _ context.Context) {
	name := LeaseName(r.cfg.ID)
	tick := time.NewTicker(r.cfg.TTL / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := startstop.FinalContext(ctx)
			defer cancel()
			r.validUntil.Store(0)
			// The lease first: a live lease without its version row would
			// read as the oldest release.
			if err := r.store.ReleaseLease(fctx, name, r.holder); err != nil {
				r.log.Warn("releasing the replica registration; it lapses by itself", "replica", r.cfg.ID, "code", fault.Code(err), "err", err)
			}
			if err := r.store.ForgetReplicaVersion(fctx, r.holder); err != nil {
				r.log.Warn("forgetting the replica's version; the next registration does", "replica", r.cfg.ID, "code", fault.Code(err), "err", err)
			}
			return
		case <-tick.C:
		}
		asked := time.Now()
		cctx, cancel := context.WithTimeout(ctx, r.cfg.TTL/3)
		held, err := r.store.AcquireLease(cctx, name, r.holder, r.cfg.TTL)
		cancel()
		switch {
		case err == nil && held:
			r.validUntil.Store(asked.Add(r.cfg.TTL).UnixNano())
		case err == nil:
			r.validUntil.Store(0)
			r.log.Error("replica id taken over by another process: stopping", "replica", r.cfg.ID, "code", fault.ReplicaIDInUse)
			r.lostOnce.Do(func() { close(r.lost) })
			<-ctx.Done()
			return
		case ctx.Err() == nil:
			r.log.Warn("renewing the replica registration", "replica", r.cfg.ID, "code", fault.Code(err), "err", err)
		}
	}
}

// Valid reports whether this process may claim as its replica id now: nil
// while the registration is held, fault.Unavailable once it lapsed unrenewed.
func (r *Registration) Valid() error {
	if time.Now().UnixNano() < r.validUntil.Load() {
		return nil
	}
	return fault.New(fault.Unavailable, "the registration of replica id %q lapsed: not claiming until it is renewed", r.cfg.ID)
}

// Lost is closed when another process took the replica id over: this
// process must stop.
func (r *Registration) Lost() <-chan struct{} { return r.lost }

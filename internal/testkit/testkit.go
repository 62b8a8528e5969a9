// Package testkit gives each test its own schema on the real PostgreSQL and
// its own exchange and queue names on the real RabbitMQ, plus an audit of
// every claim transition to check the invariants against.
package testkit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/sutra-run/worker/store"
)

// DatabaseURL is the test server's database (SUTRA_TEST_DATABASE_URL).
func DatabaseURL() string {
	if u := os.Getenv("SUTRA_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/sutra_test"
}

// AMQPURL is the test broker (SUTRA_TEST_AMQP_URL).
func AMQPURL() string {
	if u := os.Getenv("SUTRA_TEST_AMQP_URL"); u != "" {
		return u
	}
	return "amqp://guest:guest@127.0.0.1:5672/"
}

// Ctx is a context bounded by the test's deadline.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func randomName(prefix string) string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

var ensureOnce sync.Once

// Config names what a test's components connect to: the test's schema and
// broker names. The worker's whole configuration is built from it in
// internal/testkit/apptest, so that the kit itself links only the store.
type Config struct {
	// DatabaseURL's search_path is the test's schema.
	DatabaseURL string
	AMQPURL     string
	// ReplicaID is unique per test.
	ReplicaID      string
	RelayExchange  string
	RelayQueue     string
	DeadExchange   string
	DeadQueue      string
	OutboxExchange string
}

// Env is one test's isolated environment.
type Env struct {
	Config Config
	Schema string
	// DB is a pool on the test schema for assertions and fault injection.
	DB *pgxpool.Pool
}

// New creates a schema with migrations and the claim audit, and unique
// broker names; both are removed when the test ends.
func New(t testing.TB) *Env {
	t.Helper()
	e := NewUnmigrated(t)
	ctx := Ctx(t)
	err := whileBusy(ctx, func() error {
		st, err := store.Open(ctx, e.Config.DatabaseURL, store.Options{MaxConns: 1})
		if err != nil {
			return err
		}
		defer st.Close()
		return st.Migrate(ctx)
	})
	if err != nil {
		t.Fatalf("migrating test schema: %v", err)
	}
	e.InstallAudit(t)
	return e
}

// InstallAudit installs the claim audit on a migrated schema.
func (e *Env) InstallAudit(t testing.TB) {
	t.Helper()
	ctx := Ctx(t)
	if err := whileBusy(ctx, func() error { _, err := e.DB.Exec(ctx, auditSQL); return err }); err != nil {
		t.Fatalf("installing claim audit: %v", err)
	}
}

// NewUnmigrated is New without migrations and without the claim audit: a
// test that migrates with another build (the upgrade test) installs the
// audit itself.
func NewUnmigrated(t testing.TB) *Env {
	t.Helper()
	ctx := Ctx(t)
	ensureOnce.Do(func() {
		if err := whileBusy(ctx, func() error { return store.EnsureDatabase(ctx, DatabaseURL()) }); err != nil {
			t.Fatalf("creating test database: %v", err)
		}
	})
	schema := randomName("t_")
	err := whileBusy(ctx, func() error {
		admin, err := pgx.Connect(ctx, DatabaseURL())
		if err != nil {
			return err
		}
		defer admin.Close(ctx)
		_, err = admin.Exec(ctx, "CREATE SCHEMA "+schema)
		return err
	})
	if err != nil {
		t.Fatalf("creating the test schema: %v", err)
	}
	u, _ := url.Parse(DatabaseURL())
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()

	names := randomName("sutra.test.")
	e := &Env{Schema: schema, Config: Config{
		DatabaseURL: u.String(), AMQPURL: AMQPURL(), ReplicaID: randomName("r"),
		RelayExchange: names, RelayQueue: names,
		DeadExchange: names + ".dead", DeadQueue: names + ".dead", OutboxExchange: names + ".outbox",
	}}
	cfg, err := pgxpool.ParseConfig(e.Config.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 2 // assertions and fault injection; the suite shares max_connections with make bench
	if e.DB, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.DB.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = whileBusy(ctx, func() error {
			conn, err := pgx.Connect(ctx, DatabaseURL())
			if err != nil {
				return err
			}
			defer conn.Close(ctx)
			_, err = conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
			return err
		})
		if conn, err := amqp.Dial(AMQPURL()); err == nil {
			if ch, err := conn.Channel(); err == nil {
				_, _ = ch.QueueDelete(names, false, false, false)
				_, _ = ch.QueueDelete(names+".dead", false, false, false)
				_ = ch.ExchangeDelete(names, false, false)
				_ = ch.ExchangeDelete(names+".dead", false, false)
				_ = ch.ExchangeDelete(names+".outbox", false, false)
			}
			conn.Close()
		}
	})
	return e
}

// whileBusy runs f again while the server refuses connections for want of
// slots (SQLSTATE 53300): the suite shares max_connections with whatever else
// runs on the machine, make bench included.
func whileBusy(ctx context.Context, f func() error) error {
	for delay := 50 * time.Millisecond; ; delay = min(delay*2, 2*time.Second) {
		err := f()
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "53300" {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
	}
}

// auditSQL records every claim taken, taken over or released (a claims
// row inserted, updated to another owner, deleted) and every change of an
// instance's version, with the transaction that made it, so tests can
// prove that no claim was taken from a live holder and that versions
// advance by one, each in a transaction that released the claim of the
// owner that stepped (the commit fence and release are one transaction).
const auditSQL = `
CREATE TABLE claim_audit (
    seq         bigserial PRIMARY KEY,
    tx          bigint NOT NULL DEFAULT txid_current(),
    instance_id text NOT NULL,
    old_owner   text,
    new_owner   text,
    old_version bigint NOT NULL,
    new_version bigint NOT NULL,
    stale       boolean NOT NULL
);
CREATE FUNCTION claim_audit() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    v bigint;
BEGIN
    IF TG_TABLE_NAME = 'instances' THEN
        IF TG_OP = 'INSERT' THEN
            INSERT INTO claim_audit (instance_id, old_owner, new_owner, old_version, new_version, stale)
            VALUES (NEW.id, NULL, NULL, -1, NEW.version, false);
        ELSIF OLD.version <> NEW.version THEN
            INSERT INTO claim_audit (instance_id, old_owner, new_owner, old_version, new_version, stale)
            VALUES (NEW.id, NULL, NULL, OLD.version, NEW.version, false);
        END IF;
        RETURN NULL;
    END IF;
    IF TG_OP = 'DELETE' THEN
        SELECT version INTO v FROM instances WHERE id = OLD.instance_id;
        INSERT INTO claim_audit (instance_id, old_owner, new_owner, old_version, new_version, stale)
        VALUES (OLD.instance_id, OLD.owner, NULL, COALESCE(v, 0), COALESCE(v, 0), false);
        RETURN NULL;
    END IF;
    SELECT version INTO v FROM instances WHERE id = NEW.instance_id;
    IF TG_OP = 'INSERT' THEN
        INSERT INTO claim_audit (instance_id, old_owner, new_owner, old_version, new_version, stale)
        VALUES (NEW.instance_id, NULL, NEW.owner, COALESCE(v, 0), COALESCE(v, 0), false);
    ELSIF OLD.owner IS DISTINCT FROM NEW.owner THEN
        INSERT INTO claim_audit (instance_id, old_owner, new_owner, old_version, new_version, stale)
        VALUES (NEW.instance_id, OLD.owner, NEW.owner, COALESCE(v, 0), COALESCE(v, 0),
                OLD.claimed_at < now() - interval '1 second');
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER claim_audit AFTER INSERT OR UPDATE ON instances FOR EACH ROW EXECUTE FUNCTION claim_audit();
CREATE TRIGGER claim_audit AFTER INSERT OR UPDATE OR DELETE ON claims FOR EACH ROW EXECUTE FUNCTION claim_audit();
`

// auditRow is one row of claim_audit.
type auditRow struct {
	tx               int64
	id               string
	oldOwner         *string
	newOwner         *string
	oldV, newV       int64
	stale, increment bool
}

// audit reads claim_audit in order (of instance id alone, unless id is
// ""), and tells for each version change (increment) the owner whose claim
// its transaction released (nil: none).
func (e *Env) audit(t testing.TB, id string) (rows []auditRow, releasedBy func(auditRow) *string) {
	t.Helper()
	r, err := e.DB.Query(Ctx(t), `SELECT tx, instance_id, old_owner, new_owner, old_version, new_version, stale
		FROM claim_audit WHERE $1 = '' OR instance_id = $1 ORDER BY seq`, id)
	if err != nil {
		t.Fatal(err)
	}
	rows, err = pgx.CollectRows(r, func(r pgx.CollectableRow) (auditRow, error) {
		var a auditRow
		err := r.Scan(&a.tx, &a.id, &a.oldOwner, &a.newOwner, &a.oldV, &a.newV, &a.stale)
		a.increment = a.oldV >= 0 && a.newV != a.oldV
		return a, err
	})
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		tx int64
		id string
	}
	released := map[key]*string{}
	for _, a := range rows {
		if a.oldOwner != nil && a.newOwner == nil {
			released[key{a.tx, a.id}] = a.oldOwner
		}
	}
	return rows, func(a auditRow) *string { return released[key{a.tx, a.id}] }
}

// AssertNoOverlap checks the audit: a claim is only ever taken from nobody,
// from its own owner, or (when allowStale) from a stale holder; and every
// version increment is by one per resume it commits (several: a chain of
// resumes under one claim, each with its row in the step history when the
// instance has one), in a transaction that released a claim (the fenced
// commit of the owner that held it).
func (e *Env) AssertNoOverlap(t testing.TB, allowStale bool) {
	t.Helper()
	rows, releasedBy := e.audit(t, "")
	for _, a := range rows {
		if a.increment && (a.newV <= a.oldV || releasedBy(a) == nil) {
			t.Errorf("instance %s: version %d→%d releasing the claim of %v is not a fenced commit", a.id, a.oldV, a.newV, deref(releasedBy(a)))
		}
		if a.increment && a.newV > a.oldV+1 {
			rows := e.Int(t, "SELECT count(*) FROM step_history WHERE instance_id = $1 AND version > $2 AND version <= $3", a.id, a.oldV, a.newV)
			if all := e.Int(t, "SELECT count(*) FROM step_history WHERE instance_id = $1", a.id); all > 0 && rows != a.newV-a.oldV {
				t.Errorf("instance %s: version %d→%d in one commit with %d rows of step history, want one per resume", a.id, a.oldV, a.newV, rows)
			}
		}
		if a.oldOwner != nil && a.newOwner != nil && *a.oldOwner != *a.newOwner && !(allowStale && a.stale) {
			t.Errorf("instance %s: claim taken from live holder %s by %s (two steps at once)", a.id, *a.oldOwner, *a.newOwner)
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return "<none>"
	}
	return *s
}

// Committers lists, in order, the owner that committed each step of an instance.
func (e *Env) Committers(t testing.TB, id string) []string {
	t.Helper()
	rows, releasedBy := e.audit(t, id)
	var owners []string
	for _, a := range rows {
		for v := a.oldV; a.increment && v < a.newV; v++ {
			owners = append(owners, deref(releasedBy(a))) // one per resume of a chain
		}
	}
	return owners
}

// AssertNoClaimsHeld fails if any instance is still claimed.
func (e *Env) AssertNoClaimsHeld(t testing.TB) {
	t.Helper()
	var n int
	if err := e.DB.QueryRow(Ctx(t), "SELECT count(*) FROM claims").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d instances are still claimed", n)
	}
}

// Deploy deploys a BPMN file from the repository's examples/ or testdata.
func (e *Env) Deploy(t testing.TB, path string) []store.Deployed {
	t.Helper()
	xml, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(Ctx(t), e.Config.DatabaseURL, store.Options{MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var d []store.Deployed
	err = whileBusy(Ctx(t), func() (err error) { d, err = st.Deploy(Ctx(t), xml); return err })
	if err != nil {
		t.Fatalf("deploying %s: %v", path, err)
	}
	return d
}

// Publisher publishes relays to the test's exchange with confirms.
type Publisher struct {
	t    testing.TB
	conn *amqp.Connection
	ch   *amqp.Channel
	env  *Env
	mu   sync.Mutex
}

// Publisher opens a confirming publisher, declaring the topology first so
// relays published before the worker starts are not lost.
func (e *Env) Publisher(t testing.TB) *Publisher {
	t.Helper()
	conn, err := amqp.Dial(e.Config.AMQPURL)
	if err != nil {
		t.Fatalf("connecting to RabbitMQ: %v", err)
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	c := e.Config
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(ch.ExchangeDeclare(c.RelayExchange, "topic", true, false, false, false, nil))
	_, err = ch.QueueDeclare(c.RelayQueue, true, false, false, false, nil)
	must(err)
	must(ch.QueueBind(c.RelayQueue, "#", c.RelayExchange, false, nil))
	must(ch.ExchangeDeclare(c.DeadExchange, "topic", true, false, false, false, nil))
	_, err = ch.QueueDeclare(c.DeadQueue, true, false, false, false, nil)
	must(err)
	must(ch.QueueBind(c.DeadQueue, "#", c.DeadExchange, false, nil))
	must(ch.Confirm(false))
	p := &Publisher{t: t, conn: conn, ch: ch, env: e}
	t.Cleanup(func() { conn.Close() })
	return p
}

// Relay is a relay body with its message id.
type Relay struct {
	MessageID string
	Body      any // marshalled as JSON unless []byte
	Headers   amqp.Table
}

// Publish publishes relays and waits for the broker's confirms.
func (p *Publisher) Publish(relays ...Relay) {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	var confirms []*amqp.DeferredConfirmation
	for _, r := range relays {
		body, ok := r.Body.([]byte)
		if !ok {
			var err error
			if body, err = json.Marshal(r.Body); err != nil {
				p.t.Fatal(err)
			}
		}
		dc, err := p.ch.PublishWithDeferredConfirmWithContext(Ctx(p.t), p.env.Config.RelayExchange, "relay", false, false,
			amqp.Publishing{MessageId: r.MessageID, ContentType: "application/json", DeliveryMode: amqp.Persistent,
				Body: body, Headers: r.Headers, Timestamp: time.Now()})
		if err != nil {
			p.t.Fatalf("publishing: %v", err)
		}
		confirms = append(confirms, dc)
	}
	for _, dc := range confirms {
		if ok, err := dc.WaitContext(Ctx(p.t)); err != nil || !ok {
			p.t.Fatalf("publish not confirmed: %v", err)
		}
	}
}

// DeadLetter is a message read back from the dead-letter queue.
type DeadLetter struct {
	MessageID string
	Code      string
	Reason    string
	Body      []byte
}

// DeadLetters reads up to n dead letters, waiting up to timeout for them.
func (p *Publisher) DeadLetters(n int, timeout time.Duration) []DeadLetter {
	p.t.Helper()
	var out []DeadLetter
	deadline := time.Now().Add(timeout)
	for len(out) < n && time.Now().Before(deadline) {
		p.mu.Lock()
		d, ok, err := p.ch.Get(p.env.Config.DeadQueue, true)
		p.mu.Unlock()
		if err != nil {
			p.t.Fatal(err)
		}
		if !ok {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		code, _ := d.Headers["x-sutra-code"].(string)
		reason, _ := d.Headers["x-sutra-reason"].(string)
		out = append(out, DeadLetter{MessageID: d.MessageId, Code: code, Reason: reason, Body: d.Body})
	}
	return out
}

// QueueDepth is the number of ready messages in queue.
func (p *Publisher) QueueDepth(queue string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	q, err := p.ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		p.t.Fatal(err)
	}
	return q.Messages
}

// Eventually polls cond until it holds or timeout passes. It is for effects
// no component of this process signals: a worker process the test runs, the
// database server's own state (a statement waiting on a lock), readiness as
// a probe sees it through a cut proxy or a blocked broker. A wait for what a
// component did waits on that component's TestSignals instead
// (testsignal.Signal.Until for a condition read from the database).
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Logger logs to the test output only when verbose, to keep failures readable.
func Logger(t testing.TB) *slog.Logger {
	if !testing.Verbose() {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Int queries one integer.
func (e *Env) Int(t testing.TB, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := e.DB.QueryRow(Ctx(t), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// CloseBrokerConnection closes, from the broker's side, the connection whose
// client-provided name is name, as an operator's `rabbitmqctl` would.
func CloseBrokerConnection(t testing.TB, name string) {
	t.Helper()
	out, err := exec.Command("rabbitmqctl", "-q", "list_connections", "pid", "client_properties").CombinedOutput()
	if err != nil {
		t.Fatalf("rabbitmqctl list_connections: %v: %s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.Contains(line, `"`+name+`"`) {
			continue
		}
		pid := strings.Fields(line)[0]
		if out, err := exec.Command("rabbitmqctl", "-q", "close_connection", pid, "closed by test").CombinedOutput(); err != nil {
			t.Fatalf("rabbitmqctl close_connection: %v: %s", err, out)
		}
		return
	}
	t.Fatalf("no broker connection named %q in:\n%s", name, out)
}

// durabilitySQL records, at commit time, the synchronous_commit setting of
// every transaction that writes the audited tables: a deferred constraint
// trigger fires just before the commit, so it sees what the commit will use.
// For instances and claims it names the kind of write: a claim (a claims
// row written, or a start's row created at version 0), a release (a claims
// row deleted, or a start's row with it) or a step commit (the version
// advanced, and the claims row deleted in the same transaction).
const durabilitySQL = `
CREATE TABLE durability_audit (
    seq     bigserial PRIMARY KEY,
    tbl     text NOT NULL,
    op      text NOT NULL,
    kind    text NOT NULL,
    setting text NOT NULL
);
CREATE FUNCTION durability_audit() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    k text := TG_OP;
BEGIN
    IF TG_TABLE_NAME = 'instances' THEN
        IF TG_OP = 'INSERT' THEN
            k := CASE WHEN NEW.version = 0 THEN 'claim' ELSE 'insert' END;
        ELSIF TG_OP = 'DELETE' THEN
            k := CASE WHEN OLD.version = 0 THEN 'release' ELSE 'delete' END;
        ELSIF NEW.version <> OLD.version THEN
            k := 'commit';
        ELSE
            k := 'claim';
        END IF;
    END IF;
    IF TG_TABLE_NAME = 'claims' THEN
        IF TG_OP <> 'DELETE' THEN
            k := 'claim';
        ELSIF EXISTS (SELECT 1 FROM instances WHERE id = OLD.instance_id AND xmin = pg_current_xact_id()::xid) THEN
            k := 'commit'; -- the transaction wrote the instance row: its step
        ELSE
            k := 'release';
        END IF;
    END IF;
    IF TG_TABLE_NAME = 'tasks' AND TG_OP = 'UPDATE' THEN
        IF NEW.outcome IS DISTINCT FROM OLD.outcome THEN
            k := 'outcome';
        ELSIF NEW.locked_by IS DISTINCT FROM OLD.locked_by OR NEW.lock_expires_at IS DISTINCT FROM OLD.lock_expires_at THEN
            k := 'lock';
        END IF;
    END IF;
    -- A partition's write is recorded under its partitioned table.
    INSERT INTO durability_audit (tbl, op, kind, setting)
    VALUES (coalesce((SELECT inhparent::regclass::text FROM pg_inherits WHERE inhrelid = TG_RELID), TG_TABLE_NAME),
            TG_OP, k, current_setting('synchronous_commit'));
    RETURN NULL;
END $$;
`

// AuditDurability records the synchronous_commit setting at the commit of
// every write to tables (see Durability).
func (e *Env) AuditDurability(t testing.TB, tables ...string) {
	t.Helper()
	if _, err := e.DB.Exec(Ctx(t), durabilitySQL); err != nil {
		t.Fatalf("installing the durability audit: %v", err)
	}
	for _, tbl := range tables {
		q := "CREATE CONSTRAINT TRIGGER durability_audit AFTER INSERT OR UPDATE OR DELETE ON " + tbl +
			" DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION durability_audit()"
		if _, err := e.DB.Exec(Ctx(t), q); err != nil {
			t.Fatalf("auditing %s: %v", tbl, err)
		}
	}
}

// Durability returns, per "table op kind", the distinct synchronous_commit
// settings the audited writes committed with.
func (e *Env) Durability(t testing.TB) map[string][]string {
	t.Helper()
	rows, err := e.DB.Query(Ctx(t), `SELECT tbl || ' ' || op || ' ' || kind, array_agg(DISTINCT setting ORDER BY setting)
		FROM durability_audit GROUP BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for rows.Next() {
		var k string
		var v []string
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		out[k] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Counter reads a counter of reg by name and one label ("" for an
// unlabelled counter); 0 when it has no such sample yet.
func Counter(t testing.TB, reg prometheus.Gatherer, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label == "" {
				return m.GetCounter().GetValue()
			}
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

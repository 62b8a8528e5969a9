package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sutra-run/worker/engine"
)

// tasksChannelSQL names the PostgreSQL channel on which a commit that
// creates pull tasks tells every replica's waiting fetches of them
// (ListenTasks): one notice per transaction, delivered only if it commits.
// Channels are database-wide, so the name carries the schema's (hashed to
// fit a channel name): deployments in other schemas of one database never
// wake each other.
const tasksChannelSQL = `'sutra_tasks_' || left(md5(current_schema()), 16)`

// tasksNotice is a TasksChannel payload: the store that committed (a
// replica skips its own: its lanes hand their tasks to its waiters) and the
// topic of each task created, once per task. Topics is left out when they
// would pass maxNoticeBytes: a listener then looks for tasks.
type tasksNotice struct {
	From   string   `json:"from"`
	Topics []string `json:"topics,omitempty"`
}

// maxNoticeBytes keeps a payload under PostgreSQL's 8000 bytes.
const maxNoticeBytes = 7900

// newOrigin names a store in its notices.
func newOrigin() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// queueTasksNotice queues the notice of the pull tasks the steps of one
// commit create, if they create any.
func (s *Store) queueTasksNotice(b *pgx.Batch, cs []StepWrites) {
	var topics []string
	add := func(e []engine.Task) {
		for _, t := range e {
			if t.Type != "" {
				topics = append(topics, t.Type)
			}
		}
	}
	for _, c := range cs {
		for _, p := range c.Earlier {
			add(p.Effects.Tasks)
		}
		add(c.Effects.Tasks)
		for _, x := range c.Consumed {
			add(x.Effects.Tasks)
		}
	}
	if len(topics) == 0 {
		return
	}
	payload, _ := json.Marshal(tasksNotice{From: s.origin, Topics: topics}) // strings only: never fails
	if len(payload) > maxNoticeBytes {
		payload, _ = json.Marshal(tasksNotice{From: s.origin})
	}
	b.Queue("SELECT pg_notify("+tasksChannelSQL+", $1)", string(payload))
}

// ListenTasks listens for the pull tasks other stores' commits create, on
// a connection of its own (not one of the pool's, which it would hold for
// ever), until ctx ends or the connection fails; it closes the connection
// before it returns. listening is called once the LISTEN is in place;
// heard is called with the topics of each notice of another store, once
// per task (nil: they were too many to tell, look).
func (s *Store) ListenTasks(ctx context.Context, listening func(), heard func(topics []string)) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return translate(err, "connecting to listen for tasks")
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(cctx) // the connection goes either way
	}()
	var channel string
	if err := conn.QueryRow(ctx, "SELECT "+tasksChannelSQL).Scan(&channel); err != nil {
		return translate(err, "naming the tasks channel")
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return translate(err, "listening for tasks")
	}
	listening()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return translate(err, "listening for tasks")
		}
		var notice tasksNotice
		if err := json.Unmarshal([]byte(n.Payload), &notice); err != nil {
			heard(nil) // not ours to read: look
			continue
		}
		if notice.From != s.origin {
			heard(notice.Topics)
		}
	}
}

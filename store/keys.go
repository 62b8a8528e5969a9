package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Keys for Zeebe clients (migration 0019): one sequence, sutra_keys, names
// every definition, instance, task, incident and buffered message, and
// whatever else the Zeebe gateway answers a key for (a deployment, a
// published message, a variables update). A key is never reused.

// NextKey draws a fresh key from the sequence.
func (s *Store) NextKey(ctx context.Context) (int64, error) {
	var k int64
	err := s.pool.QueryRow(ctx, `SELECT nextval('sutra_keys')`).Scan(&k)
	return k, translate(err, "drawing a key")
}

// DefinitionByKey is the definition (process key and version) whose Zeebe
// key is zeebeKey. ErrNotFound when there is none.
func (s *Store) DefinitionByKey(ctx context.Context, zeebeKey int64) (key string, version int, err error) {
	err = s.pool.QueryRow(ctx, `SELECT key, version FROM definitions WHERE zeebe_key = $1`, zeebeKey).Scan(&key, &version)
	return key, version, translate(err, fmt.Sprintf("reading definition with key %d", zeebeKey))
}

// KeyedInstance is an instance as a Zeebe client names it: its keys and
// its definition's.
type KeyedInstance struct {
	ID                string
	Key               int64
	Definition        string
	DefinitionVersion int
	DefinitionKey     int64
	Status            string
	// Variables are read only when asked for.
	Variables map[string]any
}

const keyedInstanceSelect = `SELECT i.id, i.zeebe_key, i.definition_key, i.definition_version, d.zeebe_key, i.status,
       CASE WHEN $2 THEN i.variables END
  FROM instances i JOIN definitions d ON d.key = i.definition_key AND d.version = i.definition_version`

func (s *Store) keyedInstance(ctx context.Context, where string, arg any, vars bool, what string) (KeyedInstance, error) {
	var in KeyedInstance
	err := s.pool.QueryRow(ctx, keyedInstanceSelect+" WHERE i.version > 0 AND "+where, arg, vars).
		Scan(&in.ID, &in.Key, &in.Definition, &in.DefinitionVersion, &in.DefinitionKey, &in.Status, &in.Variables)
	return in, translate(err, what)
}

// InstanceByKey reads the instance whose Zeebe key is key (its variables
// when vars is set). ErrNotFound when there is none, or it is a start that
// never committed its first step.
func (s *Store) InstanceByKey(ctx context.Context, key int64, vars bool) (KeyedInstance, error) {
	return s.keyedInstance(ctx, "i.zeebe_key = $1", key, vars, fmt.Sprintf("reading instance with key %d", key))
}

// InstanceKeys reads instance id with its keys (its variables when vars is
// set). ErrNotFound as InstanceByKey.
func (s *Store) InstanceKeys(ctx context.Context, id string, vars bool) (KeyedInstance, error) {
	return s.keyedInstance(ctx, "i.id = $1", id, vars, "reading instance "+id)
}

// Ended lists which of the instances ids have ended (completed,
// terminated or cancelled, not cancelling): one statement for every waiter of a poll.
func (s *Store) Ended(ctx context.Context, ids []string) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT id FROM instances WHERE id = ANY($1) AND version > 0 AND status NOT IN ('active', 'cancelling')`, ids)
	if err != nil {
		return nil, translate(err, "looking for ended instances")
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return out, translate(err, "looking for ended instances")
}

// MessageSeen reports whether a relay with message id id was applied (the
// inbox) or is buffered and alive: the Zeebe gateway refuses to publish it
// again, as Zeebe refuses a message id it holds.
func (s *Store) MessageSeen(ctx context.Context, id string) (bool, error) {
	var seen bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM inbox WHERE message_id = $1)
		OR EXISTS (SELECT 1 FROM buffered_messages WHERE message_id = $1 AND expires_at > now())`, id).Scan(&seen)
	return seen, translate(err, "looking up message "+id)
}

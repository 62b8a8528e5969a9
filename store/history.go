package store

import (
	"context"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/sutra-run/worker/engine"
)

// The step history (migration 0025): a row per committed step, written by
// the step's own transaction into step_history_days (partitioned by day,
// migration 0034), read by the admin API through the view step_history;
// the sweeper drops the days past the retention (partitions.go).

// StepCause is what the step history records of why a step ran, beside
// its instance, counter, owner, time and the relay it applied.
type StepCause struct {
	// Kind is the resume's kind (HistoryStep.Cause); a step
	// without one (written by a tool, not the lanes) leaves no row.
	Kind string
	// Detail names what the cause carried (HistoryStep.Detail).
	Detail string
	// Bounces counts the claim refusals the resume met before it applied;
	// nil when the resume carries no count.
	Bounces *int
}

// historyInsertSQL records the steps of one commit: their instances, the
// counters they committed, causes, details, owners, relays (empty: none),
// bounces (-1 not counted), and paths (their ids joined by pathSep: a
// multi-row insert takes one array per column, and SQL arrays of arrays
// must be rectangular) and whether each was cut.
const historyInsertSQL = `INSERT INTO step_history_days (instance_id, version, cause, detail, owner, message_id, bounces, passed, passed_cut)
	SELECT id, v, c, d, o, NULLIF(m, ''), NULLIF(b, -1), string_to_array(p, E'\x1f'), x
	  FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int[], $8::text[], $9::bool[]) AS h(id, v, c, d, o, m, b, p, x)`

// pathSep joins a step's path for historyInsertSQL: XML 1.0 allows no
// U+001F anywhere, so no BPMN id holds it.
const pathSep = "\x1f"

// queueHistory queues the history rows of the steps of one commit as one
// statement.
func queueHistory(b *pgx.Batch, cs []StepWrites) {
	var ids, causes, details, owners, messages, paths []string
	var versions []int64
	var bounces []int32
	var cuts []bool
	for _, c := range cs {
		ps := c.parts()
		for k, p := range ps {
			h := p.History
			if h.Kind == "" {
				continue
			}
			n := int32(-1)
			if h.Bounces != nil {
				n = int32(*h.Bounces)
			}
			ids, versions, causes, details = append(ids, c.InstanceID), append(versions, c.Version+1+int64(k)), append(causes, h.Kind), append(details, clip(h.Detail))
			owners, messages, bounces = append(owners, c.Owner), append(messages, p.InboxID), append(bounces, n)
			var consumed []Consumed
			if k == len(ps)-1 {
				consumed = c.Consumed // applied after the chain's last resume
			}
			path, cut := passed(p.Effects, consumed)
			paths, cuts = append(paths, strings.Join(path, pathSep)), append(cuts, cut)
		}
	}
	if len(ids) > 0 {
		b.Queue(historyInsertSQL, ids, versions, causes, details, owners, messages, bounces, paths, cuts)
	}
}

// passed is the path of a step's effects e, the buffered messages it applied
// after its trigger included, cut to engine.MaxPassed ids as one step's is.
func passed(e engine.Effects, consumed []Consumed) ([]string, bool) {
	path, cut := e.Passed, e.PassedCut
	for _, x := range consumed {
		path, cut = append(slices.Clip(path), x.Effects.Passed...), cut || x.Effects.PassedCut
	}
	if len(path) > engine.MaxPassed {
		path, cut = path[:engine.MaxPassed], true
	}
	return path, cut
}

// maxDetailBytes bounds a history row's detail (a variable name list, a
// correlation key): the row stays small whatever the cause carried.
const maxDetailBytes = 200

// clip cuts s to maxDetailBytes at a rune boundary, marking the cut.
func clip(s string) string {
	if len(s) <= maxDetailBytes {
		return s
	}
	cut := maxDetailBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// HistoryStep is one committed step of an instance, as the step history
// recorded it.
type HistoryStep struct {
	// Version is the step counter the step committed.
	Version     int64
	CommittedAt time.Time
	// Cause is what advanced the instance (StepCause.Kind) and Detail what
	// it carried.
	Cause  string
	Detail string
	// Owner held the claim the step committed under.
	Owner string
	// MessageID is the relay the step applied, if any.
	MessageID *string
	// Bounces counts the claim refusals the resume met before it applied,
	// when it counts them.
	Bounces *int
	// Passed are the ids of the elements and flows the step's tokens
	// passed, in order (at most engine.MaxPassed); PassedCut says it passed more.
	Passed    []string
	PassedCut bool
}

// StepHistory reads up to limit steps of instance id, newest first, those
// before step counter before (0: from the newest). It reads by the primary
// key whatever the table holds.
func (s *Store) StepHistory(ctx context.Context, id string, before int64, limit int) ([]HistoryStep, error) {
	if before <= 0 {
		before = 1<<63 - 1
	}
	rows, err := s.pool.Query(ctx, `SELECT version, committed_at, cause, detail, owner, message_id, bounces, coalesce(passed, '{}'), passed_cut FROM step_history
		WHERE instance_id = $1 AND version < $2 ORDER BY version DESC LIMIT $3`, id, before, limit)
	if err != nil {
		return nil, translate(err, "reading the history of "+id)
	}
	steps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (HistoryStep, error) {
		var h HistoryStep
		err := r.Scan(&h.Version, &h.CommittedAt, &h.Cause, &h.Detail, &h.Owner, &h.MessageID, &h.Bounces, &h.Passed, &h.PassedCut)
		return h, err
	})
	return steps, translate(err, "reading the history of "+id)
}

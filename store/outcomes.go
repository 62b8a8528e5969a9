package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
)

// newOutcomeGroup is the group commit of task outcomes (RecordOutcome):
// concurrent outcomes share one statement and one WAL flush, one per task
// a statement.
func (s *Store) newOutcomeGroup() *group[TaskReport, *Recorded] {
	return &group[TaskReport, *Recorded]{
		keys: func(o TaskReport) []string { return []string{strconv.FormatInt(o.TaskID, 10)} },
		run:  s.recordOutcomes,
	}
}

// recordOutcomes records calls' outcomes (one per task) in one statement
// and sets what each recorded; a call it leaves unrecorded was fenced off.
func (s *Store) recordOutcomes(ctx context.Context, calls []*groupCall[TaskReport, *Recorded]) error {
	n := len(calls)
	ids, workers, kinds, vars, codes := make([]int64, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	msgs, details := make([]*string, n), make([]*string, n)
	retries, retryMS := make([]int32, n), make([]int64, n)
	human, users, override, prefixes := make([]bool, n), make([]string, n), make([]bool, n), make([]string, n)
	byTask := make(map[int64]*groupCall[TaskReport, *Recorded], n)
	for i, c := range calls {
		o := c.in
		byTask[o.TaskID] = c
		v := []byte("{}")
		if o.Variables != nil {
			var err error
			if v, err = json.Marshal(o.Variables); err != nil {
				return fmt.Errorf("task %d: its variables: %w", o.TaskID, err)
			}
		}
		if o.ErrorMessage != "" {
			msgs[i] = &o.ErrorMessage
		}
		if o.ErrorDetails != "" {
			details[i] = &o.ErrorDetails
		}
		ids[i], workers[i], kinds[i], vars[i], codes[i] = o.TaskID, o.Worker, o.Kind, string(v), o.ErrorCode
		retries[i], retryMS[i] = int32(o.Retries), o.RetryTimeout.Milliseconds()
		human[i], users[i], override[i], prefixes[i] = o.Human, o.User, o.Override, o.HolderPrefix
	}
	rows, err := s.pool.Query(ctx, recordOutcomesSQL, ids, workers, kinds, vars, codes, msgs, details,
		retries, retryMS, human, users, override, prefixes, taskRelayRoutingKey)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		// The relay's message name is the task's topic.
		rec := &Recorded{}
		r := &rec.Relay
		if err := rows.Scan(&rec.Topic, &r.ID, &r.InstanceID, &r.RoutingKey, &r.Body); err != nil {
			return err
		}
		if c := byTask[jobOfRelay(r.ID)]; c != nil {
			c.out = rec
		}
	}
	return rows.Err()
}

package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sutra-run/worker/engine"
)

// UserTaskFilter narrows a user task list; After is the cursor (an id).
type UserTaskFilter struct {
	Assignee       string
	CandidateGroup string
	CandidateUser  string
	State          string
	// Assigned, when set, keeps the tasks with (true) or without (false)
	// an assignee.
	Assigned *bool
	// InstanceID, when set, keeps the tasks of that instance.
	InstanceID string
	Limit      int
	After      int64
}

// userTaskState is a user task's state: created (open), assigning (an
// assignment waits for its assigning listeners), updating (an update waits
// for its updating listeners) or completing (a completion is recorded and
// not yet applied).
const userTaskState = `CASE WHEN t.outcome IS NULL THEN 'created' WHEN t.outcome = 'assign' THEN 'assigning'
	WHEN t.outcome = 'update' THEN 'updating' ELSE 'completing' END`

const userTaskSelect = `
SELECT t.id, t.instance_id, t.element_id, i.definition_key, i.definition_version, t.assignee,
       t.candidate_groups, t.candidate_users, t.form_key, t.form_id, t.due_date, t.follow_up_date, t.priority,
       i.variables || t.variables, ` + userTaskState + `, t.created_at
  FROM tasks t JOIN instances i ON i.id = t.instance_id`

// UserTask is one user task as its instance's variables and its own
// show it. Its id is its Zeebe key too.
type UserTask struct {
	ID                int64
	InstanceID        string
	Element           string
	DefinitionKey     string
	DefinitionVersion int
	Assignee          *string
	CandidateGroups   []string
	CandidateUsers    []string
	FormKey           *string
	FormID            *string
	DueDate           *string
	FollowUpDate      *string
	Priority          int
	Variables         map[string]any
	// State is created, assigning, updating or completing (userTaskState).
	State     string
	CreatedAt time.Time
}

func scanUserTask(r pgx.CollectableRow) (UserTask, error) {
	var u UserTask
	err := r.Scan(&u.ID, &u.InstanceID, &u.Element, &u.DefinitionKey, &u.DefinitionVersion, &u.Assignee,
		&u.CandidateGroups, &u.CandidateUsers, &u.FormKey, &u.FormID, &u.DueDate, &u.FollowUpDate, &u.Priority,
		&u.Variables, &u.State, &u.CreatedAt)
	return u, err
}

// ListUserTasks pages through user tasks by id.
func (s *Store) ListUserTasks(ctx context.Context, f UserTaskFilter) ([]UserTask, error) {
	rows, err := s.pool.Query(ctx, userTaskSelect+`
		 WHERE t.user_task AND t.id > $1
		   AND ($2 = '' OR t.assignee = $2)
		   AND ($3 = '' OR $3 = ANY (t.candidate_groups))
		   AND ($4 = '' OR $4 = ANY (t.candidate_users))
		   AND ($5 = '' OR $5 = `+userTaskState+`)
		   AND ($7::boolean IS NULL OR $7 = (t.assignee IS NOT NULL))
		   AND ($8 = '' OR t.instance_id = $8)
		 ORDER BY t.id LIMIT $6`, f.After, f.Assignee, f.CandidateGroup, f.CandidateUser, f.State, f.Limit, f.Assigned, f.InstanceID)
	if err != nil {
		return nil, translate(err, "listing user tasks")
	}
	out, err := pgx.CollectRows(rows, scanUserTask)
	return out, translate(err, "listing user tasks")
}

// UserTaskByID reads one user task. ErrNotFound when there is none.
func (s *Store) UserTaskByID(ctx context.Context, id int64) (UserTask, error) {
	rows, err := s.pool.Query(ctx, userTaskSelect+` WHERE t.user_task AND t.id = $1`, id)
	if err != nil {
		return UserTask{}, translate(err, "reading user task")
	}
	u, err := pgx.CollectExactlyOneRow(rows, scanUserTask)
	return u, translate(err, fmt.Sprintf("reading user task %d", id))
}

// AssignUserTask sets (or, nil, clears) the assignee of an open user task.
func (s *Store) AssignUserTask(ctx context.Context, id int64, assignee *string) error {
	tag, err := s.pool.Exec(ctx, `UPDATE tasks SET assignee = $2 WHERE id = $1 AND user_task AND outcome IS NULL`, id, assignee)
	if err != nil {
		return translate(err, fmt.Sprintf("assigning user task %d", id))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("user task %d: %w", id, ErrNotFound)
	}
	return nil
}

// userTaskChangesSet sets the fields an engine.UserTaskChanges names,
// bound in its field order from $n on (userTaskChangesArgs): NULL leaves a
// field as it is, an empty date clears it.
func userTaskChangesSet(n int) string {
	return fmt.Sprintf(`candidate_groups = COALESCE($%[1]d::text[], candidate_groups),
	candidate_users = COALESCE($%[2]d::text[], candidate_users),
	due_date = CASE WHEN $%[3]d::text IS NULL THEN due_date ELSE NULLIF($%[3]d::text, '') END,
	follow_up_date = CASE WHEN $%[4]d::text IS NULL THEN follow_up_date ELSE NULLIF($%[4]d::text, '') END,
	priority = COALESCE($%[5]d::int, priority)`, n, n+1, n+2, n+3, n+4)
}

func userTaskChangesArgs(c engine.UserTaskChanges) []any {
	return []any{c.CandidateGroups, c.CandidateUsers, c.DueDate, c.FollowUpDate, c.Priority}
}

// UpdateUserTask applies c to an open user task (one with no updating
// listeners: an update through them is an outcome, TaskUpdate).
// ErrNotFound when there is none, or it is assigning, updating or
// completing.
func (s *Store) UpdateUserTask(ctx context.Context, id int64, c engine.UserTaskChanges) error {
	tag, err := s.pool.Exec(ctx, `UPDATE tasks SET `+userTaskChangesSet(2)+`
		WHERE id = $1 AND user_task AND outcome IS NULL`, append([]any{id}, userTaskChangesArgs(c)...)...)
	if err != nil {
		return translate(err, fmt.Sprintf("updating user task %d", id))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("user task %d: %w", id, ErrNotFound)
	}
	return nil
}

// NotAssigneeError refuses the completion of a user task by anyone but its
// assignee (fault.TaskNotAssignee).
type NotAssigneeError struct {
	TaskID   int64
	Assignee string
}

func (e *NotAssigneeError) Error() string {
	return fmt.Sprintf("user task %d is assigned to %s: only its assignee completes it", e.TaskID, e.Assignee)
}

// whyNotCompleted tells a user task that is missing or completing already
// (ErrNotFound) from one assigned to someone else (*NotAssigneeError).
func (s *Store) whyNotCompleted(ctx context.Context, id int64) error {
	var assignee *string
	err := s.pool.QueryRow(ctx, `SELECT assignee FROM tasks WHERE id = $1 AND user_task AND outcome IS NULL`, id).Scan(&assignee)
	switch {
	case errors.Is(err, pgx.ErrNoRows), err == nil && assignee == nil:
		return fmt.Errorf("user task %d: %w", id, ErrNotFound)
	case err != nil:
		return translate(err, fmt.Sprintf("looking up user task %d", id))
	}
	return &NotAssigneeError{TaskID: id, Assignee: *assignee}
}

package store

import (
	"context"
	"time"
)

// InstanceTimes is when an instance was created and last changed, and
// whether it has an open incident: what a search shows of one instance
// beside its keys.
type InstanceTimes struct {
	CreatedAt, UpdatedAt time.Time
	HasIncident          bool
}

// InstanceTimesOf reads instance id's times. ErrNotFound when there is
// none.
func (s *Store) InstanceTimesOf(ctx context.Context, id string) (InstanceTimes, error) {
	var t InstanceTimes
	err := s.pool.QueryRow(ctx, `SELECT i.created_at, i.updated_at, `+openIncidentSQL+`
		  FROM instances i WHERE i.id = $1 AND i.version > 0`, id).Scan(&t.CreatedAt, &t.UpdatedAt, &t.HasIncident)
	return t, translate(err, "reading an instance's times")
}

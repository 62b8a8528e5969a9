package store

import (
	"context"
	"io/fs"
)

// MigrateWith migrates with the migrations of extra (under migrations/)
// beside the embedded ones.
func (s *Store) MigrateWith(ctx context.Context, extra fs.FS) error { return s.migrate(ctx, extra) }

//go:build upgradetest

package store

import (
	"embed"
	"io/fs"
)

// The upgrade test (make test-upgrade) builds the worker with a contract
// step of its own, to prove that the step waits for the last replica of
// the release before to leave.
//
//go:embed testdata/upgradetest/migrations/*.sql
var upgradeTestMigrations embed.FS

func init() {
	sub, err := fs.Sub(upgradeTestMigrations, "testdata/upgradetest")
	if err != nil {
		panic(err)
	}
	extraMigrations = sub
}

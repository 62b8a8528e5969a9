// Package upgrade holds the rolling-upgrade test (make test-upgrade): three
// replicas of the previous release (RELEASES) under continuous load are
// replaced one by one by the current build, old and new side by side, and
// every order must close exactly once with nothing dead-lettered and the
// relays flowing throughout; a second run adds a contract migration, which
// must wait for the last old replica to leave.
//
// The test builds binaries and runs for a minute or two, so it sits behind
// the build tag upgrade and plain `go test ./...` does not run it:
//
//	go test -tags upgrade -count=1 -v ./tools/upgrade
package upgrade

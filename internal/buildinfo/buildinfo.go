// Package buildinfo says which build of the worker runs: the module version
// and VCS revision Go records in the binary, and the Go version.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// version and revision are set at link time where the build has no VCS
// data to record (a container build without .git):
//
//	-ldflags '-X github.com/sutra-run/worker/internal/buildinfo.version=v1.2.0
//	          -X github.com/sutra-run/worker/internal/buildinfo.revision=0123abcd'
var version, revision string

// Info describes the running build.
type Info struct {
	Version   string
	Revision  string
	GoVersion string
}

// Read returns the running build's info; unknown parts are "unknown" (a
// binary built from a source tree without its VCS data).
func Read() Info {
	in := Info{Version: "unknown", Revision: "unknown", GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return in
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		in.Version = v
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && s.Value != "" {
			in.Revision = s.Value
		}
	}
	if version != "" {
		in.Version = version
	}
	if revision != "" {
		in.Revision = revision
	}
	if len(in.Revision) > 12 {
		in.Revision = in.Revision[:12]
	}
	return in
}

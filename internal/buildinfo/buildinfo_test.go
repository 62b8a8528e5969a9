package buildinfo

import "testing"

// A container build has no VCS data; the link-time values stand in.
func TestLinkTimeVersionAndRevisionAreReported(t *testing.T) {
	version, revision = "v1.2.0", "0123456789abcdef0123"
	defer func() { version, revision = "", "" }()
	in := Read()
	if in.Version != "v1.2.0" || in.Revision != "0123456789ab" || in.GoVersion == "" {
		t.Fatalf("Read() = %+v, want the link-time version and the revision cut to 12", in)
	}
}

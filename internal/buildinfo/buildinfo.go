// Package buildinfo is edgepipe's version: the one -ldflags set, else the
// module version `go install` recorded, with the VCS revision for people.
package buildinfo

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// Version is edgepipe's version: set at build time with -ldflags, else the
// module version a `go install` recorded, else 0.1.0-dev. It enters
// manifests, locks and publish keys, so it does not carry the commit;
// VersionString adds that for people.
var Version = func() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return strings.TrimPrefix(bi.Main.Version, "v")
	}
	return "0.1.0-dev"
}()

// String is the version with the VCS revision the binary was built
// from, when the build recorded one.
func String() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Version
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = ", modified"
			}
		}
	}
	if rev == "" {
		return Version + " (" + bi.GoVersion + ")"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	return fmt.Sprintf("%s (%s%s, %s)", Version, rev, dirty, bi.GoVersion)
}

//go:build !linux && !darwin

package digest

import "io/fs"

// identityOf reports no identity where we do not know how to read the inode
// and ctime: without them a memo hit could be wrong, so every lookup rehashes.
func identityOf(fs.FileInfo) (fileIdentity, bool) { return fileIdentity{}, false }

package toolchain

import (
	"io/fs"
	"path/filepath"
	"syscall"
)

// fileID is a file whatever path reaches it: uv hard-links the same wheel
// files into every Python environment from its cache, so a path count
// would add torch's gigabytes once per toolchain.
type fileID struct{ dev, ino uint64 }

// DiskUsage is what a set of folders holds on disk, hard links counted
// once.
type DiskUsage struct {
	// Bytes per folder: each file once, however many of its paths the
	// folder holds.
	Bytes map[string]int64
	// Own per folder: the bytes of files no path outside the folder
	// reaches, which is what removing it frees.
	Own map[string]int64
	// Total is the distinct files of all the folders.
	Total int64
}

// MeasureDisk walks dirs (unreadable entries are left out: sizes are an
// estimate for a listing, never a reason to fail it).
func MeasureDisk(dirs ...string) DiskUsage {
	u := DiskUsage{Bytes: map[string]int64{}, Own: map[string]int64{}}
	counted := map[fileID]bool{}
	for _, dir := range dirs {
		links := newLinkTally()
		eachFile(dir, func(size int64, id fileID, nlink uint64, linked bool) {
			if links.add(size, id, nlink, linked) {
				u.Bytes[dir] += size
			}
			if !linked || !counted[id] {
				counted[id] = linked
				u.Total += size
			}
		})
		u.Own[dir] = links.freed()
	}
	return u
}

// linkTally counts the paths of each file met, to tell the files every
// link of which was met (removing the paths frees them) from the ones a
// path elsewhere keeps.
type linkTally struct {
	seen     map[fileID]uint64
	sizes    map[fileID]int64
	links    map[fileID]uint64
	unlinked int64 // files without an inode to tell links apart: each path counts
}

func newLinkTally() *linkTally {
	return &linkTally{seen: map[fileID]uint64{}, sizes: map[fileID]int64{}, links: map[fileID]uint64{}}
}

// add records one path; it reports whether the file was new to the tally.
func (t *linkTally) add(size int64, id fileID, nlink uint64, linked bool) bool {
	if !linked {
		t.unlinked += size
		return true
	}
	t.seen[id]++
	t.sizes[id], t.links[id] = size, nlink
	return t.seen[id] == 1
}

// freed is the bytes of the files all of whose links were met.
func (t *linkTally) freed() int64 {
	freed := t.unlinked
	for id, n := range t.seen {
		if n >= t.links[id] {
			freed += t.sizes[id]
		}
	}
	return freed
}

// eachFile calls fn for each regular file under dir, with its identity
// and link count when the platform has them (linked); unreadable entries
// are left out.
func eachFile(dir string, fn func(size int64, id fileID, nlink uint64, linked bool)) {
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		id, nlink, ok := statID(fi)
		fn(fi.Size(), id, nlink, ok)
		return nil
	})
}

func statID(fi fs.FileInfo) (fileID, uint64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, 0, false
	}
	return fileID{dev: uint64(st.Dev), ino: uint64(st.Ino)}, uint64(st.Nlink), true //nolint:unconvert // the types differ by platform
}

// FreedBy is what removing all of dirs together frees: each file once,
// and only the files whose every link is in them (a toolchain's wheel
// files stay on disk while the uv cache or another toolchain links them).
func FreedBy(dirs ...string) int64 {
	links := newLinkTally()
	for _, dir := range dirs {
		eachFile(dir, func(size int64, id fileID, nlink uint64, linked bool) { links.add(size, id, nlink, linked) })
	}
	return links.freed()
}

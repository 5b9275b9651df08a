// Package cachegc removes what edgepipe keeps beside the step cache and
// was not used for a while: toolchain installs, pinned downloads, the
// built-in models, step logs and the uv download cache. The step cache's
// own entries are cache.GC's; `cache gc` runs both, so one command
// covers every area of CACHE.
package cachegc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/edgepipe/edgepipe/internal/cache"
	"github.com/edgepipe/edgepipe/internal/report"
	"github.com/edgepipe/edgepipe/internal/toolchain"
)

// Item is one thing gc removes (or, in a dry run, would remove).
type Item struct {
	Area     string // toolchains, downloads, models, logs, uv
	Path     string
	Size     int64
	LastUsed time.Time
}

// Old lists what under cacheDir was last used before cutoff: toolchain
// folders by their last use (and with stale, folders no current lock
// names, whatever their age), pinned downloads
// and built-in models by modification time (edgepipe touches them on
// reuse), and logs. The uv cache goes when no toolchain install was used
// since cutoff, as a whole: uv links environments from it, so removing it
// frees space without breaking an installed environment.
func Old(cacheDir string, cutoff time.Time, stale bool) ([]Item, error) {
	var out []Item
	folders, err := toolchain.Folders(cacheDir)
	if err != nil {
		return nil, err
	}
	var newestToolchain time.Time
	for _, f := range folders {
		if f.LastUsed.After(newestToolchain) && f.Current {
			newestToolchain = f.LastUsed
		}
		if f.Name == "logs" {
			continue
		}
		if f.LastUsed.Before(cutoff) || (stale && !f.Current) {
			out = append(out, Item{Area: "toolchains", Path: f.Dir, Size: f.Size, LastUsed: f.LastUsed})
		}
	}
	for _, area := range []struct{ name, dir string }{
		{"downloads", "downloads"},
		{"models", filepath.Join("models", "builtin")},
		{"logs", "logs"},
		{"logs", filepath.Join("toolchains", "logs")},
	} {
		ents, err := os.ReadDir(filepath.Join(cacheDir, area.dir))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			p := filepath.Join(cacheDir, area.dir, e.Name())
			fi, err := os.Lstat(p)
			if err != nil || !fi.ModTime().Before(cutoff) {
				continue
			}
			out = append(out, Item{Area: area.name, Path: p, Size: toolchain.DirSize(p), LastUsed: fi.ModTime()})
		}
	}
	uv := filepath.Join(cacheDir, "uv")
	if fi, err := os.Stat(uv); err == nil && newestToolchain.Before(cutoff) {
		out = append(out, Item{Area: "uv", Path: uv, Size: toolchain.DirSize(uv), LastUsed: fi.ModTime()})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Area < out[j].Area })
	return out, nil
}

// Remove deletes an item; a toolchain folder under its install lock.
func Remove(cacheDir string, it Item) error {
	if it.Area == "toolchains" {
		folders, err := toolchain.Folders(cacheDir)
		if err != nil {
			return err
		}
		for _, f := range folders {
			if f.Dir == it.Path {
				return toolchain.RemoveFolder(cacheDir, f)
			}
		}
		return nil
	}
	return os.RemoveAll(it.Path)
}

// GC removes incomplete entries and, with olderThan, whatever in
// every area of the cache was last used longer ago than that.
func GC(ctx context.Context, w io.Writer, ca *cache.Cache, olderThan time.Duration, dryRun bool) error {
	cutoff := time.Now().Add(-olderThan)
	keep := func(e cache.Entry) bool { return olderThan == 0 || e.LastUsed.After(cutoff) }
	var others []Item
	if olderThan > 0 {
		var err error
		if others, err = Old(ca.Root(), cutoff, false); err != nil {
			return err
		}
	}
	var removed int
	var freed int64
	// Measured before anything goes: the files a toolchain shares with
	// the uv cache or another toolchain are freed only with the last link.
	paths := make([]string, len(others))
	for i, it := range others {
		paths[i] = it.Path
	}
	othersFreed := toolchain.FreedBy(paths...)
	if dryRun {
		doomed, bytes, err := ca.GCDryRun(ctx, keep)
		if err != nil {
			return err
		}
		for _, e := range doomed {
			fmt.Fprintf(w, "would remove entry %s (%s, last used %s)\n", e.Key[:12], e.StepID, e.LastUsed.Local().Format(time.DateTime))
		}
		removed, freed = len(doomed), bytes
	} else {
		n, b, err := ca.GC(ctx, keep)
		if err != nil {
			return err
		}
		removed, freed = n, b
	}
	for _, it := range others {
		if dryRun {
			fmt.Fprintf(w, "would remove %s %s (%s, last used %s)\n", it.Area, it.Path, report.HumanBytes(it.Size), it.LastUsed.Local().Format(time.DateTime))
		} else if err := Remove(ca.Root(), it); err != nil {
			return fmt.Errorf("cache gc: %w", err)
		}
		removed++
	}
	freed += othersFreed
	if dryRun {
		fmt.Fprintf(w, "would remove %d entries and folders, freeing %s\n", removed, report.HumanBytes(freed))
		return nil
	}
	fmt.Fprintf(w, "removed %d entries and folders, freed %s\n", removed, report.HumanBytes(freed))
	return nil
}

// RemoveFolders removes toolchain folders (toolchain remove and prune), or
// in a dry run says what it would remove; then the space freed.
func RemoveFolders(w io.Writer, cacheDir string, doomed []toolchain.Folder, dryRun bool) error {
	var freed int64
	for _, f := range doomed {
		if dryRun {
			fmt.Fprintf(w, "would remove %s (%s)\n", f.Dir, report.HumanBytes(f.Size))
		} else {
			if err := toolchain.RemoveFolder(cacheDir, f); err != nil {
				return err
			}
			fmt.Fprintf(w, "removed %s (%s)\n", f.Dir, report.HumanBytes(f.Size))
		}
		freed += f.Size
	}
	if dryRun {
		fmt.Fprintf(w, "would free %s\n", report.HumanBytes(freed))
	} else {
		fmt.Fprintf(w, "freed %s\n", report.HumanBytes(freed))
	}
	return nil
}

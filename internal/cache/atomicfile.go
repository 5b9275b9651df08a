package cache

import (
	"fmt"
	"os"
	"path/filepath"
)

// writeFileAtomic replaces path with data so that readers, concurrent
// writers and a crash at any moment see either the old or the new content.
// The temp name carries our pid so GC can tell a dead writer's leftovers
// from a live one's.
func writeFileAtomic(path string, data []byte, perm os.FileMode) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, fmt.Sprintf(".%s.tmp-%d-*", filepath.Base(path), os.Getpid()))
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Chmod(perm); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(dir)
}

// syncDir makes a rename, create or remove inside dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

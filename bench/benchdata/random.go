// Package benchdata writes the benchmarks' test data.
package benchdata

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
)

// WriteRandom writes size pseudo-random bytes: real data on disk, not a
// sparse file, so that whoever reads it pays for every byte. It syncs the
// file, so writeback of setup data does not run during the timed runs.
func WriteRandom(ctx context.Context, path string, size int64, seed uint64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	var s [32]byte
	for i := range 8 {
		s[i] = byte(seed >> (8 * i))
	}
	r := rand.NewChaCha8(s)
	buf := make([]byte, 4<<20)
	w := bufio.NewWriterSize(f, len(buf))
	for left := size; left > 0; left -= int64(len(buf)) {
		if err := ctx.Err(); err != nil {
			f.Close()
			return err
		}
		b := buf[:min(left, int64(len(buf)))]
		_, _ = r.Read(b) // never fails
		if _, err := w.Write(b); err != nil {
			f.Close()
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

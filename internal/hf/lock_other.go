//go:build !unix

package hf

import "context"

// lockFile is a no-op where flock does not exist; downloads still land
// atomically by rename, two processes may just fetch the same blob twice.
func lockFile(ctx context.Context, path string) (func(), error) {
	return func() {}, ctx.Err()
}

package remotecache

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"

	"github.com/edgepipe/edgepipe/internal/provenance"
)

// Environment variables behind the flags.
const (
	EnvURL       = "EDGEPIPE_REMOTE_CACHE"
	EnvMode      = "EDGEPIPE_REMOTE_CACHE_MODE"
	EnvVerifyKey = "EDGEPIPE_REMOTE_CACHE_VERIFY_KEY"
)

// Flags are the remote-cache options of run, plan and step run.
type Flags struct {
	URL, Mode, VerifyKey string
	// ConnectTimeout and Timeout are the environment's
	// EDGEPIPE_REMOTE_CACHE_CONNECT_TIMEOUT and EDGEPIPE_REMOTE_CACHE_TIMEOUT.
	ConnectTimeout, Timeout string
}

// Register adds --remote-cache, --remote-cache-mode and
// --remote-cache-verify-key, defaulting to their environment variables.
func (f *Flags) Register(fs *pflag.FlagSet, getenv func(string) string) {
	fs.StringVar(&f.URL, "remote-cache", getenv(EnvURL), "share step outputs with other machines through this S3-compatible store (`URL`: s3::https://HOST/BUCKET/PREFIX; env "+EnvURL+"; credentials from the AWS SDK's usual chain, never in the URL)")
	fs.StringVar(&f.Mode, "remote-cache-mode", getenv(EnvMode), "read, write or readwrite (env "+EnvMode+"; default readwrite): CI writes, laptops and pull requests read")
	fs.StringVar(&f.VerifyKey, "remote-cache-verify-key", getenv(EnvVerifyKey), "use only remote records signed by this public key (`PUB.pem`; writers sign with --sign-key; env "+EnvVerifyKey+")")
	f.ConnectTimeout, f.Timeout = getenv(EnvConnectTimeout), getenv(EnvTimeout)
}

// Open opens the store the flags name, or returns nil when there is none.
// signer (--sign-key) signs the records this run writes.
func (f *Flags) Open(ctx context.Context, signer *provenance.Signer, version string) (*Store, error) {
	if f.URL == "" {
		return nil, nil
	}
	mode, err := ParseMode(f.Mode)
	if err != nil {
		return nil, err
	}
	opt := Options{Mode: mode, Signer: signer, Version: version}
	env := map[string]string{EnvConnectTimeout: f.ConnectTimeout, EnvTimeout: f.Timeout}
	if opt.Timeouts, err = ParseTimeouts(func(k string) string { return env[k] }); err != nil {
		return nil, err
	}
	if f.VerifyKey != "" {
		b, err := os.ReadFile(f.VerifyKey)
		if err != nil {
			return nil, fmt.Errorf("--remote-cache-verify-key: %w", err)
		}
		if opt.VerifyKey, err = provenance.ParsePublicKey(b); err != nil {
			return nil, fmt.Errorf("--remote-cache-verify-key %s: %w", f.VerifyKey, err)
		}
	}
	return Open(ctx, f.URL, opt)
}

// Summary writes one line of what the store did in this run.
func (s *Store) Summary(w io.Writer) {
	st := &s.Stats
	down := ""
	if s.down() {
		down = fmt.Sprintf("; unreachable (%d failures in a row), not used after that", maxFailures)
	}
	fmt.Fprintf(w, "remote cache %s (%s): %d hits, %d misses, %d rejected; downloaded %d objects (%d bytes), uploaded %d objects (%d bytes), %d records%s\n",
		s.URL, s.opt.Mode, st.Hits.Load(), st.Misses.Load(), st.Rejected.Load(), st.ObjectsDown.Load(), st.BytesDown.Load(),
		st.ObjectsUp.Load(), st.BytesUp.Load(), st.RecordsUp.Load(), down)
}

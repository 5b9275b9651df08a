package cli

import (
	"context"
	"crypto"
	"fmt"
	"strings"

	"github.com/edgepipe/edgepipe/internal/provenance"
	"github.com/edgepipe/edgepipe/internal/remote"
	"github.com/spf13/pflag"
)

// cmdPull downloads an artifact that run pushed to a registry and checks it
// the way verify checks a local folder: every file against the pulled
// manifest (as it downloads), and the provenance against the files.
func cmdPull(env *Env, fs *pflag.FlagSet) runFunc {
	keyPath := fs.String("key", "", "check the provenance signature with this public key (`PUB.pem`); an artifact not signed by it fails")
	insecure := fs.Bool("insecure", false, "allow plain HTTP to a registry that is not on localhost")
	return func(ctx context.Context, pos []string) error {
		if len(pos) != 2 || !strings.HasPrefix(pos[0], "oci://") {
			return usageErr("pull takes an oci:// reference and a folder, e.g. edgepipe pull oci://localhost:5000/edgepipe/demo:q4_k_m pulled/q4_k_m")
		}
		var pub crypto.PublicKey
		var err error
		if *keyPath != "" {
			if pub, err = loadPublicKey(*keyPath); err != nil {
				return err
			}
		}
		// The provenance (and signature) is checked on the staged download,
		// before it may replace anything at the destination.
		var prov *provenance.Result
		accept := func(staging string) error {
			if prov, err = provenance.Check(staging, pub); err != nil {
				return err
			}
			if len(prov.Problems) > 0 {
				for _, p := range prov.Problems {
					fmt.Fprintf(env.Stdout, "%s: %s\n", pos[1], p)
				}
				return fmt.Errorf("its provenance does not check out")
			}
			return nil
		}
		where, err := remote.PullOCI(ctx, pos[0], pos[1], *insecure, accept)
		if err != nil {
			return &ExitError{Code: ExitStepFailed, Err: err}
		}
		fmt.Fprintf(env.Stdout, "%s: pulled %s; ok; %s\n", pos[1], where, provenanceSummary(prov))
		return nil
	}
}

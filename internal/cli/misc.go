package cli

import (
	"context"
	"crypto"
	"encoding/json"
	"fmt"
	"github.com/edgepipe/edgepipe/internal/cachegc"
	"github.com/edgepipe/edgepipe/internal/schema"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/edgepipe/edgepipe/internal/catalog"
	"github.com/edgepipe/edgepipe/internal/manifest"
	"github.com/edgepipe/edgepipe/internal/provenance"
	"github.com/edgepipe/edgepipe/internal/report"
	"github.com/spf13/pflag"
)

func cmdVersion(env *Env, fs *pflag.FlagSet) runFunc {
	asJSON := fs.Bool("json", false, "print JSON: the version, the build it came from, the Go it was built with")
	return func(_ context.Context, pos []string) error {
		if len(pos) > 0 {
			return usageErr("version takes no arguments")
		}
		if *asJSON {
			return writeJSON(env.Stdout, struct {
				Version string `json:"version"`
				Build   string `json:"build"`
				Go      string `json:"go"`
			}{Version, VersionString(), runtime.Version()})
		}
		fmt.Fprintf(env.Stdout, "edgepipe %s\n", VersionString())
		return nil
	}
}

// verifyJSON is one folder of `verify --json`.
type verifyJSON struct {
	Dir        string   `json:"dir"`
	OK         bool     `json:"ok"`
	Provenance string   `json:"provenance,omitempty"`
	Problems   []string `json:"problems,omitempty"`
}

func cmdVerify(env *Env, fs *pflag.FlagSet) runFunc {
	keyPath := fs.String("key", "", "check the provenance signature with this public key (`PUB.pem`); a folder that is not signed by it fails")
	asJSON := fs.Bool("json", false, "print JSON: each folder with ok, its provenance and its problems")
	return func(ctx context.Context, pos []string) error {
		if len(pos) == 0 {
			return usageErr("verify takes the published folder(s) to check, e.g. edgepipe verify artifacts/demo/laptop-q4km")
		}
		var pub crypto.PublicKey
		var err error
		if *keyPath != "" {
			if pub, err = loadPublicKey(*keyPath); err != nil {
				return err
			}
		}
		bad := 0
		var results []verifyJSON
		for _, dir := range pos {
			problems, err := manifest.VerifyContext(ctx, dir)
			if err != nil {
				return &ExitError{Code: ExitStepFailed, Err: fmt.Errorf("verify %s: %w", dir, err)}
			}
			prov, err := provenance.Check(dir, pub)
			if err != nil {
				return &ExitError{Code: ExitStepFailed, Err: fmt.Errorf("verify %s: %w", dir, err)}
			}
			ok := len(problems) == 0 && len(prov.Problems) == 0
			if *asJSON {
				all := make([]string, 0, len(problems)+len(prov.Problems))
				for _, p := range problems {
					all = append(all, p.String())
				}
				results = append(results, verifyJSON{Dir: dir, OK: ok, Provenance: provenanceSummary(prov), Problems: append(all, prov.Problems...)})
				if !ok {
					bad++
				}
				continue
			}
			if ok {
				fmt.Fprintf(env.Stdout, "%s: ok; %s\n", dir, provenanceSummary(prov))
				continue
			}
			bad++
			for _, p := range problems {
				fmt.Fprintf(env.Stdout, "%s: %s\n", dir, p)
			}
			for _, p := range prov.Problems {
				fmt.Fprintf(env.Stdout, "%s: %s\n", dir, p)
			}
		}
		if *asJSON {
			if err := writeJSON(env.Stdout, results); err != nil {
				return err
			}
		}
		if bad > 0 {
			return &ExitError{Code: ExitStepFailed, Err: fmt.Errorf("%d folder(s) differ from their manifest or provenance", bad)}
		}
		return nil
	}
}

func cmdCache(env *Env, fs *pflag.FlagSet) runFunc {
	var c common
	c.register(fs, env, false)
	olderThan := fs.Duration("older-than", 0, "gc: also remove what was not used for this long (e.g. 720h): step entries, toolchains, downloads, built-in models, logs, the uv cache; 0 keeps every complete entry")
	dryRun := fs.Bool("dry-run", false, "gc: list what would be removed and the space it would free; remove nothing")
	return func(ctx context.Context, pos []string) error {
		if len(pos) != 1 || (pos[0] != "ls" && pos[0] != "gc") {
			return subcommandErr("cache", pos, []string{"ls", "gc"}, "usage: edgepipe cache ls | edgepipe cache gc")
		}
		if c.json && pos[0] == "gc" {
			return noJSON("cache gc", "cache ls")
		}
		ca, err := c.openCache(env)
		if err != nil {
			return err
		}
		switch pos[0] {
		case "ls":
			ents, err := ca.List()
			if err != nil {
				return err
			}
			if c.json {
				enc := json.NewEncoder(env.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(ents)
			}
			tw := tabwriter.NewWriter(env.Stdout, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "KEY\tKIND\tSTEP\tSIZE\tCREATED\tLAST USED")
			var total int64
			for _, e := range ents {
				var size int64
				for _, f := range e.Tree.Files {
					size += f.Size
				}
				total += size
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", e.Key[:12], e.Kind, e.StepID, report.HumanBytes(size), e.Created.Local().Format(time.DateTime), e.LastUsed.Local().Format(time.DateTime))
			}
			tw.Flush()
			fmt.Fprintf(env.Stdout, "%d entries, %s in %s\n", len(ents), report.HumanBytes(total), ca.Root())
		case "gc":
			return cachegc.GC(ctx, env.Stdout, ca, *olderThan, *dryRun)
		}
		return nil
	}
}

// cmdSchema prints the recipe schema (what docs/recipe.schema.json holds).
func cmdSchema(env *Env, fs *pflag.FlagSet) runFunc {
	return func(ctx context.Context, _ []string) error {
		b, err := schema.Generate()
		if err != nil {
			return err
		}
		_, err = env.Stdout.Write(b)
		return err
	}
}

func cmdDevices(env *Env, fs *pflag.FlagSet) runFunc {
	asJSON := fs.Bool("json", false, "print the catalog as JSON")
	return func(ctx context.Context, _ []string) error {
		devs := catalog.Devices()
		if *asJSON {
			enc := json.NewEncoder(env.Stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(devs)
		}
		tw := tabwriter.NewWriter(env.Stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tBANDWIDTH GB/s\tMEMORY GB\tNPU TOPS\tOBSERVED\tFORMATS")
		for _, d := range devs {
			tops := "-"
			if d.NPUTOPS > 0 {
				tops = fmt.Sprint(d.NPUTOPS)
			}
			var formats []string
			for _, rt := range d.Runtimes {
				formats = append(formats, rt.Formats...)
			}
			// The first observation only; --json and `edgepipe ceiling` have all.
			observed := "-"
			if len(d.Observed) > 0 {
				observed = fmt.Sprintf("%g tok/s (%s)", d.Observed[0].TokS, d.Observed[0].Model)
			}
			fmt.Fprintf(tw, "%s\t%s\t%g\t%g\t%s\t%s\t%s\n", d.ID, d.Name, d.MemoryBandwidthGBs, d.MemoryGB, tops, observed, strings.Join(dedupe(formats), " "))
		}
		return tw.Flush()
	}
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

var _ = os.Stdout

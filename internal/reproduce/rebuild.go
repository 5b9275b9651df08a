package reproduce

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"github.com/edgepipe/edgepipe/pipelines/shared"
	"os"
	"path/filepath"
	"strings"

	"github.com/edgepipe/edgepipe/internal/boundedfile"
	"github.com/edgepipe/edgepipe/internal/cache"
	"github.com/edgepipe/edgepipe/internal/digest"
	"github.com/edgepipe/edgepipe/internal/engine"
	"github.com/edgepipe/edgepipe/internal/manifest"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/publish"
	"github.com/edgepipe/edgepipe/internal/tools"
	"github.com/edgepipe/edgepipe/steps"
)

// Rebuilding published folders: the orchestration `edgepipe reproduce`
// runs. It finds the recipe a folder was made from and checks it is the
// same bytes, pins the source to the recorded commit, refuses toolchains
// other than the recorded ones, runs every step the targets need in a
// scratch cache, and compares the rebuild with the folders.

// RefusedError is a rebuild refused before anything ran: the recipe, the
// folders or the toolchains are not what the artifacts were made from.
type RefusedError struct{ Err error }

func (e *RefusedError) Error() string { return e.Err.Error() }
func (e *RefusedError) Unwrap() error { return e.Err }

func refused(format string, args ...any) error {
	return &RefusedError{Err: fmt.Errorf(format, args...)}
}

// sharedCacheDirs are what a scratch cache borrows from the user's cache
// instead of making again: the installed toolchains (gigabytes, pinned by
// digest) and the pinned downloads they and the built-in models come from
// (checked by sha256). Step outputs and built-in models are made afresh.
var sharedCacheDirs = []string{"toolchains", "downloads", "uv"}

// Rebuild is one reproduction: published folders of one recipe and the
// engine options the rebuild runs with (its Cache and OutDir are the
// scratch folder's, set here).
type Rebuild struct {
	Dirs []string
	Pubs []*manifest.Manifest
	// Plan is the recipe expanded now.
	Plan *plan.Plan
	// UserRoot is the user's cache, whose toolchains and pinned downloads
	// the scratch cache borrows and whose step outputs the rebuild is
	// compared with.
	UserRoot string
	Scratch  string
	Options  engine.Options
	Version  string
	// Notes receives what the reproduction says before it runs.
	Notes func(string)
	// Setup is called with the engine before it runs (event callbacks),
	// and the number of steps it will run.
	Setup func(eng *engine.Engine, steps int)
}

// Run rebuilds the folders and compares them. A failed rebuild step
// returns the run's result and its error (the reports are nil).
func Run(ctx context.Context, rb Rebuild) ([]Report, *engine.RunResult, error) {
	pl := rb.Plan
	var targets []string
	for i, m := range rb.Pubs {
		if !hasTarget(pl, m.Target.Name, m.Target.Format) {
			return nil, nil, refused("%s is target %s (%s), which %s does not have now: the recipe's sha256 matches, so this edgepipe expands it differently; reproduce with edgepipe %s",
				rb.Dirs[i], m.Target.Name, m.Target.Format, pl.Recipe.Path, m.EdgepipeVersion)
		}
		targets = append(targets, m.Target.Name)
	}
	notes := pinRecordedSource(pl, rb.Pubs[0])
	if rb.Pubs[0].EdgepipeVersion != rb.Version {
		notes = append(notes, fmt.Sprintf("the artifact was made by edgepipe %s, this is %s: a step kind that changed since makes different bytes", rb.Pubs[0].EdgepipeVersion, rb.Version))
	}
	ca, err := scratchCache(filepath.Join(rb.Scratch, "cache"), rb.UserRoot)
	if err != nil {
		return nil, nil, err
	}
	only := closure(pl, targets)
	if err := sameToolchains(ctx, pl, only, rb.Options.Tools, rb.Pubs, rb.Dirs); err != nil {
		return nil, nil, err
	}
	opt := rb.Options
	opt.Cache, opt.OutDir, opt.Only = ca, filepath.Join(rb.Scratch, "out"), only
	opt.KeepGoing = true
	// The rebuild is compared, never released: it must not reach the
	// recipe's publish: remotes (it would overwrite the release tag).
	opt.NoPush = true
	eng := engine.NewEngine(pl, opt)
	if rb.Setup != nil {
		rb.Setup(eng, len(only))
	}
	if rb.Notes != nil {
		for _, n := range notes {
			rb.Notes(n)
		}
		rb.Notes("rebuilding in " + rb.Scratch)
	}
	res, runErr := eng.Run(ctx)
	if runErr != nil {
		if engine.IsInterrupted(runErr) {
			return nil, res, runErr
		}
		for _, e := range res.Failed {
			if !publish.IsGateFailure(e) {
				return nil, res, runErr
			}
		}
	}

	var reports []Report
	var sourceFiles []manifest.File
	if src := res.Outputs[plan.SourceStepID]; src != nil {
		sourceFiles = manifestFiles(src.ContentFiles())
	}
	userCache, _ := cache.Open(rb.UserRoot)
	for i, dir := range rb.Dirs {
		problems, err := manifest.VerifyContext(ctx, dir)
		if err != nil {
			return nil, res, fmt.Errorf("verify %s: %w", dir, err)
		}
		var rebuilt *manifest.Manifest
		if out, ok := res.Published[targets[i]]; ok {
			if rebuilt, err = manifest.Read(out); err != nil {
				return nil, res, err
			}
		}
		r := Compare(dir, rb.Pubs[i], problems, rebuilt, sourceFiles)
		if g := res.Gates[targets[i]]; rebuilt == nil && g != nil {
			r.RebuiltPerplexity(rb.Pubs[i], g.Baseline, g.Converted)
		}
		r.Steps = compareSteps(rb.Pubs[i], rebuilt, res, userCache, ca.Root(), rb.UserRoot)
		reports = append(reports, r)
	}
	return reports, res, nil
}

// RecipeOf finds the recipe the folders were made from and checks that it
// is byte for byte the one their manifests record.
func RecipeOf(dirs []string, pubs []*manifest.Manifest, override string) (string, error) {
	first := pubs[0].Recipe
	for i, m := range pubs[1:] {
		if m.Recipe.SHA256 != first.SHA256 || m.Recipe.Path != first.Path {
			return "", refused("%s and %s were made from different recipes (%s, %s): reproduce one recipe's folders at a time", dirs[0], dirs[i+1], first.Path, m.Recipe.Path)
		}
	}
	path := override
	if path == "" {
		path = first.Path
	}
	if path == "" {
		return "", refused("%s/manifest.json does not record the recipe's path: name the recipe with --recipe FILE", dirs[0])
	}
	b, err := boundedfile.Read(path, boundedfile.RecipeLimit)
	if err != nil {
		how := "run reproduce from the folder the original run started in, or name the recipe with --recipe FILE"
		if override != "" {
			how = "check the path"
		}
		return "", refused("the recipe %s is not there (%v): %s", path, err, how)
	}
	if first.SHA256 == "" {
		return "", refused("%s/manifest.json does not record the recipe's sha256, so there is no telling whether %s is the recipe it was made from", dirs[0], path)
	}
	if got := sha256Hex(b); got != first.SHA256 {
		return "", refused("the recipe %s changed since %s was made (sha256 %s now, %s in the manifest): reproduce needs the recipe as it was; check it out (git log -- %s) and name it with --recipe FILE", path, dirs[0], got, first.SHA256, path)
	}
	return path, nil
}

// pinRecordedSource makes the plan fetch the commit the manifest records.
func pinRecordedSource(pl *plan.Plan, m *manifest.Manifest) []string {
	rev := m.Source.ResolvedRevision
	if rev == "" {
		return nil
	}
	if pinned, ok := shared.PinRevision(pl.Source(), rev); ok {
		pl.SetSource(pinned)
		return []string{"source pinned to the recorded commit " + rev}
	}
	return []string{fmt.Sprintf("the manifest records revision %s, but %s cannot be pinned to it: the source is fetched as the recipe names it", rev, pl.Source())}
}

// scratchCache opens an empty cache at root that links the user cache's
// toolchains and pinned downloads.
func scratchCache(root, userRoot string) (*cache.Cache, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	for _, d := range sharedCacheDirs {
		src := filepath.Join(userRoot, d)
		if _, err := os.Stat(src); err != nil {
			continue
		}
		if err := os.Symlink(src, filepath.Join(root, d)); err != nil {
			return nil, fmt.Errorf("link the installed %s into the scratch cache: %w", d, err)
		}
	}
	return cache.Open(root)
}

// closure lists the publish steps of the targets and every step they need.
func closure(pl *plan.Plan, targets []string) []string {
	seen := map[string]bool{}
	var walk func(id string)
	walk = func(id string) {
		if seen[id] {
			return
		}
		seen[id] = true
		s, _ := pl.Step(id)
		for _, n := range s.Needs {
			walk(n)
		}
	}
	for _, t := range targets {
		walk(plan.PublishStepID(t))
	}
	var out []string
	for _, s := range pl.Steps {
		if seen[s.ID] {
			out = append(out, s.ID)
		}
	}
	return out
}

// sameToolchains refuses up front, before hours of conversion, when an
// installed toolchain is not the one the artifact was made with.
func sameToolchains(ctx context.Context, pl *plan.Plan, only []string, resolver *tools.Resolver, pubs []*manifest.Manifest, dirs []string) error {
	now := map[string]string{}
	for _, id := range only {
		s, _ := pl.Step(id)
		k, ok := steps.Lookup(s.Kind)
		if !ok {
			continue
		}
		for _, name := range k.Tools(s.Params) {
			t, err := resolver.Resolve(ctx, name)
			if err != nil {
				return &RefusedError{Err: fmt.Errorf("step %s: %w", id, err)}
			}
			if tc, ok := strings.CutPrefix(t.Origin, "toolchain "); ok {
				now[tc] = lockPart(t.Identity)
			}
		}
	}
	for i, m := range pubs {
		for name, tc := range m.Toolchains {
			cur, ok := now[name]
			if ok && cur != lockPart(tc.LockDigest) {
				return refused("%s was made with toolchain %s %s; the one installed here is %s. Reproduce with edgepipe %s, which installs that toolchain (edgepipe toolchain install %s)", dirs[i], name, lockPart(tc.LockDigest), cur, m.EdgepipeVersion, name)
			}
		}
	}
	return nil
}

// lockPart is the toolchain's own lock digest out of a tool identity
// ("sha256:LOCK+sha256:PYTHON+sha256:SCRIPT").
func lockPart(identity string) string {
	p, _, _ := strings.Cut(identity, "+")
	return p
}

// compareSteps compares each step's rebuilt output with the original,
// where the user's cache still holds it under the manifest's key, and
// each step's command lines, cache paths aside.
func compareSteps(pub, rebuilt *manifest.Manifest, res *engine.RunResult, userCache *cache.Cache, scratchRoot, userRoot string) []Step {
	origRoot := CacheRoot(pub.Steps)
	var againSteps map[string]manifest.Step
	if rebuilt != nil {
		againSteps = map[string]manifest.Step{}
		for _, s := range rebuilt.Steps {
			againSteps[s.ID] = s
		}
	}
	var out []Step
	for _, s := range pub.Steps {
		if s.Kind == "publish" || s.ID == plan.SourceStepID {
			continue
		}
		st := Step{ID: s.ID}
		again := res.Outputs[s.ID]
		switch {
		case again == nil:
			st.Status = NotRebuilt
		case userCache == nil || s.CacheKey == "":
			st.Status = OriginalGone
		default:
			ent, hit, err := userCache.Lookup(s.CacheKey)
			if err != nil || !hit {
				st.Status = OriginalGone
				break
			}
			orig := (&steps.Output{Key: ent.Key, Files: ent.Tree.Files}).ContentFiles()
			st.Files = DiffFiles(manifestFiles(orig), manifestFiles(again.ContentFiles()))
			st.Status = Identical
			if len(st.Files) > 0 {
				st.Status = Differs
			}
		}
		if a, ok := againSteps[s.ID]; ok {
			st.Argv = ArgvDifference(NormalizeArgv(s.Argv, origRoot),
				NormalizeArgv(a.Argv, scratchRoot, userRoot))
		}
		out = append(out, st)
	}
	return out
}

func manifestFiles(fs []digest.FileDigest) []manifest.File {
	out := make([]manifest.File, len(fs))
	for i, f := range fs {
		out[i] = manifest.File{Path: f.Path, SHA256: f.SHA256, Size: f.Size}
	}
	return out
}

func hasTarget(pl *plan.Plan, name, format string) bool {
	for _, t := range pl.Recipe.Targets {
		if t.Name == name && t.Format == format {
			return true
		}
	}
	return false
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

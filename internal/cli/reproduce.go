package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/edgepipe/edgepipe/internal/publish"

	"github.com/edgepipe/edgepipe/internal/engine"

	"github.com/edgepipe/edgepipe/internal/plan"

	"github.com/edgepipe/edgepipe/internal/cache"
	"github.com/edgepipe/edgepipe/internal/digest"
	"github.com/edgepipe/edgepipe/internal/manifest"
	"github.com/edgepipe/edgepipe/internal/reproduce"
	"github.com/edgepipe/edgepipe/internal/tools"
	"github.com/edgepipe/edgepipe/steps"
)

// sharedCacheDirs are what a scratch cache borrows from the user's cache
// instead of making again: the installed toolchains (gigabytes, pinned by
// digest) and the pinned downloads they and the built-in models come from
// (checked by sha256). Step outputs and built-in models are made afresh.
var sharedCacheDirs = []string{"toolchains", "downloads", "uv"}

// cmdReproduce rebuilds published folders from the recipe, source revision
// and toolchains their manifests record, in a scratch cache, and compares
// every file.
func cmdReproduce(ctx context.Context, env *Env, args []string) error {
	var c common
	fs := flagSet(env, "reproduce", "reproduce [flags] DIR...")
	c.register(fs, env, false)
	fs.IntVar(&c.jobs, "j", 0, "steps run at once (default: the recipe's resources.jobs, else the number of cores)")
	fs.Float64Var(&c.maxMemGB, "max-memory", 0, "memory budget in GiB for steps running at once (default: the recipe's, else the machine's)")
	recipeFlag := fs.String("recipe", "", "the recipe `FILE`, when it is not at the path the manifest records (it must have the recorded sha256)")
	scratchFlag := fs.String("scratch", "", "`DIR` for the scratch cache and the rebuilt folders (default: a new temporary folder)")
	keep := fs.Bool("keep", false, "keep the scratch folder (the rebuilt folders and their logs) afterwards")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageErr("reproduce takes published folders, e.g. edgepipe reproduce artifacts/demo/laptop-q8")
	}
	pubs := make([]*manifest.Manifest, len(pos))
	for i, dir := range pos {
		if pubs[i], err = manifest.Read(dir); err != nil {
			return usageErr("%s is not a published folder: %v", dir, err)
		}
	}
	recipe, err := recipeOf(pos, pubs, *recipeFlag)
	if err != nil {
		return err
	}
	pl, err := loadPlan(recipe)
	if err != nil {
		return err
	}
	var targets []string
	for i, m := range pubs {
		if !hasTarget(pl, m.Target.Name, m.Target.Format) {
			return usageErr("%s is target %s (%s), which %s does not have now: the recipe's sha256 matches, so this edgepipe expands it differently; reproduce with edgepipe %s", pos[i], m.Target.Name, m.Target.Format, recipe, m.EdgepipeVersion)
		}
		targets = append(targets, m.Target.Name)
	}
	userRoot, err := c.cacheRoot(env)
	if err != nil {
		return err
	}
	notes := pinRecordedSource(pl, pubs[0])
	if pubs[0].EdgepipeVersion != Version {
		notes = append(notes, fmt.Sprintf("the artifact was made by edgepipe %s, this is %s: a step kind that changed since makes different bytes", pubs[0].EdgepipeVersion, Version))
	}

	scratch, cleanup, err := scratchFolder(*scratchFlag, *keep)
	if err != nil {
		return err
	}
	defer func() { cleanup() }()
	ca, err := scratchCache(filepath.Join(scratch, "cache"), userRoot)
	if err != nil {
		return err
	}
	only := closure(pl, targets)
	resolver := c.toolResolver(pl, userRoot)
	if err := sameToolchains(pl, only, resolver, pubs, pos); err != nil {
		return err
	}
	jobs, memGB := c.budgets(pl)
	opt := engine.Options{
		Cache: ca, OutDir: filepath.Join(scratch, "out"), Jobs: jobs, MaxMemoryMB: int64(memGB * 1024),
		KeepGoing: true, Tools: resolver, Data: dataResolver(ca.Root(), pl.Recipe.Dir()),
		Version: Version, Only: only,
		// The rebuild is compared, never released: it must not reach the
		// recipe's publish: remotes (it would overwrite the release tag).
		NoPush: true,
	}
	if c.verbose {
		opt.Verbose = env.Stderr
	}
	eng := engine.NewEngine(pl, opt)
	rep := newReporter(env, c.json, len(only))
	for _, n := range notes {
		rep.raw(noteLine(c.json, n))
	}
	rep.raw(noteLine(c.json, "rebuilding in "+scratch))
	eng.SetOnEvent(rep.event)
	eng.SetOnProgress(rep.progress)
	res, runErr := eng.Run(ctx)
	rep.done()
	if runErr != nil {
		if engine.IsInterrupted(runErr) {
			return runErr
		}
		for _, e := range res.Failed {
			if !publish.IsGateFailure(e) {
				// The logs the error points at are in the scratch folder.
				cleanup = func() {}
				rep.raw(noteLine(c.json, "kept "+scratch+" for the failed step's log"))
				return runError(res, runErr)
			}
		}
	}

	var reports []reproduce.Report
	var sourceFiles []manifest.File
	if src := res.Outputs[plan.SourceStepID]; src != nil {
		sourceFiles = manifestFiles(src.ContentFiles())
	}
	userCache, _ := cache.Open(userRoot)
	for i, dir := range pos {
		problems, err := manifest.VerifyContext(ctx, dir)
		if err != nil {
			return fmt.Errorf("verify %s: %w", dir, err)
		}
		var rebuilt *manifest.Manifest
		if out, ok := res.Published[targets[i]]; ok {
			if rebuilt, err = manifest.Read(out); err != nil {
				return err
			}
		}
		r := reproduce.Compare(dir, pubs[i], problems, rebuilt, sourceFiles)
		if g := res.Gates[targets[i]]; rebuilt == nil && g != nil {
			r.RebuiltPerplexity(pubs[i], g.Baseline, g.Converted)
		}
		r.Steps = compareSteps(pubs[i], rebuilt, res, userCache, ca.Root(), userRoot)
		reports = append(reports, r)
	}
	code := ExitOK
	for _, r := range reports {
		if !r.Identical {
			code = ExitNotReproduced
		}
	}
	if *keep {
		rep.raw(noteLine(c.json, "kept "+scratch))
	}
	if c.json {
		b, _ := json.Marshal(reproduceFinished{Time: time.Now(), Event: "reproduce-finished", Recipe: recipe, ExitCode: code, Artifacts: reports})
		fmt.Fprintln(env.Stdout, string(b))
	} else {
		printReproduce(env, reports)
	}
	if code != ExitOK {
		return &ExitError{Code: code, Err: fmt.Errorf("%d of %d folder(s) are not bit-identical to their rebuild", countDiffering(reports), len(reports))}
	}
	return nil
}

type reproduceFinished struct {
	Time      time.Time          `json:"time"`
	Event     string             `json:"event"`
	Recipe    string             `json:"recipe"`
	ExitCode  int                `json:"exit_code"`
	Artifacts []reproduce.Report `json:"artifacts"`
}

func noteLine(asJSON bool, msg string) string {
	if asJSON {
		b, _ := json.Marshal(map[string]string{"event": "note", "message": msg})
		return string(b)
	}
	return "note: " + msg
}

func countDiffering(rs []reproduce.Report) int {
	n := 0
	for _, r := range rs {
		if !r.Identical {
			n++
		}
	}
	return n
}

// recipeOf finds the recipe the folders were made from and checks that it
// is byte for byte the one their manifests record.
func recipeOf(dirs []string, pubs []*manifest.Manifest, override string) (string, error) {
	first := pubs[0].Recipe
	for i, m := range pubs[1:] {
		if m.Recipe.SHA256 != first.SHA256 || m.Recipe.Path != first.Path {
			return "", usageErr("%s and %s were made from different recipes (%s, %s): reproduce one recipe's folders at a time", dirs[0], dirs[i+1], first.Path, m.Recipe.Path)
		}
	}
	path := override
	if path == "" {
		path = first.Path
	}
	if path == "" {
		return "", usageErr("%s/manifest.json does not record the recipe's path: name the recipe with --recipe FILE", dirs[0])
	}
	b, err := os.ReadFile(path)
	if err != nil {
		how := "run reproduce from the folder the original run started in, or name the recipe with --recipe FILE"
		if override != "" {
			how = "check the path"
		}
		return "", usageErr("the recipe %s is not there (%v): %s", path, err, how)
	}
	if first.SHA256 == "" {
		return "", usageErr("%s/manifest.json does not record the recipe's sha256, so there is no telling whether %s is the recipe it was made from", dirs[0], path)
	}
	if got := sha256Hex(b); got != first.SHA256 {
		return "", usageErr("the recipe %s changed since %s was made (sha256 %s now, %s in the manifest): reproduce needs the recipe as it was; check it out (git log -- %s) and name it with --recipe FILE", path, dirs[0], got, first.SHA256, path)
	}
	return path, nil
}

// pinRecordedSource makes the plan fetch the commit the manifest records.
func pinRecordedSource(pl *plan.Plan, m *manifest.Manifest) []string {
	rev := m.Source.ResolvedRevision
	if rev == "" {
		return nil
	}
	if pinned, ok := steps.PinRevision(pl.Source(), rev); ok {
		pl.SetSource(pinned)
		return []string{"source pinned to the recorded commit " + rev}
	}
	return []string{fmt.Sprintf("the manifest records revision %s, but %s cannot be pinned to it: the source is fetched as the recipe names it", rev, pl.Source())}
}

// scratchFolder makes the folder a reproduction works in; cleanup removes
// it unless it is to be kept.
func scratchFolder(dir string, keep bool) (string, func(), error) {
	if dir == "" {
		d, err := os.MkdirTemp("", "edgepipe-reproduce-")
		if err != nil {
			return "", nil, err
		}
		dir = d
	} else {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", nil, err
		}
		if ents, _ := os.ReadDir(dir); len(ents) > 0 {
			return "", nil, usageErr("--scratch %s is not empty: a rebuild must not start from anything made before; name an empty or new folder", dir)
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", nil, err
	}
	if keep {
		return abs, func() {}, nil
	}
	return abs, func() { os.RemoveAll(abs) }, nil
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
func sameToolchains(pl *plan.Plan, only []string, resolver *tools.Resolver, pubs []*manifest.Manifest, dirs []string) error {
	now := map[string]string{}
	for _, id := range only {
		s, _ := pl.Step(id)
		k, ok := steps.Lookup(s.Kind)
		if !ok {
			continue
		}
		for _, name := range k.Tools(s.Params) {
			t, err := resolver.Resolve(name)
			if err != nil {
				return &ExitError{Code: ExitUsage, Err: fmt.Errorf("step %s: %w", id, err)}
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
				return usageErr("%s was made with toolchain %s %s; the one installed here is %s. Reproduce with edgepipe %s, which installs that toolchain (edgepipe toolchain install %s)", dirs[i], name, lockPart(tc.LockDigest), cur, m.EdgepipeVersion, name)
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
func compareSteps(pub, rebuilt *manifest.Manifest, res *engine.RunResult, userCache *cache.Cache, scratchRoot, userRoot string) []reproduce.Step {
	origRoot := reproduce.CacheRoot(pub.Steps)
	var againSteps map[string]manifest.Step
	if rebuilt != nil {
		againSteps = map[string]manifest.Step{}
		for _, s := range rebuilt.Steps {
			againSteps[s.ID] = s
		}
	}
	var out []reproduce.Step
	for _, s := range pub.Steps {
		if s.Kind == "publish" || s.ID == plan.SourceStepID {
			continue
		}
		st := reproduce.Step{ID: s.ID}
		again := res.Outputs[s.ID]
		switch {
		case again == nil:
			st.Status = reproduce.NotRebuilt
		case userCache == nil || s.CacheKey == "":
			st.Status = reproduce.OriginalGone
		default:
			ent, hit, err := userCache.Lookup(s.CacheKey)
			if err != nil || !hit {
				st.Status = reproduce.OriginalGone
				break
			}
			orig := (&steps.Output{Key: ent.Key, Files: ent.Tree.Files}).ContentFiles()
			st.Files = reproduce.DiffFiles(manifestFiles(orig), manifestFiles(again.ContentFiles()))
			st.Status = reproduce.Identical
			if len(st.Files) > 0 {
				st.Status = reproduce.Differs
			}
		}
		if a, ok := againSteps[s.ID]; ok {
			st.Argv = reproduce.ArgvDifference(reproduce.NormalizeArgv(s.Argv, origRoot),
				reproduce.NormalizeArgv(a.Argv, scratchRoot, userRoot))
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

func printReproduce(env *Env, reports []reproduce.Report) {
	for _, r := range reports {
		verdict := "bit-identical"
		if !r.Identical {
			verdict = "NOT bit-identical"
		}
		fmt.Fprintf(env.Stdout, "%s (%s, %s): %s\n", r.Dir, r.Target, r.Format, verdict)
		logs := 0
		for _, f := range r.Files {
			if f.Status == reproduce.Log {
				logs++
				continue
			}
			line := fmt.Sprintf("  %-10s %s", f.Status, f.Path)
			switch f.Status {
			case reproduce.Differs:
				line += fmt.Sprintf(" (published sha256 %s, rebuilt %s)", f.Published, f.Rebuilt)
			case reproduce.Tampered:
				line += " (" + f.OnDisk + ")"
			}
			fmt.Fprintln(env.Stdout, line)
		}
		if logs > 0 {
			fmt.Fprintf(env.Stdout, "  %d step log(s) not compared: they record times and paths\n", logs)
		}
		if len(r.SourceDiffers) > 0 {
			fmt.Fprintf(env.Stdout, "  source differs from the manifest's: %s\n", strings.Join(r.SourceDiffers, ", "))
		}
		if p := r.Perplexity; p != nil {
			fmt.Fprintf(env.Stdout, "  perplexity: published %.4f, rebuilt %.4f (delta %+.4f; baselines %.4f and %.4f)\n",
				p.Published, p.Rebuilt, p.Delta, p.Baseline, p.RebuiltBaseline)
			if r.Identical && (p.Delta != 0 || p.Baseline != p.RebuiltBaseline) {
				fmt.Fprintln(env.Stdout, "  note: the files are identical but the gate measured other numbers: the evaluation text or the evaluating tools differ from the original run's")
			}
		}
		counts := map[string]int{}
		for _, s := range r.Steps {
			counts[s.Status]++
		}
		if len(r.Steps) > 0 {
			fmt.Fprintf(env.Stdout, "  steps: %d made the same files as the original still in the cache, %d other files, %d original not in the cache\n",
				counts[reproduce.Identical], counts[reproduce.Differs], counts[reproduce.OriginalGone])
		}
		for _, s := range r.Steps {
			if s.Status == reproduce.Differs {
				fmt.Fprintf(env.Stdout, "  step %s: output differs from the cached original (%s)\n", s.ID, strings.Join(s.Files, ", "))
			}
			if s.Argv != "" {
				fmt.Fprintf(env.Stdout, "  step %s: command line differs: %s\n", s.ID, s.Argv)
			}
		}
	}
}

package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/edgepipe/edgepipe/internal/progress"
	"path/filepath"
	"time"

	"github.com/edgepipe/edgepipe/data"
	"github.com/edgepipe/edgepipe/internal/engine"
	"github.com/spf13/pflag"

	"github.com/edgepipe/edgepipe/internal/manifest"
	"github.com/edgepipe/edgepipe/internal/reproduce"
)

// cmdReproduce rebuilds published folders from the recipe, source revision
// and toolchains their manifests record, in a scratch cache, and compares
// every file.
func cmdReproduce(env *Env, fs *pflag.FlagSet) runFunc {
	var c common
	c.register(fs, env, false)
	fs.IntVarP(&c.jobs, "jobs", "j", 0, "steps run at once (default: the recipe's resources.jobs, else the number of cores)")
	fs.Float64Var(&c.maxMemGB, "max-memory", 0, "memory budget in GB (1e9 bytes, as every memory figure) for steps running at once (default: the recipe's, else the machine's)")
	recipeFlag := fs.String("recipe", "", "the recipe `FILE`, when it is not at the path the manifest records (it must have the recorded sha256)")
	scratchFlag := fs.String("scratch", "", "`DIR` for the scratch cache and the rebuilt folders (default: a new temporary folder)")
	keep := fs.Bool("keep", false, "keep the scratch folder (the rebuilt folders and their logs) afterwards")
	return func(ctx context.Context, pos []string) error {
		if len(pos) == 0 {
			return usageErr("reproduce takes published folders, e.g. edgepipe reproduce artifacts/demo/laptop-q8")
		}
		pubs := make([]*manifest.Manifest, len(pos))
		var err error
		for i, dir := range pos {
			if pubs[i], err = manifest.Read(dir); err != nil {
				return usageErr("%s is not a published folder: %v", dir, err)
			}
		}
		recipe, err := reproduce.RecipeOf(pos, pubs, *recipeFlag)
		if err != nil {
			return refusal(err)
		}
		pl, err := loadPlan(recipe)
		if err != nil {
			return err
		}
		userRoot, err := c.cacheRoot(env)
		if err != nil {
			return err
		}
		scratch, cleanup, err := reproduce.ScratchFolder(*scratchFlag, *keep)
		if err != nil {
			return refusal(err)
		}
		defer func() { cleanup() }()
		jobs, memMB := c.budgets(pl)
		opt := engine.Options{Jobs: jobs, MaxMemoryMB: memMB, Tools: c.toolResolver(pl, userRoot),
			Data: data.Resolver(filepath.Join(scratch, "cache"), pl.Recipe.Dir()), Version: Version}
		if c.verbose {
			opt.Verbose = env.toolOutput()
		}
		var rep *progress.Reporter
		reports, res, err := reproduce.Run(ctx, reproduce.Rebuild{Dirs: pos, Pubs: pubs, Plan: pl, UserRoot: userRoot,
			Scratch: scratch, Options: opt, Version: Version,
			Setup: func(eng *engine.Engine, steps int) {
				rep = progress.New(env.progress(), c.json, steps)
				rep.Quiet = c.quiet
				rep.Live(c.verbose)
				eng.SetOnEvent(rep.Event)
				eng.SetOnProgress(rep.Progress)
				eng.SetOnToolProgress(rep.ToolProgress)
			},
			Notes: func(n string) { rep.Raw(noteLine(c.json, n)) }})
		if rep == nil {
			rep = progress.New(env.progress(), c.json, 0)
		}
		rep.Done()
		if err != nil {
			if res != nil && !engine.IsInterrupted(err) {
				// The logs the error points at are in the scratch folder.
				cleanup = func() {}
				rep.Raw(noteLine(c.json, "kept "+scratch+" for the failed step's log"))
				return runError(res, err)
			}
			return refusal(err)
		}
		code := ExitOK
		for _, r := range reports {
			if !r.Identical {
				code = ExitNotReproduced
			}
		}
		if *keep {
			rep.Raw(noteLine(c.json, "kept "+scratch))
		}
		if c.json {
			b, _ := json.Marshal(reproduceFinished{Time: time.Now(), Event: "reproduce-finished", Recipe: recipe, ExitCode: code, Artifacts: reports})
			fmt.Fprintln(env.Stdout, string(b))
		} else {
			reproduce.Print(env.Stdout, reports)
		}
		if code != ExitOK {
			return &ExitError{Code: code, Err: fmt.Errorf("%d of %d folder(s) are not bit-identical to their rebuild", reproduce.CountDiffering(reports), len(reports))}
		}
		return nil
	}
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

// refusal gives a refused reproduction the usage exit code.
func refusal(err error) error {
	var r *reproduce.RefusedError
	if errors.As(err, &r) {
		return &ExitError{Code: ExitUsage, Err: r.Err}
	}
	return err
}

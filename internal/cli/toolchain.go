package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/edgepipe/edgepipe/internal/cachegc"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/edgepipe/edgepipe/internal/report"
	"github.com/edgepipe/edgepipe/internal/toolchain"
	"github.com/spf13/pflag"
)

func cmdToolchain(env *Env, fs *pflag.FlagSet) runFunc {
	var c common
	c.register(fs, env, false)
	forRecipe := fs.String("for", "", "install: only the toolchains this recipe's steps need (`RECIPE`)")
	dryRun := fs.Bool("dry-run", false, "install, prune: say what would be installed or removed, and do nothing")
	return func(ctx context.Context, pos []string) error {
		subs := []string{"install", "list", "prune", "remove"}
		if len(pos) == 0 || !slices.Contains(subs, pos[0]) {
			return subcommandErr("toolchain", pos, subs, "usage: edgepipe toolchain install [NAME...] [--for RECIPE] | list | prune | remove NAME...")
		}
		if c.json && pos[0] != "list" {
			return noJSON("toolchain "+pos[0], "toolchain list")
		}
		root, err := c.cacheRoot(env)
		if err != nil {
			return err
		}
		switch pos[0] {
		case "list":
			if c.json {
				entries, err := toolchain.List(root)
				if err != nil {
					return err
				}
				return writeJSON(env.Stdout, entries)
			}
			return toolchain.WriteList(env.Stdout, root, report.HumanBytes)
		case "prune", "remove":
			return toolchainRemove(env, root, pos[0], pos[1:], *dryRun)
		}
		var needs []toolchain.Need
		switch {
		case *forRecipe != "" && len(pos) > 1:
			return usageErr("name toolchains or give --for RECIPE, not both")
		case *forRecipe != "":
			pl, err := loadPlan(*forRecipe)
			if err != nil {
				return err
			}
			needs = toolchain.Needed(root, pl.Tools(), c.toolResolver(pl, root).Local)
			if len(toolchain.Missing(needs)) == 0 {
				fmt.Fprintf(env.Stdout, "%s: every toolchain it needs is installed (%d)\n", *forRecipe, len(needs))
				return nil
			}
		default:
			names := pos[1:]
			if len(names) == 0 {
				for _, s := range toolchain.Specs() {
					if s.Available() {
						names = append(names, s.Name)
					}
				}
				fmt.Fprintln(env.Stderr, "installing every toolchain; `edgepipe toolchain install --for RECIPE` installs only what a recipe needs")
			}
			for _, name := range names {
				if strings.HasPrefix(name, "builtin:") {
					needs = append(needs, toolchain.Need{Name: name, SizeHint: "a small model"})
					continue
				}
				if _, err := toolchain.Lookup(name); err != nil {
					return usageErr("%v", err)
				}
			}
			var plain []string
			for _, name := range names {
				if !strings.HasPrefix(name, "builtin:") {
					plain = append(plain, name)
				}
			}
			// The toolchains first (a builtin model needs llama), then the models.
			needs = append(toolchain.NeededNames(root, plain...), needs...)
		}
		if *dryRun {
			for _, n := range toolchain.Missing(needs) {
				fmt.Fprintf(env.Stdout, "would install %s: %s; %s\n", n.Name, n.Why(), n.SizeHint)
			}
			return nil
		}
		if err := toolchain.Ensure(ctx, root, needs, true, "", env.toolOutput()); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return &ExitError{Code: ExitStepFailed, Err: err}
		}
		for _, n := range needs {
			if strings.HasPrefix(n.Name, "builtin:") {
				continue
			}
			if in, err := toolchain.Resolve(root, n.Name); err == nil {
				// Asking for a toolchain is a use: `cache gc --older-than`
				// keeps what CI's install step named, whatever its tests ran.
				toolchain.MarkUsed(root, n.Name)
				fmt.Fprintf(env.Stdout, "%s: %s (%s)\n", n.Name, in.Summary(), in.Dir)
			}
		}
		return nil
	}
}

// toolchainRemove is `toolchain remove NAME...` (the current installs) and
// `toolchain prune` (folders no current lock names: older pins,
// interrupted installs).
func toolchainRemove(env *Env, root, verb string, names []string, dryRun bool) error {
	var doomed []toolchain.Folder
	if verb == "remove" {
		if len(names) == 0 {
			return usageErr("toolchain remove takes the toolchains to remove, e.g. edgepipe toolchain remove modelopt")
		}
		for _, name := range names {
			if _, err := toolchain.Lookup(name); err != nil {
				return usageErr("%v", err)
			}
		}
		folders, err := toolchain.Folders(root)
		if err != nil {
			return err
		}
		for _, name := range names {
			spec, _ := toolchain.Lookup(name)
			i := slices.IndexFunc(folders, func(f toolchain.Folder) bool { return filepath.Base(f.Dir) == spec.DirName() })
			if i < 0 {
				return &ExitError{Code: ExitUsage, Err: fmt.Errorf("toolchain %s is not installed", name)}
			}
			doomed = append(doomed, folders[i])
		}
	} else {
		if len(names) > 0 {
			return usageErr("toolchain prune takes no names (it removes what no current lock names); `toolchain remove NAME` removes an install")
		}
		folders, err := toolchain.Folders(root)
		if err != nil {
			return err
		}
		for _, f := range folders {
			if !f.Current {
				doomed = append(doomed, f)
			}
		}
	}
	if err := cachegc.RemoveFolders(env.Stdout, root, doomed, dryRun); err != nil {
		return &ExitError{Code: ExitStepFailed, Err: err}
	}
	return nil
}

// cmdDoctor says, for every tool, whether it is installed, its version and
// path, and the exact command that installs what is missing. It exits 2
// when something a recipe could need is missing, so scripts can check.
// writeDoctorSummary ends doctor's inventory: what is found, what edgepipe
// installs when asked (or when a run needs it), and what does not run on
// this host.
func writeDoctorSummary(w io.Writer, st []toolchain.ToolStatus) {
	var found, installable, elsewhere int
	for _, s := range st {
		switch {
		case s.Found:
			found++
		case s.InstallCommand != "":
			installable++
		default:
			elsewhere++
		}
	}
	fmt.Fprintf(w, "\n%d of %d tools found; %d not installed yet (`edgepipe toolchain install` installs them all, and `run` installs what a recipe needs on first use); %d not run on this host (installed by hand, or on the device).\n", found, len(st), installable, elsewhere)
	fmt.Fprintln(w, "For what one recipe needs, and exit 2 when something is missing: edgepipe doctor RECIPE")
}

func cmdDoctor(env *Env, fs *pflag.FlagSet) runFunc {
	var c common
	c.register(fs, env, false)
	return func(ctx context.Context, pos []string) error {
		if len(pos) > 1 {
			return usageErr("doctor takes at most one recipe: edgepipe doctor [RECIPE]")
		}
		root, err := c.cacheRoot(env)
		if err != nil {
			return err
		}
		st := toolchain.Doctor(root)
		fix := "edgepipe toolchain install NAME (or: edgepipe doctor RECIPE for what one recipe needs)"
		recipeMode := false
		if len(pos) == 1 {
			// Only what this recipe's steps need counts, and a tool found
			// through the recipe or --tool-path needs no toolchain.
			pl, err := loadPlan(pos[0])
			if err != nil {
				return err
			}
			local := c.toolResolver(pl, root).Local
			needs := toolchain.Needed(root, pl.Tools(), local)
			// A tool edgepipe cannot install (mlc_llm, the QNN SDK) is
			// not a toolchain to install, but the recipe needs it all the
			// same: it is listed, with how to get it.
			st = toolchain.ForRecipe(st, needs, pl.Tools(), local)
			recipeMode = true
			fix = "edgepipe toolchain install --for " + pos[0]
			if len(st) == 0 && !c.json {
				fmt.Fprintf(env.Stdout, "%s: every tool it needs is found outside the toolchains (the recipe's toolchains: or --tool-path)\n", pos[0])
				return nil
			}
		}
		if c.json {
			enc := json.NewEncoder(env.Stdout)
			enc.SetIndent("", "  ")
			if err := enc.Encode(st); err != nil {
				return err
			}
		} else {
			toolchain.WriteDoctor(env.Stdout, st)
		}
		if !recipeMode {
			// Without a recipe doctor is an inventory: a toolchain not
			// installed yet is not a fault (run installs what a recipe
			// needs on first use), nor is a tool this host cannot run.
			if !c.json {
				writeDoctorSummary(env.Stdout, st)
			}
			return nil
		}
		for _, s := range st {
			if !s.Found && s.InstallCommand != "" {
				return &ExitError{Code: ExitUsage, Err: fmt.Errorf("some tools are missing: run `%s`", fix)}
			}
		}
		for _, s := range st {
			if !s.Found && recipeMode {
				return &ExitError{Code: ExitUsage, Err: fmt.Errorf("the recipe needs %s, which edgepipe cannot install: %s", s.Name, s.Note)}
			}
		}
		return nil
	}
}

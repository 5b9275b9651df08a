package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/edgepipe/edgepipe/internal/toolchain"
	"github.com/spf13/pflag"
)

func cmdToolchain(env *Env, fs *pflag.FlagSet) runFunc {
	var c common
	c.register(fs, env, false)
	return func(ctx context.Context, pos []string) error {
		if len(pos) == 0 || (pos[0] != "install" && pos[0] != "list") {
			return usageErr("usage: edgepipe toolchain install [NAME...] | edgepipe toolchain list")
		}
		root, err := c.cacheRoot(env)
		if err != nil {
			return err
		}
		if pos[0] == "list" {
			tw := tabwriter.NewWriter(env.Stdout, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tKIND\tDIGEST\tINSTALLED\tTOOLS")
			for _, s := range toolchain.Specs() {
				state := "no"
				if in, err := toolchain.Resolve(root, s.Name); err == nil {
					state = in.Summary()
				}
				if s.Kind == toolchain.KindExternal {
					state = "(not installed by edgepipe)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\n", s.Name, s.Kind, short(s.Digest()), state, s.Tools)
			}
			return tw.Flush()
		}
		names := pos[1:]
		if len(names) == 0 {
			for _, s := range toolchain.Specs() {
				if s.Kind != toolchain.KindExternal {
					names = append(names, s.Name)
				}
			}
		}
		for _, name := range names {
			in, err := toolchain.Install(ctx, root, name, env.Stderr)
			if err != nil {
				return &ExitError{Code: ExitStepFailed, Err: fmt.Errorf("install toolchain %s: %w", name, err)}
			}
			fmt.Fprintf(env.Stdout, "%s: %s (%s)\n", name, in.Summary(), in.Dir)
		}
		return nil
	}
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

// cmdDoctor says, for every tool, whether it is installed, its version and
// path, and the exact command that installs what is missing. It exits 2
// when something a recipe could need is missing, so scripts can check.
func cmdDoctor(env *Env, fs *pflag.FlagSet) runFunc {
	var c common
	c.register(fs, env, false)
	return func(ctx context.Context, _ []string) error {
		root, err := c.cacheRoot(env)
		if err != nil {
			return err
		}
		st := toolchain.Doctor(root)
		if c.json {
			enc := json.NewEncoder(env.Stdout)
			enc.SetIndent("", "  ")
			if err := enc.Encode(st); err != nil {
				return err
			}
		} else {
			tw := tabwriter.NewWriter(env.Stdout, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TOOL\tTOOLCHAIN\tFOUND\tVERSION\tPATH / HOW TO INSTALL")
			for _, s := range st {
				found, where := "no", s.InstallCommand
				if s.Found {
					found, where = "yes", s.Path
				}
				if where == "" {
					where = s.Note
				} else if !s.Found && s.Note != "" && !strings.Contains(s.Note, s.InstallCommand) {
					where += "  (" + s.Note + ")"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Name, s.Toolchain, found, s.Version, where)
			}
			tw.Flush()
		}
		for _, s := range st {
			if !s.Found && s.InstallCommand != "" {
				return &ExitError{Code: ExitUsage, Err: fmt.Errorf("some tools are missing: run `edgepipe toolchain install`")}
			}
		}
		return nil
	}
}

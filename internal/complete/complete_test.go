package complete

import (
	"reflect"
	"slices"
	"testing"

	"github.com/spf13/cobra"

	"github.com/edgepipe/edgepipe/internal/catalog"
	"github.com/edgepipe/edgepipe/internal/edge"
	"github.com/edgepipe/edgepipe/internal/toolchain"
	_ "github.com/edgepipe/edgepipe/pipelines" // the formats and devices the catalog lists
)

type result struct {
	words     []string
	directive cobra.ShellCompDirective
}

func call(f cobra.CompletionFunc, args ...string) result {
	w, d := f(&cobra.Command{}, args, "")
	return result{w, d}
}

const (
	noFiles = cobra.ShellCompDirectiveNoFileComp
	ext     = cobra.ShellCompDirectiveFilterFileExt
	dirs    = cobra.ShellCompDirectiveFilterDirs
)

func TestArgs(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    cobra.CompletionFunc
		args []string
		want result
	}{
		{"words: first argument", Words("a", "b"), nil, result{[]string{"a", "b"}, noFiles}},
		{"words: nothing after it", Words("a", "b"), []string{"a"}, result{nil, noFiles}},
		{"no arguments", NoArgs, nil, result{nil, noFiles}},
		{"recipe: YAML files", RecipeArg, nil, result{[]string{"yaml", "yml"}, ext}},
		{"recipe: one only", RecipeArg, []string{"r.yaml"}, result{nil, noFiles}},
		{"folders", DirArgs, []string{"a", "b"}, result{nil, dirs}},
		{"step: run", StepArgs, nil, result{[]string{"run"}, noFiles}},
		{"step run: the plan", StepArgs, []string{"run"}, result{[]string{"json"}, ext}},
		{"step run PLAN: nothing to offer", StepArgs, []string{"run", "plan.json"}, result{nil, noFiles}},
		{"toolchain: its subcommands", ToolchainArgs, nil, result{[]string{"install", "list", "prune", "remove"}, noFiles}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := call(tc.f, tc.args...); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// After the subcommand, the toolchains edgepipe installs; not the ones it
// only finds (cmake, a vendor SDK).
func TestToolchainNames(t *testing.T) {
	got := call(ToolchainArgs, "install")
	if got.directive != noFiles || len(got.words) == 0 {
		t.Fatalf("%+v", got)
	}
	for _, s := range toolchain.Specs() {
		if offered := slices.Contains(got.words, s.Name); offered != (s.Kind != toolchain.KindExternal) {
			t.Errorf("%s (%s) offered: %v", s.Name, s.Kind, offered)
		}
	}
}

// Each flag a command has completes to its values; flags it does not
// have are not registered (cobra would refuse them).
func TestRegisterFlags(t *testing.T) {
	targets := func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"laptop", "phone"}, noFiles
	}
	newCmd := func(flags ...string) *cobra.Command {
		cmd := &cobra.Command{Use: "x"}
		for _, f := range flags {
			cmd.Flags().String(f, "", "")
		}
		return cmd
	}
	cmd := newCmd("device", "platform", "format", "recipe", "output", "out", "cache-dir", "scratch", "for", "target", "task", "jobs")
	RegisterFlags("plan", cmd, targets)
	for _, tc := range []struct {
		flag string
		want result
	}{
		{"device", result{catalog.DeviceIDs(), noFiles}},
		{"platform", result{edge.Platforms(), noFiles}},
		{"format", result{catalog.FormatNames(), noFiles}},
		{"recipe", result{[]string{"yaml", "yml"}, ext}},
		{"output", result{[]string{"yaml", "yml"}, ext}},
		{"for", result{[]string{"yaml", "yml"}, ext}},
		{"out", result{nil, dirs}},
		{"cache-dir", result{nil, dirs}},
		{"scratch", result{nil, dirs}},
		{"target", result{[]string{"laptop", "phone"}, noFiles}},
		{"task", result{[]string{"llm", "vision"}, noFiles}},
	} {
		f, ok := cmd.GetFlagCompletionFunc(tc.flag)
		if !ok {
			t.Errorf("--%s has no completion", tc.flag)
			continue
		}
		if got := call(f); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("--%s: got %+v, want %+v", tc.flag, got, tc.want)
		}
	}
	if len(catalog.DeviceIDs()) == 0 || len(catalog.FormatNames()) == 0 {
		t.Error("the catalog lists no devices or formats")
	}
	if _, ok := cmd.GetFlagCompletionFunc("jobs"); ok {
		t.Error("--jobs got a completion it does not have")
	}

	// graph's --format is the graph's output format, not a model's.
	graph := newCmd("format", "recipe")
	RegisterFlags("graph", graph, targets)
	f, _ := graph.GetFlagCompletionFunc("format")
	if got := call(f); !reflect.DeepEqual(got, result{[]string{"dot", "mermaid"}, noFiles}) {
		t.Errorf("graph --format: %+v", got)
	}

	// A command without the flags gets none.
	bare := newCmd()
	RegisterFlags("version", bare, targets)
	if _, ok := bare.GetFlagCompletionFunc("device"); ok {
		t.Error("a command without --device got its completion")
	}
}

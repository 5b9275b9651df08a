package plan

import (
	"fmt"
	"github.com/edgepipe/edgepipe/pipelines/shared"
	"sort"
	"strings"

	"github.com/edgepipe/edgepipe/internal/catalog"
	"github.com/edgepipe/edgepipe/internal/recipe"
)

// BenchBackend names the runtime that measures a format on this host, as
// the format's catalog row says, or false when the format does not run
// here token by token (QNN's QDQ graphs run on ONNX Runtime's CPU provider
// too, but with static shapes and no KV cache: no per-token decode).
func BenchBackend(format string) (string, bool) {
	f, err := catalog.ParseFormat(format)
	if err != nil || f.Bench == "" {
		return "", false
	}
	return f.Bench, true
}

// addBench adds the bench step of a target's model. Targets with the same
// model and the same bench settings share one measurement.
func addBench(t *recipe.Target, model *Step, add AddFunc) *Step {
	backend, _ := BenchBackend(t.Format)
	b := t.Bench
	params := &shared.BenchParams{Backend: backend, Warmup: b.Warmup, Runs: b.Runs,
		PromptTokens: b.PromptTokens, Threads: b.Threads, ProbeMiB: b.ProbeMiB}
	var opts []string
	for _, o := range []struct {
		name     string
		val, def int
	}{
		{"prompt_tokens", b.PromptTokens, recipe.DefaultBenchPromptTokens},
		{"probe_mib", b.ProbeMiB, recipe.DefaultBenchProbeMiB},
		{"runs", b.Runs, recipe.DefaultBenchRuns},
		{"threads", b.Threads, 0},
		{"warmup", b.Warmup, recipe.DefaultBenchWarmup},
	} {
		if o.val != o.def {
			opts = append(opts, fmt.Sprintf("%s=%d", o.name, o.val))
		}
	}
	sort.Strings(opts)
	id := "bench:" + model.ID
	if len(opts) > 0 {
		id += "+" + strings.Join(opts, "+")
	}
	return add(&Step{ID: id, Kind: "bench", Needs: []string{model.ID}, Params: params, Pos: t.BenchPos}, t.Name)
}

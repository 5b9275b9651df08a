package pipelines

import (
	"fmt"
	"sort"
	"strings"

	"github.com/edgepipe/edgepipe/internal/recipe"

	"github.com/edgepipe/edgepipe/internal/catalog"
	"github.com/edgepipe/edgepipe/internal/manifest"
	"github.com/edgepipe/edgepipe/steps"
)

// BenchBackend names the runtime that measures a format on this host, or
// false when the format does not run here token by token: GGUF through
// llama.cpp and ONNX (with its KV cache) through ONNX Runtime. QNN's QDQ
// graphs run on ONNX Runtime's CPU provider too, but with static shapes
// and no KV cache, so they have no per-token decode to time.
func BenchBackend(format string) (string, bool) {
	f, err := catalog.ParseFormat(format)
	if err != nil {
		return "", false
	}
	switch f.Family {
	case "gguf":
		return steps.BenchBackendLlamaCpp, true
	case "onnx":
		return steps.BenchBackendONNX, true
	}
	return "", false
}

// validateBench reports a bench section a target cannot honour.
func validateBench(t recipe.Target) *recipe.Diagnostic {
	if t.Bench == nil {
		return nil
	}
	if _, ok := BenchBackend(t.Format); !ok {
		return &recipe.Diagnostic{Pos: t.BenchPos,
			Msg:  fmt.Sprintf("target %q: bench cannot measure %s on this host", t.Name, t.Format),
			Hint: "bench runs GGUF targets through llama.cpp and onnx-fp32/onnx-int4 targets through ONNX Runtime; remove bench: from this target"}
	}
	if t.Context > 0 && t.Bench.PromptTokens >= t.Context {
		return &recipe.Diagnostic{Pos: t.BenchPos,
			Msg: fmt.Sprintf("target %q: bench.prompt_tokens %d does not leave room for a decoded token in its context of %d",
				t.Name, t.Bench.PromptTokens, t.Context),
			Hint: fmt.Sprintf("use a prompt_tokens under %d", t.Context)}
	}
	return nil
}

// addBench adds the bench step of a target's model. Targets with the same
// model and the same bench settings share one measurement.
func addBench(t *recipe.Target, model *Step, add AddFunc) *Step {
	backend, _ := BenchBackend(t.Format)
	b := t.Bench
	params := steps.Params{"backend": backend, "warmup": b.Warmup, "runs": b.Runs,
		"prompt_tokens": b.PromptTokens, "threads": b.Threads, "probe_mib": b.ProbeMiB}
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

// benchOutput returns the bench step's output among a publish step's
// inputs, if the target has one.
func benchOutput(ins []*Output) *Output {
	for _, in := range ins {
		if in.Kind == "bench" && in.Result != nil {
			return in
		}
	}
	return nil
}

// manifestBench is the bench step's result as the manifest records it.
func manifestBench(out *Output) *manifest.Bench {
	m := out.Result.Metrics
	b := &manifest.Bench{
		Backend:      out.Result.Facts["backend"],
		Host:         out.Result.Facts["host"],
		WarmupRuns:   int(m["warmup_runs"]),
		TimedRuns:    int(m["timed_runs"]),
		PromptTokens: int(m["prompt_tokens"]),
		DecodeTokens: int(m["decode_tokens"]),
		Threads:      int(m["threads"]),
		ModelBytes:   int64(m["model_bytes"]),
		TokenP50MS:   m["token_p50_ms"],
		TokenP95MS:   m["token_p95_ms"],
		TokenP99MS:   m["token_p99_ms"],
		FirstTokenMS: m["first_token_ms"],
		PromptTokS:   m["prompt_tok_s"],
		DecodeTokS:   m["decode_tok_s"],
	}
	opt := func(name string) *float64 {
		if v, ok := m[name]; ok {
			return &v
		}
		return nil
	}
	b.HostBandwidthGBs = opt("host_bandwidth_gb_s")
	b.HostCeilingTokS = opt("host_ceiling_tok_s")
	b.Efficiency = opt("efficiency")
	return b
}

// budgetChecks judges a target's speed budgets against its bench: decode
// tok/s against min_tokens_per_s, time to first token against
// max_first_token_ms. The bench measures this host, so these budgets are
// the host's when bench is on. Without a bench there is nothing to judge
// (plan time already checked min_tokens_per_s against the ceiling).
func budgetChecks(t *recipe.Target, bench *Output) []steps.Check {
	if t == nil || bench == nil {
		return nil
	}
	m := bench.Result.Metrics
	host := bench.Result.Facts["host"]
	var out []steps.Check
	if t.MinTokensPerS > 0 {
		if v, ok := m["decode_tok_s"]; ok {
			out = append(out, steps.Check{Name: "budget min_tokens_per_s", Passed: v >= t.MinTokensPerS,
				Detail: fmt.Sprintf("measured decode %.4g tok/s on this host (%s) against min_tokens_per_s %g", v, host, t.MinTokensPerS)})
		}
	}
	if t.MaxFirstTokenMS > 0 {
		if v, ok := m["first_token_ms"]; ok {
			out = append(out, steps.Check{Name: "budget max_first_token_ms", Passed: v <= t.MaxFirstTokenMS,
				Detail: fmt.Sprintf("measured time to first token %.4g ms for a %d-token prompt on this host (%s) against max_first_token_ms %g",
					v, int(m["prompt_tokens"]), host, t.MaxFirstTokenMS)})
		}
	}
	return out
}

// fillBudgetActuals records what the bench measured beside the budgets'
// limits and predictions.
func fillBudgetActuals(b *manifest.Budgets, bench *manifest.Bench) {
	if b == nil || bench == nil {
		return
	}
	if b.MinTokensPerS != nil {
		v := bench.DecodeTokS
		b.MinTokensPerS.Actual = &v
	}
	if b.MaxFirstTokenMS != nil {
		v := bench.FirstTokenMS
		b.MaxFirstTokenMS.Actual = &v
	}
}

// TargetBench returns what a run's bench measured for a target, published
// or not (a budget miss publishes nothing), and whether a stand-in tool
// produced the timings; nil when the target was not benched in this run.
func TargetBench(p *Plan, res *RunResult, target string) (*manifest.Bench, bool) {
	if res == nil {
		return nil, false
	}
	for _, s := range p.Steps {
		if s.Kind != "bench" || !contains(s.Targets, target) {
			continue
		}
		if out := res.Outputs[s.ID]; out != nil && out.Result != nil {
			return manifestBench(out), standIn(out.Result)
		}
	}
	return nil, false
}

// TargetStandIns lists the steps of a target that ran with stand-in
// tools in this run, in plan order.
func TargetStandIns(p *Plan, res *RunResult, target string) []string {
	if res == nil {
		return nil
	}
	var out []string
	for _, s := range p.Steps {
		if s.Kind == "publish" || !contains(s.Targets, target) {
			continue
		}
		if o := res.Outputs[s.ID]; o != nil && o.Result != nil && standIn(o.Result) {
			out = append(out, s.ID)
		}
	}
	return out
}

func standIn(r *steps.Result) bool {
	for k := range r.Facts {
		if strings.HasPrefix(k, "stand_in:") {
			return true
		}
	}
	return false
}

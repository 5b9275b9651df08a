package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/edgepipe/edgepipe/internal/event"
	"github.com/edgepipe/edgepipe/internal/manifest"
)

var archsBench = benchmark{
	name: "archs",
	about: func(e *env) string {
		return "every built-in tiny architecture (builtin:tiny-ARCH: random weights, real tokenizers) through every text format that runs here: " +
			"refused at validate (with the reason), converted and checked, or failed (with the step); per target the perplexity delta, KL and top-1 " +
			"against the unconverted model, the decode check's max |logit difference| against the artifact's own prefill, and the seconds its steps took (every step run, none from the cache); " +
			"the gates are opened wide (these models test mechanics and numerics, not quality), so a failure is the conversion's. " +
			"One BENCH line per architecture; ratio = its run's seconds / the first model's (tiny-llama). The matrix is written to " + e.archsOut
	},
	runAll: runArchs,
}

// archsModels are the tiny architectures, llama first (the ratio's peer).
var archsModels = []string{"tiny-llama", "tiny-qwen2", "tiny-qwen3", "tiny-gemma3", "tiny-phi3", "tiny-mistral", "tiny-qwen3-moe", "tiny-mixtral"}

// archsTargets: each text format that converts on this host, on a device
// that runs it, at settings sized for a 2-core CPU and a 4096-token model.
const archsTargets = `targets:
  gguf-q8_0: {device: x86-laptop, format: gguf-q8_0}
  gguf-q4_k_m: {device: x86-laptop, format: gguf-q4_k_m}
  onnx-fp32: {device: x86-laptop, format: onnx-fp32}
  onnx-int4: {device: x86-laptop, format: onnx-int4}
  openvino-int8: {device: intel-lunar-lake, format: openvino-int8}
  qnn-w8a16: {device: snapdragon-8-gen-3, format: qnn-w8a16, context: 256, with: {backend: ort-qdq}}
  coreml-int4: {device: apple-a18, format: coreml-int4, context: 1024}
  gptq-w4a16: {device: nvidia-a100, format: gptq-w4a16, with: {group_size: 32, num_calibration_samples: 8, max_seq_length: 128}}
  awq-w4a16: {device: nvidia-h100, format: awq-w4a16, with: {group_size: 32, num_calibration_samples: 8, max_seq_length: 128, n_grid: 4}}
  mlc-q4f16_1: {device: webgpu-m3-max, format: mlc-q4f16_1, context: 1024, with: {webgpu_check: false}}
`

// archsRecipe opens the gates: a random model's perplexity is near its
// vocabulary's size, and what is measured is whether each conversion
// runs, loads and keeps the numbers, which the figures say.
func archsRecipe(model, targets string) string {
	return fmt.Sprintf(`edgepipe: 1
name: archs-%s
model: {source: builtin:%s}
data: {calibration: builtin:calibration, eval: builtin:eval}
quality:
  perplexity: {context: 128, max_chunks: 4, warn_delta: 1000000, max_delta: 1000000}
  generation: {max_new_tokens: 8, min_token_agreement: 0, max_mean_kl: 1000000}
%s`, model, model, targets)
}

// archRefusal is validate's refusal of a target for its architecture.
var archRefusal = regexp.MustCompile(`target "([^"]+)": \S+ cannot take a \S+ model \([^)]*\): (.*)`)

// archCell is one format's outcome for one architecture.
type archCell struct {
	status  string // refused, published, failed
	detail  string // the refusal's reason or the failed step and message
	delta   *float64
	kl      *float64
	top1    *float64
	decode  *float64
	seconds float64
}

func runArchs(ctx context.Context, e *env) ([]result, error) {
	if reason, err := e.toolchainsMissing(ctx, append(allTargetsToolchains, "openvino", "qnn")); err != nil || reason != "" {
		return []result{{skipped: reason}}, err
	}
	dir, err := e.workdir("archs")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	formats := targetNamesOf(archsTargets)
	matrix := map[string]map[string]archCell{}
	var out []result
	var llamaSeconds float64
	models := strings.Split(e.archsModels, ",")
	for _, model := range models {
		cells, wall, peak, err := archsOf(ctx, e, dir, model, formats)
		if err != nil {
			return out, fmt.Errorf("%s: %w", model, err)
		}
		matrix[model] = cells
		res := result{}
		res.add("model", model)
		for _, f := range formats {
			res.add(f, cells[f].status)
		}
		res.add("run_s", wall)
		res.add("peak_tree_rss_GiB", float64(peak)/(1<<30))
		if model == models[0] {
			llamaSeconds = wall.Seconds()
		}
		if llamaSeconds > 0 {
			res.ratio = wall.Seconds() / llamaSeconds
		}
		out = append(out, res)
	}
	if err := os.WriteFile(e.archsOut, []byte(archsMarkdown(models, formats, matrix)), 0o644); err != nil {
		return out, err
	}
	e.logf("archs: matrix written to %s", e.archsOut)
	return out, nil
}

func archsOf(ctx context.Context, e *env, dir, model string, formats []string) (map[string]archCell, time.Duration, int64, error) {
	cells := map[string]archCell{}
	recipe := filepath.Join(dir, model+".yaml")
	if err := os.WriteFile(recipe, []byte(archsRecipe(model, archsTargets)), 0o644); err != nil {
		return nil, 0, 0, err
	}
	v, err := run(ctx, command{argv: []string{e.edgepipe, "validate", recipe}, dir: dir, env: realToolEnv})
	if err != nil {
		return nil, 0, 0, err
	}
	for _, m := range archRefusal.FindAllStringSubmatch(string(v.stderr), -1) {
		cells[m[1]] = archCell{status: "refused", detail: m[2]}
	}
	var kept strings.Builder
	kept.WriteString("targets:\n")
	for _, l := range strings.Split(archsTargets, "\n")[1:] {
		name, _, ok := strings.Cut(strings.TrimSpace(l), ":")
		if ok && cells[name].status == "" {
			kept.WriteString(l + "\n")
		}
	}
	if err := os.WriteFile(recipe, []byte(archsRecipe(model, kept.String())), 0o644); err != nil {
		return nil, 0, 0, err
	}
	p, err := mustSucceed(ctx, command{argv: []string{e.edgepipe, "plan", "--json", recipe}, dir: dir, env: realToolEnv})
	if err != nil {
		return nil, 0, 0, err
	}
	var pl struct {
		Steps []struct {
			ID    string   `json:"id"`
			Needs []string `json:"needs"`
		} `json:"steps"`
	}
	if err := json.Unmarshal(p.stdout, &pl); err != nil {
		return nil, 0, 0, fmt.Errorf("plan --json: %w", err)
	}
	needs := map[string][]string{}
	for _, s := range pl.Steps {
		needs[s.ID] = s.Needs
	}
	// --force: every step runs, so its seconds are a conversion's, not a
	// cache hit's (toolchains and the built-in models stay cached).
	m, err := run(ctx, command{argv: []string{e.edgepipe, "run", "--json", "--force", "--keep-going", "-j", "2", "--out", filepath.Join(dir, "out-"+model), recipe},
		dir: dir, env: realToolEnv, sampleTreeRSS: true})
	if err != nil {
		return nil, 0, 0, err
	}
	e.logf("archs %s: run exited %d after %s", model, m.exitCode, m.wall.Round(time.Second))
	evs, err := events(m.stdout)
	if err != nil {
		return nil, 0, 0, err
	}
	seconds, failed := map[string]float64{}, map[string]string{}
	published, gates := map[string]string{}, map[string]string{}
	for _, ev := range evs {
		switch ev.Type {
		case event.Gate:
			gates[ev.Target] = firstLine(ev.Message)
		case event.Finished:
			seconds[ev.Step] = ev.Seconds
		case event.Failed:
			failed[ev.Step] = firstLine(ev.Message)
		case event.Published:
			published[ev.Target] = ev.Path
		}
	}
	for _, f := range formats {
		if cells[f].status == "refused" {
			continue
		}
		c := archCell{status: "failed"}
		for _, id := range ancestors(needs, "publish:"+f) {
			c.seconds += seconds[id]
			if msg, ok := failed[id]; ok && c.detail == "" {
				c.detail = id + ": " + msg
			}
		}
		if dir, ok := published[f]; ok {
			c.status = "published"
			readManifest(dir, &c)
		} else if c.detail == "" && gates[f] != "" {
			c.detail = "gate: " + gates[f]
		} else if c.detail == "" {
			c.detail = "not published (see the run's report)"
		}
		e.logf("archs %s: %s %s %s", model, f, c.status, c.detail)
		cells[f] = c
	}
	return cells, m.wall, max(m.peakTreeRSS, m.maxRSS), nil
}

// readManifest fills a published cell's figures from its manifest; a
// cell whose steps ran a stand-in (one found on PATH) measured nothing
// of the real tools and is failed.
func readManifest(dir string, c *archCell) {
	man, err := manifest.Read(dir)
	if err != nil {
		c.status, c.detail = "failed", err.Error()
		return
	}
	if pp := man.Metrics.Perplexity; pp != nil {
		c.delta = &pp.Delta
	}
	c.kl, c.top1 = man.Metrics.KLDivergence, man.Metrics.Top1Agreement
	if g := man.Metrics.Generation; g != nil {
		c.decode = g.DecodeMaxAbs
	}
	for _, s := range man.Steps {
		if s.StandIn {
			c.status, c.detail = "failed", s.ID+": ran a stand-in, not the real tool"
		}
	}
}

// ancestors is id and every step it needs, transitively.
func ancestors(needs map[string][]string, id string) []string {
	seen := map[string]bool{}
	var walk func(string)
	walk = func(s string) {
		if seen[s] {
			return
		}
		seen[s] = true
		for _, n := range needs[s] {
			walk(n)
		}
	}
	walk(id)
	out := make([]string, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// targetNamesOf lists a targets: block's names in order.
func targetNamesOf(block string) []string {
	var out []string
	for _, l := range strings.Split(block, "\n")[1:] {
		if name, _, ok := strings.Cut(strings.TrimSpace(l), ":"); ok && name != "" {
			out = append(out, name)
		}
	}
	return out
}

// archsMarkdown is the matrix as a Markdown table, a cell per
// architecture and format, and the reasons below it.
func archsMarkdown(models, formats []string, matrix map[string]map[string]archCell) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Measured %s (`go tool task bench -- archs`). Cells: refused at validate (reason below), "+
		"failed (the step, below), or the perplexity delta / KL / top-1 against the unconverted model, the decode check's max |logit difference| "+
		"(dec) where the format has one, and the seconds of the target's steps (every step run with --force).\n\n", time.Now().UTC().Format("2006-01-02"))
	b.WriteString("| model | " + strings.Join(formats, " | ") + " |\n|---|")
	b.WriteString(strings.Repeat("---|", len(formats)) + "\n")
	var notes []string
	for _, model := range models {
		cells, ok := matrix[model]
		if !ok {
			continue
		}
		b.WriteString("| " + model + " |")
		for _, f := range formats {
			c := cells[f]
			switch c.status {
			case "published":
				fmt.Fprintf(&b, " %s / %s / %s", num(c.delta, "%+.3g"), num(c.kl, "%.3g"), num(c.top1, "%.2f"))
				if c.decode != nil {
					fmt.Fprintf(&b, ", dec %.1e", *c.decode)
				}
				fmt.Fprintf(&b, ", %.0f s |", c.seconds)
			default:
				notes = append(notes, fmt.Sprintf("- %s, %s: %s", model, f, c.detail))
				fmt.Fprintf(&b, " %s (%d) |", c.status, len(notes))
			}
		}
		b.WriteString("\n")
	}
	if len(notes) > 0 {
		b.WriteString("\n" + strings.Join(numbered(notes), "\n") + "\n")
	}
	return b.String()
}

func num(v *float64, format string) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf(format, *v)
}

func numbered(notes []string) []string {
	out := make([]string, len(notes))
	for i, n := range notes {
		out[i] = fmt.Sprintf("%d. %s", i+1, strings.TrimPrefix(n, "- "))
	}
	return out
}

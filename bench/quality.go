package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/edgepipe/edgepipe/internal/event"
)

var qualityBench = benchmark{
	name: "quality",
	about: func(*env) string {
		return "every 4-bit format of each built-in model, scored on one evaluation (the same tokens: builtin:eval, 256-token chunks, 8 of them), " +
			"one BENCH line per model with each format's perplexity delta; ratio = the worst 4-bit delta / llama.cpp Q4_K_M with an importance matrix; " +
			"goal: every delta <= 2.0 (the default gate), moonshot ratio <= 2"
	},
	runAll: runQuality,
}

// qualityModels are the built-in models the quality benchmark scores.
var qualityModels = []string{"smollm2-135m", "gemma3-270m"}

// qualityReference is the target every other delta is compared with.
const qualityReference = "gguf-q4km-imatrix"

// qualityTargets are the 4-bit formats, each at the settings its recipe
// in recipes/ uses (the llmcompressor ones sized for a 2-core CPU, like
// recipes/gpu-server.yaml). qnn-w4a16 is reported but kept out of the
// ratio: ONNX Runtime's QDQ flow quantizes MatMul weights per tensor,
// which breaks LLMs (issue 14 moves Hexagon to Qualcomm's own backend).
// gguf-q4_0-imatrix is llama.cpp's plain Q4_0, a second llama.cpp peer
// beside the reference (issue 13 quotes it), not any family's default:
// reported, kept out of the goal and the ratio like the reference.
const qualityTargets = `targets:
  gguf-q4km-imatrix: {device: x86-laptop, format: gguf-q4_k_m, with: {imatrix: true}}
  gguf-q4_0-imatrix: {device: x86-laptop, format: gguf-q4_0, with: {imatrix: true}}
  onnx-int4: {device: x86-laptop, format: onnx-int4}
  coreml-int4: {device: apple-a18, format: coreml-int4, context: 4096}
  gptq-w4a16: {device: nvidia-a100, format: gptq-w4a16, with: {group_size: 32, num_calibration_samples: 32, max_seq_length: 512}}
  awq-w4a16: {device: nvidia-h100, format: awq-w4a16, with: {group_size: 32, num_calibration_samples: 16, max_seq_length: 128, n_grid: 10}}
  qnn-w4a16: {device: snapdragon-8-gen-3, format: qnn-w4a16, context: 256, with: {backend: ort-qdq}}
`

var notInRatio = []string{"qnn-w4a16", "gguf-q4_0-imatrix"}

func qualityRecipe(model string) string {
	return fmt.Sprintf(`edgepipe: 1
name: quality-%s
model: {source: builtin:%s}
data: {calibration: builtin:calibration, eval: builtin:eval}
quality: {perplexity: {context: 256, max_chunks: 8, warn_delta: 0.5, max_delta: 2.0}}
%s`, model, model, qualityTargets)
}

// gateLine is the gate event's message: "perplexity X vs baseline Y: delta +Z -> verdict".
var gateLine = regexp.MustCompile(`^perplexity ([0-9.eE+-]+) vs baseline ([0-9.eE+-]+): delta ([0-9.eE+-]+) -> (\w+)`)

func runQuality(ctx context.Context, e *env) ([]result, error) {
	if reason, err := e.toolchainsMissing(ctx, allTargetsToolchains); err != nil || reason != "" {
		return []result{{skipped: reason}}, err
	}
	dir, err := e.workdir("quality")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var out []result
	for _, model := range qualityModels {
		res, err := qualityOf(ctx, e, dir, model)
		if err != nil {
			return out, fmt.Errorf("%s: %w", model, err)
		}
		out = append(out, res)
	}
	return out, nil
}

func qualityOf(ctx context.Context, e *env, dir, model string) (result, error) {
	recipe := filepath.Join(dir, model+".yaml")
	if err := os.WriteFile(recipe, []byte(qualityRecipe(model)), 0o644); err != nil {
		return result{}, err
	}
	// The user's cache: a rerun of the benchmark scores from cached steps.
	m, err := run(ctx, command{argv: []string{e.edgepipe, "run", "--json", "--keep-going", "--out", filepath.Join(dir, "out-"+model), recipe},
		dir: dir, env: realToolEnv})
	if err != nil {
		return result{}, err
	}
	e.logf("quality %s: edgepipe run exited %d after %s", model, m.exitCode, m.wall.Round(time.Second))
	evs, err := events(m.stdout)
	if err != nil {
		return result{}, err
	}
	deltas := map[string]float64{}
	var baseline float64
	for _, ev := range evs {
		switch ev.Type {
		case event.Gate:
			g := gateLine.FindStringSubmatch(ev.Message)
			if g == nil {
				e.logf("quality %s: %s: %s", model, ev.Target, firstLine(ev.Message))
				continue
			}
			d, _ := strconv.ParseFloat(g[3], 64)
			deltas[ev.Target] = d
			if b, _ := strconv.ParseFloat(g[2], 64); !strings.HasPrefix(ev.Target, "gguf-") {
				baseline = b
			}
			e.logf("quality %s: %s ppl %s vs %s delta %s (%s)", model, ev.Target, g[1], g[2], g[3], g[4])
		case event.Failed:
			e.logf("quality %s: FAILED %s: %s", model, ev.Step, firstLine(ev.Message))
		}
	}
	res := result{}
	res.add("model", model)
	res.add("baseline_ppl", baseline)
	ref, ok := deltas[qualityReference]
	targets := targetNames()
	worst, worstName, passed, scored := 0.0, "", 0, 0
	for _, t := range targets {
		d, ok := deltas[t]
		if !ok {
			res.add(t, "not-scored")
			continue
		}
		res.add(t, d)
		if slices.Contains(notInRatio, t) || t == qualityReference {
			continue
		}
		scored++
		if d <= 2.0 {
			passed++
		}
		if worstName == "" || d > worst {
			worst, worstName = d, t
		}
	}
	res.add("worst", worstName)
	res.add("passed_2.0", fmt.Sprintf("%d/%d", passed, len(targets)-len(notInRatio)-1))
	res.add("goal", "every_delta<=2.0")
	res.add("met", scored == len(targets)-len(notInRatio)-1 && passed == scored)
	if !ok || ref <= 0 || worstName == "" {
		res.ratio = 0
		res.add("note", "no reference delta: ratio not computed")
		return res, nil
	}
	res.ratio = worst / ref
	return res, nil
}

// targetNames are the quality targets in the order the recipe lists them.
func targetNames() []string {
	var out []string
	for _, l := range strings.Split(qualityTargets, "\n")[1:] {
		if name, _, ok := strings.Cut(strings.TrimSpace(l), ":"); ok {
			out = append(out, name)
		}
	}
	return out
}

package plan_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/publish"
	"github.com/edgepipe/edgepipe/internal/recipe"
	"github.com/edgepipe/edgepipe/pipelines/shared"
	"github.com/edgepipe/edgepipe/steps"

	. "github.com/edgepipe/edgepipe/internal/plan"
)

// load parses, validates and expands a recipe written in dir as r.yaml
// (dir "" is a temp folder).
func load(t *testing.T, dir, src string) *Plan {
	t.Helper()
	p, err := expand(t, dir, src)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func expand(t *testing.T, dir, src string) (*Plan, error) {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	path := filepath.Join(dir, "r.yaml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := recipe.LoadBytes(path, []byte(src), Catalog{}, steps.Names())
	if err != nil {
		t.Fatalf("the recipe does not validate: %v", err)
	}
	return Expand(r)
}

// diags expands a recipe that should not expand and returns why.
func diags(t *testing.T, src string) recipe.Diagnostics {
	t.Helper()
	_, err := expand(t, "", src)
	var d recipe.Diagnostics
	if !errors.As(err, &d) {
		t.Fatalf("err = %v, want diagnostics", err)
	}
	return d
}

// graph spells each step as "id kind <- needs".
func graph(p *Plan) []string {
	var out []string
	for _, s := range p.Steps {
		out = append(out, fmt.Sprintf("%s %s <- %s", s.ID, s.Kind, strings.Join(s.Needs, " ")))
	}
	return out
}

func publishParams(t *testing.T, p *Plan, target string) map[string]any {
	t.Helper()
	s, ok := p.Step(PublishStepID(target))
	if !ok {
		t.Fatalf("no publish step for %s", target)
	}
	b, err := json.Marshal(s.Params)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// Each family's pipeline for one target: its steps, their kinds and what
// each needs, the publish needing the model first and then its checks.
func TestExpandPerFamily(t *testing.T) {
	for _, tc := range []struct {
		device, format string
		want           []string
	}{
		{"x86-laptop", "gguf-q4_k_m", []string{
			"source fetch <- ",
			"gguf-convert:f16 gguf-convert <- source",
			"perplexity:baseline perplexity <- gguf-convert:f16",
			"gguf-quantize:q4_k_m gguf-quantize <- gguf-convert:f16",
			"hf-perplexity:baseline hf-perplexity <- source",
			"compare-perplexity:f16 compare-perplexity <- perplexity:baseline hf-perplexity:baseline",
			"perplexity:q4_k_m perplexity <- gguf-quantize:q4_k_m perplexity:baseline",
			"contract:gguf-quantize:q4_k_m contract <- source gguf-quantize:q4_k_m",
			"publish:t publish <- gguf-quantize:q4_k_m perplexity:q4_k_m compare-perplexity:f16 contract:gguf-quantize:q4_k_m",
		}},
		{"x86-laptop", "gguf-f16", []string{
			"source fetch <- ",
			"gguf-convert:f16 gguf-convert <- source",
			"perplexity:baseline perplexity <- gguf-convert:f16",
			"hf-perplexity:baseline hf-perplexity <- source",
			"compare-perplexity:f16 compare-perplexity <- perplexity:baseline hf-perplexity:baseline",
			"perplexity:f16 perplexity <- gguf-convert:f16 perplexity:baseline",
			"contract:gguf-convert:f16 contract <- source gguf-convert:f16",
			"publish:t publish <- gguf-convert:f16 perplexity:f16 compare-perplexity:f16 contract:gguf-convert:f16",
		}},
		{"x86-laptop", "onnx-int4", []string{
			"source fetch <- ",
			"hf-perplexity:baseline hf-perplexity <- source",
			"onnx-export:fp32 onnx-export <- source",
			"onnx-quantize:int4 onnx-quantize <- onnx-export:fp32",
			"onnx-validate:int4 onnx-validate <- onnx-quantize:int4 source hf-perplexity:baseline",
			"generate:reference generate-reference <- source",
			"onnx-decode:int4 onnx-decode <- onnx-quantize:int4 generate:reference",
			"contract:onnx-quantize:int4 contract <- source onnx-quantize:int4",
			"publish:t publish <- onnx-quantize:int4 onnx-validate:int4 onnx-decode:int4 contract:onnx-quantize:int4",
		}},
		{"jetson-orin-nano-super", "gptq-w4a16", []string{
			"source fetch <- ",
			"hf-perplexity:baseline hf-perplexity <- source",
			"llmc-quantize:gptq-w4a16 llmc-quantize <- source",
			"llmc-perplexity:gptq-w4a16 llmc-perplexity <- llmc-quantize:gptq-w4a16 hf-perplexity:baseline",
			"generate:reference generate-reference <- source",
			"llmc-decode:gptq-w4a16 llmc-decode <- llmc-quantize:gptq-w4a16 generate:reference",
			"contract:llmc-quantize:gptq-w4a16 contract <- source llmc-quantize:gptq-w4a16",
			"publish:t publish <- llmc-quantize:gptq-w4a16 llmc-perplexity:gptq-w4a16 llmc-decode:gptq-w4a16 contract:llmc-quantize:gptq-w4a16",
		}},
		{"apple-m4", "coreml-int4", []string{
			"source fetch <- ",
			"coreml-convert:int4@c4096 coreml-convert <- source",
			"coreml-validate:int4@c4096 coreml-validate <- coreml-convert:int4@c4096 source",
			"contract:coreml-convert:int4@c4096 contract <- source coreml-convert:int4@c4096",
			"publish:t publish <- coreml-convert:int4@c4096 coreml-validate:int4@c4096 contract:coreml-convert:int4@c4096",
		}},
		{"webgpu-m3-max", "mlc-q4f16_1", []string{
			"source fetch <- ",
			"mlc-native-convert:q4f16_1 mlc-native-convert <- source",
			"mlc-native-config:q4f16_1@c4096 mlc-native-config <- mlc-native-convert:q4f16_1 source",
			"mlc-validate:mlc-native-config:q4f16_1@c4096 mlc-validate <- mlc-native-config:q4f16_1@c4096 source",
			"hf-perplexity:baseline hf-perplexity <- source",
			"mlc-gate:mlc-native-convert:q4f16_1 mlc-gate <- mlc-native-convert:q4f16_1 hf-perplexity:baseline source",
			"generate:reference generate-reference <- source",
			"mlc-decode:mlc-native-convert:q4f16_1 mlc-decode <- mlc-native-convert:q4f16_1 source generate:reference",
			"mlc-webgpu-check:mlc-gate:mlc-native-convert:q4f16_1 mlc-webgpu-check <- mlc-native-convert:q4f16_1 mlc-gate:mlc-native-convert:q4f16_1",
			"contract:mlc-native-config:q4f16_1@c4096 contract <- source mlc-native-config:q4f16_1@c4096",
			"publish:t publish <- mlc-native-config:q4f16_1@c4096 mlc-validate:mlc-native-config:q4f16_1@c4096 mlc-gate:mlc-native-convert:q4f16_1 mlc-decode:mlc-native-convert:q4f16_1 mlc-webgpu-check:mlc-gate:mlc-native-convert:q4f16_1 contract:mlc-native-config:q4f16_1@c4096",
		}},
		{"snapdragon-8-gen-3", "qnn-w8a16", []string{
			"source fetch <- ",
			"hf-perplexity:baseline hf-perplexity <- source",
			"onnx-export:fp32-prefill onnx-export <- source",
			"qnn-qdq:w8a16@s512+htp qnn-qdq <- onnx-export:fp32-prefill source",
			"qnn-htp:snapdragon-8-gen-3:w8a16@s512+htp qnn-htp <- qnn-qdq:w8a16@s512+htp source hf-perplexity:baseline",
			// The HTP step is the model and its own check.
			"contract:qnn-htp:snapdragon-8-gen-3:w8a16@s512+htp contract <- source qnn-htp:snapdragon-8-gen-3:w8a16@s512+htp",
			"publish:t publish <- qnn-htp:snapdragon-8-gen-3:w8a16@s512+htp qnn-htp:snapdragon-8-gen-3:w8a16@s512+htp contract:qnn-htp:snapdragon-8-gen-3:w8a16@s512+htp",
		}},
		{"jetson-orin-nano-super", "trtllm-int4", []string{
			"source fetch <- ",
			"modelopt-quantize:trtllm-int4 modelopt-quantize <- source",
			"trtllm-build:trtllm-int4@c4096/jetson-orin-nano-super trtllm-build <- modelopt-quantize:trtllm-int4",
			"contract:trtllm-build:trtllm-int4@c4096/jetson-orin-nano-super contract <- source trtllm-build:trtllm-int4@c4096/jetson-orin-nano-super",
			"publish:t publish <- trtllm-build:trtllm-int4@c4096/jetson-orin-nano-super modelopt-quantize:trtllm-int4 contract:trtllm-build:trtllm-int4@c4096/jetson-orin-nano-super",
		}},
		{"intel-lunar-lake", "openvino-int4", []string{
			"source fetch <- ",
			"hf-perplexity:baseline hf-perplexity <- source",
			"openvino-export:fp32 openvino-export <- source",
			"openvino-quantize:int4 openvino-quantize <- openvino-export:fp32",
			"openvino-validate:int4 openvino-validate <- openvino-quantize:int4 source hf-perplexity:baseline",
			"generate:reference generate-reference <- source",
			"openvino-decode:int4 openvino-decode <- openvino-quantize:int4 generate:reference",
			"contract:openvino-quantize:int4 contract <- source openvino-quantize:int4",
			"publish:t publish <- openvino-quantize:int4 openvino-validate:int4 openvino-decode:int4 contract:openvino-quantize:int4",
		}},
	} {
		t.Run(tc.format, func(t *testing.T) {
			p := load(t, "", fmt.Sprintf("edgepipe: 1\nname: m\nmodel: {source: ./model}\ntargets:\n  t: {device: %s, format: %s}\n", tc.device, tc.format))
			if got := graph(p); !slices.Equal(got, tc.want) {
				t.Errorf("graph:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
			for _, s := range p.Steps {
				if _, ok := steps.Lookup(s.Kind); !ok && s.Kind != "publish" {
					t.Errorf("%s: kind %s is not registered", s.ID, s.Kind)
				}
				if s.Params == nil {
					t.Errorf("%s has no params", s.ID)
				}
			}
		})
	}
}

// An image classifier: one reference evaluation for every target, one
// export that the int8 target quantizes and the fp32 target publishes.
func TestExpandVision(t *testing.T) {
	p := load(t, "", `edgepipe: 1
name: v
task: image-classification
model: {source: ./model}
targets:
  a: {device: x86-laptop, format: onnx-int8}
  b: {device: x86-laptop, format: onnx-fp32}
`)
	want := []string{
		"source fetch <- ",
		"vision-eval:reference vision-eval <- source",
		"vision-export:fp32 vision-export <- source",
		"vision-quantize:int8 vision-quantize <- vision-export:fp32",
		"vision-eval:int8 vision-eval <- vision-quantize:int8 vision-eval:reference",
		"publish:a publish <- vision-quantize:int8 vision-eval:int8",
		"vision-eval:fp32 vision-eval <- vision-export:fp32 vision-eval:reference",
		"publish:b publish <- vision-export:fp32 vision-eval:fp32",
	}
	if got := graph(p); !slices.Equal(got, want) {
		t.Errorf("graph:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	ref, _ := p.Step("vision-eval:reference")
	if !slices.Equal(ref.Targets, []string{"a", "b"}) {
		t.Errorf("the reference serves %v, want both targets", ref.Targets)
	}
}

// Targets share what they can: one download, one F16 GGUF and one
// llama.cpp baseline for every GGUF target, one transformers baseline for
// every target compared with it; each shared step lists the targets it
// serves, and each target keeps its own gate.
func TestExpandSharesSteps(t *testing.T) {
	p := load(t, "", `edgepipe: 1
name: m
model: {source: ./model}
targets:
  q4: {device: x86-laptop, format: gguf-q4_k_m}
  q8: {device: x86-laptop, format: gguf-q8_0, quality: {perplexity: {max_delta: 1}}}
  ox: {device: x86-laptop, format: onnx-int4}
  gp: {device: jetson-orin-nano-super, format: gptq-w4a16}
`)
	kinds := map[string]int{}
	seen := map[string]bool{}
	for _, s := range p.Steps {
		kinds[s.Kind]++
		if seen[s.ID] {
			t.Errorf("step %s planned twice", s.ID)
		}
		seen[s.ID] = true
	}
	for kind, n := range map[string]int{"fetch": 1, "gguf-convert": 1, "hf-perplexity": 1, "compare-perplexity": 1, "gguf-quantize": 2, "perplexity": 3, "publish": 4} {
		if kinds[kind] != n {
			t.Errorf("%d %s steps, want %d", kinds[kind], kind, n)
		}
	}
	for id, want := range map[string][]string{
		"gguf-convert:f16":       {"q4", "q8"},
		"perplexity:baseline":    {"q4", "q8"},
		"compare-perplexity:f16": {"q4", "q8"},
		"hf-perplexity:baseline": {"q4", "q8", "ox", "gp"},
		"gguf-quantize:q8_0":     {"q8"},
	} {
		s, _ := p.Step(id)
		if s == nil || !slices.Equal(s.Targets, want) {
			t.Errorf("%s serves %v, want %v", id, s.Targets, want)
		}
	}
	if s, _ := p.Step(SourceStepID); len(s.Targets) != 0 || s.Target != "" {
		t.Errorf("the source is a target's own step: %+v", s)
	}
	for target, maxDelta := range map[string]float64{"q4": 2, "q8": 1, "ox": 2, "gp": 2} {
		if got := publishParams(t, p, target)["max_delta"]; got != maxDelta {
			t.Errorf("publish:%s max_delta %v, want %v", target, got, maxDelta)
		}
	}
}

// with: on a generated step changes its params, typed as its kind's;
// a key the kind does not take is refused at the key with the closest
// name, and a value of the wrong type at the step.
func TestOverrideGeneratedStep(t *testing.T) {
	const head = "edgepipe: 1\nname: m\nmodel: {source: ./model}\ntargets:\n  t: {device: x86-laptop, format: gguf-q8_0}\nsteps:\n"
	base := load(t, "", head+"  other: {uses: run, with: {argv: [\"true\"]}}\n")
	before, _ := base.Step("compare-perplexity:f16")

	p := load(t, "", head+"  compare-perplexity:f16:\n    with: {max_rel_diff: 0.05}\n    timeout_s: 60\n")
	s, _ := p.Step("compare-perplexity:f16")
	if reflect.TypeOf(s.Params) != reflect.TypeOf(before.Params) {
		t.Errorf("params are %T, want the kind's %T", s.Params, before.Params)
	}
	b, _ := json.Marshal(s.Params)
	if !strings.Contains(string(b), `"max_rel_diff":0.05`) || s.TimeoutS != 60 {
		t.Errorf("params %s, timeout %v", b, s.TimeoutS)
	}
	if !slices.Equal(s.Needs, before.Needs) {
		t.Errorf("an override without needs changed them: %v", s.Needs)
	}

	d := diags(t, head+"  compare-perplexity:f16:\n    with:\n      max_rel_dif: 0.05\n")
	if len(d) != 1 || d[0].Pos.Line != 9 || d[0].Pos.Col != 7 ||
		!strings.Contains(d[0].Msg, `with: "max_rel_dif" is not a parameter of a compare-perplexity step`) ||
		!strings.HasPrefix(d[0].Hint, `did you mean "max_rel_diff"?`) {
		t.Errorf("unknown key: %v", d)
	}

	d = diags(t, head+"  compare-perplexity:f16:\n    with: {max_rel_diff: lots}\n")
	if len(d) != 1 || d[0].Pos.Line != 7 || !strings.Contains(d[0].Msg, "a value has the wrong type for a compare-perplexity step") {
		t.Errorf("wrong type: %v", d)
	}
}

// A publish step's settings are its target's: with: on it is refused at
// the first key written; needs and timeout_s may be added, and a step
// that needs a target needs its publish step.
func TestOverridePublishStep(t *testing.T) {
	const head = "edgepipe: 1\nname: m\nmodel: {source: ./model}\ntargets:\n  t: {device: x86-laptop, format: gguf-q8_0}\nsteps:\n"
	d := diags(t, head+"  publish:t:\n    timeout_s: 5\n    with:\n      min_tokens_per_s: 5\n      max_delta: 9\n")
	if len(d) != 1 || d[0].Pos.Line != 10 || d[0].Pos.Col != 7 ||
		!strings.Contains(d[0].Msg, "step publish:t: a publish step takes no with") || !strings.Contains(d[0].Hint, "targets.t") {
		t.Errorf("publish with: %v", d)
	}

	p := load(t, "", head+`  lint: {uses: run, with: {argv: ["true"]}}
  publish:t: {needs: [lint], timeout_s: 30}
  smoke: {uses: run, needs: [t], with: {argv: ["true"]}}
`)
	pub, _ := p.Step(PublishStepID("t"))
	if want := []string{"gguf-quantize:q8_0", "perplexity:q8_0", "compare-perplexity:f16", "contract:gguf-quantize:q8_0", "lint"}; !slices.Equal(pub.Needs, want) || pub.TimeoutS != 30 {
		t.Errorf("publish:t needs %v (want %v), timeout %v", pub.Needs, want, pub.TimeoutS)
	}
	smoke, _ := p.Step("smoke")
	if !slices.Equal(smoke.Needs, []string{"publish:t"}) || smoke.Kind != "run" {
		t.Errorf("smoke %+v", smoke)
	}
	if rp, ok := smoke.Params.(*shared.RunParams); !ok || !slices.Equal(rp.Argv, []string{"true"}) {
		t.Errorf("smoke params %#v", smoke.Params)
	}
}

// Needs that name nothing and cycles are refused before anything runs,
// at the step that has them, with the cycle's path.
func TestGraphErrors(t *testing.T) {
	const head = "edgepipe: 1\nname: m\nmodel: {source: ./model}\ntargets:\n  t: {device: x86-laptop, format: gguf-q8_0}\nsteps:\n"
	d := diags(t, head+"  smoke: {uses: run, needs: [gguf-convert:f32], with: {argv: [\"true\"]}}\n")
	if len(d) != 1 || d[0].Pos.Line != 7 || !strings.Contains(d[0].Msg, `step smoke needs "gguf-convert:f32", which is neither a target nor a step`) || d[0].Hint == "" {
		t.Errorf("unknown need: %v", d)
	}

	d = diags(t, head+`  a: {uses: run, needs: [b], with: {argv: ["true"]}}
  b: {uses: run, needs: [a], with: {argv: ["true"]}}
`)
	if len(d) != 1 || d[0].Pos.Line != 7 || !strings.Contains(d[0].Msg, "the steps form a cycle: a -> b -> a") {
		t.Errorf("cycle: %v", d)
	}

	// Through generated steps: the F16 conversion made to wait for a step
	// that needs the target built from it.
	d = diags(t, head+`  smoke: {uses: run, needs: [t], with: {argv: ["true"]}}
  gguf-convert:f16: {needs: [smoke]}
`)
	if len(d) != 1 || !strings.Contains(d[0].Msg, "the steps form a cycle: gguf-convert:f16 -> smoke -> publish:t -> gguf-quantize:q8_0 -> gguf-convert:f16") {
		t.Errorf("cycle through generated steps: %v", d)
	}
	// Reported where the recipe added the need that closes it.
	if d[0].Pos.Line != 8 {
		t.Errorf("cycle through generated steps reported at %d:%d, want line 8", d[0].Pos.Line, d[0].Pos.Col)
	}

	// A need that names nothing, added to a generated step.
	d = diags(t, head+"  gguf-convert:f16: {needs: [gguf-convert:f32]}\n")
	if len(d) != 1 || d[0].Pos.Line != 7 || !strings.Contains(d[0].Msg, `step gguf-convert:f16 needs "gguf-convert:f32"`) {
		t.Errorf("unknown need on a generated step: %v at %d:%d", d, d[0].Pos.Line, d[0].Pos.Col)
	}
}

// A kind the registry does not know is refused at expansion with the
// closest kind's name (validation refuses it first in a full load).
func TestUnknownKind(t *testing.T) {
	r, err := recipe.Parse("r.yaml", []byte("edgepipe: 1\nname: m\nmodel: {source: ./model}\ntargets:\n  t: {device: x86-laptop, format: gguf-q8_0}\nsteps:\n  smoke: {uses: rnu}\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Expand(r)
	var d recipe.Diagnostics
	if !errors.As(err, &d) || len(d) != 1 || d[0].Pos.Line != 7 || !strings.Contains(d[0].Msg, `unknown step kind "rnu"`) || !strings.HasPrefix(d[0].Hint, `did you mean "run"?`) {
		t.Errorf("unknown kind: %v", err)
	}
}

// A publish step's params carry the gate its family's task judges: the
// perplexity gate and the decode ceiling for text generation; accuracy
// by default, agreement when asked, for an image classifier.
func TestPublishParamsGates(t *testing.T) {
	text := load(t, "", "edgepipe: 1\nname: m\nmodel: {source: ./model}\nquality: {perplexity: {warn_delta: 0.3, max_delta: 1.5}}\ntargets:\n  t: {device: x86-laptop, format: gguf-q8_0}\n")
	pp := publishParams(t, text, "t")
	if pp["warn_delta"] != 0.3 || pp["max_delta"] != 1.5 || pp["decode_ceiling"] != true || pp["recipe"] != "m" || pp["format"] != "gguf-q8_0" {
		t.Errorf("text generation params %v", pp)
	}
	for _, k := range []string{"max_accuracy_drop", "min_agreement"} {
		if _, ok := pp[k]; ok {
			t.Errorf("text generation params have %s", k)
		}
	}

	vision := load(t, "", `edgepipe: 1
name: v
task: image-classification
model: {source: ./model}
targets:
  plain: {device: x86-laptop, format: onnx-int8}
  agree: {device: x86-laptop, format: onnx-int8, quality: {agreement: {min: 0.95}}}
  both: {device: x86-laptop, format: onnx-int8, quality: {agreement: {min: 0.95}, accuracy: {max_drop: 0.03}}}
`)
	for target, want := range map[string][2]any{
		"plain": {recipe.DefaultMaxAccuracyDrop, nil},
		"agree": {nil, 0.95},
		"both":  {0.03, 0.95},
	} {
		pp := publishParams(t, vision, target)
		if pp["max_accuracy_drop"] != want[0] || pp["min_agreement"] != want[1] {
			t.Errorf("%s: max_accuracy_drop %v min_agreement %v, want %v", target, pp["max_accuracy_drop"], pp["min_agreement"], want)
		}
		if _, ok := pp["decode_ceiling"]; ok {
			t.Errorf("%s: an image classifier has a decode ceiling", target)
		}
		if _, ok := pp["memory_fit"]; ok {
			t.Errorf("%s: an image classifier has a memory fit", target)
		}
	}
}

// The plan-time pre-flight joins the publish params: the memory fit
// whenever the model's shape is known (a built-in model, a local
// checkpoint), the budgets only when the target sets them.
func TestPublishParamsPreflight(t *testing.T) {
	p := load(t, "", `edgepipe: 1
name: m
model: {source: "builtin:smollm2-135m"}
targets:
  fast: {device: x86-laptop, format: gguf-q8_0, min_tokens_per_s: 5, max_memory_gb: 8}
  free: {device: x86-laptop, format: gguf-q8_0, context: 1024}
`)
	fast, _ := p.Step(PublishStepID("fast"))
	pp := fast.Params.(*publish.Params)
	if mf := pp.MemoryFit; mf == nil || mf.Device != "x86-laptop" || mf.TotalBytes <= 0 {
		t.Errorf("fast: memory fit %+v", mf)
	}
	b := pp.Budgets
	if b == nil || b.MinTokensPerS == nil || b.MinTokensPerS.Limit != 5 || b.MinTokensPerS.Predicted == nil || b.MinTokensPerS.Actual != nil ||
		b.MaxMemoryGB == nil || b.MaxMemoryGB.Limit != 8 || b.MaxFirstTokenMS != nil {
		t.Errorf("fast: budgets %+v", b)
	}
	free := publishParams(t, p, "free")
	if _, ok := free["budgets"]; ok {
		t.Errorf("free: budgets without any set: %v", free["budgets"])
	}
	if mf, ok := free["memory_fit"].(map[string]any); !ok || mf["context"] != float64(1024) {
		t.Errorf("free: memory fit %v, want one for its context of 1024", free["memory_fit"])
	}

	// A local checkpoint's shape is read from its config.json.
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "model"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := `{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 576, "intermediate_size": 1536,
 "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3, "vocab_size": 49152, "max_position_embeddings": 8192,
 "torch_dtype": "bfloat16", "tie_word_embeddings": true}`
	if err := os.WriteFile(filepath.Join(dir, "model", "config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	local := load(t, dir, "edgepipe: 1\nname: m\nmodel: {source: ./model}\ntargets:\n  t: {device: x86-laptop, format: gguf-q8_0}\n")
	if _, ok := publishParams(t, local, "t")["memory_fit"]; !ok {
		t.Error("a local checkpoint with a config.json has no memory fit")
	}

	// A source downloaded at run time has no shape at plan time.
	remote := load(t, "", "edgepipe: 1\nname: m\nmodel: {source: \"https://models.example.com/m.tar\"}\ntargets:\n  t: {device: x86-laptop, format: gguf-q8_0}\n")
	if mf, ok := publishParams(t, remote, "t")["memory_fit"]; ok {
		t.Errorf("a remote source has a memory fit %v", mf)
	}
}

// SetSource pins the source step to another source (the same model at a
// commit) without touching the recipe; Source reads it back.
func TestSetSource(t *testing.T) {
	p := load(t, "", "edgepipe: 1\nname: m\nmodel: {source: \"hf://org/model\"}\ntargets:\n  t: {device: x86-laptop, format: gguf-q8_0}\n")
	if p.Source() != "hf://org/model" {
		t.Fatalf("Source() = %q", p.Source())
	}
	p.SetSource("hf://org/model@0123456789abcdef0123456789abcdef01234567")
	if p.Source() != "hf://org/model@0123456789abcdef0123456789abcdef01234567" {
		t.Errorf("Source() = %q after SetSource", p.Source())
	}
	s, _ := p.Step(SourceStepID)
	if fp := s.Params.(*shared.FetchParams); fp.Source != p.Source() {
		t.Errorf("the source step fetches %q", fp.Source)
	}
	if p.Recipe.Model.Source != "hf://org/model" {
		t.Errorf("SetSource changed the recipe: %q", p.Recipe.Model.Source)
	}
}

package nvidia_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/recipe"
	_ "github.com/edgepipe/edgepipe/pipelines" // every family
	"github.com/edgepipe/edgepipe/pipelines/nvidia"
)

func load(t *testing.T, src string) (*plan.Plan, error) {
	t.Helper()
	r, err := recipe.LoadBytes("r.yaml", []byte(src), plan.Catalog{}, nil)
	if err != nil {
		return nil, err
	}
	return plan.Expand(r)
}

const nvidiaRecipe = `edgepipe: 1
name: thor
model: {source: builtin:smollm2-135m}
targets:
  thor-nvfp4: {device: jetson-thor, format: nvfp4, kv_dtype: fp8, context: 4096}
  thor-nvfp4-f16: {device: jetson-thor, format: nvfp4, context: 4096}
  nano-int4: {device: jetson-orin-nano-super, format: trtllm-int4, context: 2048}
  agx-int4: {device: jetson-agx-orin, format: trtllm-int4, context: 2048, kv_dtype: q8}
`

// One checkpoint per format and KV cache type, one engine per device and
// context built from it: NVFP4 by TensorRT Edge-LLM, INT4 by trtllm-build.
func TestExpandNvidia(t *testing.T) {
	p, err := load(t, nvidiaRecipe)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"source":                         "",
		"modelopt-quantize:nvfp4+kv=fp8": "source",
		"edgellm-build:nvfp4+kv=fp8@c4096/jetson-thor":                    "modelopt-quantize:nvfp4+kv=fp8",
		"modelopt-quantize:nvfp4":                                         "source",
		"edgellm-build:nvfp4@c4096/jetson-thor":                           "modelopt-quantize:nvfp4",
		"modelopt-quantize:trtllm-int4":                                   "source",
		"trtllm-build:trtllm-int4@c2048/jetson-orin-nano-super":           "modelopt-quantize:trtllm-int4",
		"modelopt-quantize:trtllm-int4+kv=int8":                           "source",
		"trtllm-build:trtllm-int4+kv=int8@c2048/jetson-agx-orin":          "modelopt-quantize:trtllm-int4+kv=int8",
		"contract:edgellm-build:nvfp4+kv=fp8@c4096/jetson-thor":           "source,edgellm-build:nvfp4+kv=fp8@c4096/jetson-thor",
		"publish:thor-nvfp4":                                              "edgellm-build:nvfp4+kv=fp8@c4096/jetson-thor,modelopt-quantize:nvfp4+kv=fp8,contract:edgellm-build:nvfp4+kv=fp8@c4096/jetson-thor",
		"contract:edgellm-build:nvfp4@c4096/jetson-thor":                  "source,edgellm-build:nvfp4@c4096/jetson-thor",
		"publish:thor-nvfp4-f16":                                          "edgellm-build:nvfp4@c4096/jetson-thor,modelopt-quantize:nvfp4,contract:edgellm-build:nvfp4@c4096/jetson-thor",
		"contract:trtllm-build:trtllm-int4@c2048/jetson-orin-nano-super":  "source,trtllm-build:trtllm-int4@c2048/jetson-orin-nano-super",
		"publish:nano-int4":                                               "trtllm-build:trtllm-int4@c2048/jetson-orin-nano-super,modelopt-quantize:trtllm-int4,contract:trtllm-build:trtllm-int4@c2048/jetson-orin-nano-super",
		"contract:trtllm-build:trtllm-int4+kv=int8@c2048/jetson-agx-orin": "source,trtllm-build:trtllm-int4+kv=int8@c2048/jetson-agx-orin",
		"publish:agx-int4":                                                "trtllm-build:trtllm-int4+kv=int8@c2048/jetson-agx-orin,modelopt-quantize:trtllm-int4+kv=int8,contract:trtllm-build:trtllm-int4+kv=int8@c2048/jetson-agx-orin",
	}
	if len(p.Steps) != len(want) {
		t.Errorf("%d steps, want %d", len(p.Steps), len(want))
	}
	for _, s := range p.Steps {
		needs, ok := want[s.ID]
		if !ok {
			t.Errorf("unexpected step %s", s.ID)
		} else if got := strings.Join(s.Needs, ","); got != needs {
			t.Errorf("%s needs %q, want %q", s.ID, got, needs)
		}
	}
	for id, want := range map[string]nvidia.QuantizeParams{
		"modelopt-quantize:nvfp4+kv=fp8":        {Format: "nvfp4", KVCache: "fp8", CalibSize: nvidia.DefaultCalibSize, CalibSeqLen: nvidia.DefaultCalibSeqLen},
		"modelopt-quantize:nvfp4":               {Format: "nvfp4", KVCache: "none", CalibSize: 64, CalibSeqLen: 512},
		"modelopt-quantize:trtllm-int4+kv=int8": {Format: "trtllm-int4", KVCache: "int8", CalibSize: 64, CalibSeqLen: 512},
	} {
		s, _ := p.Step(id)
		if q := s.Params.(*nvidia.QuantizeParams); *q != want || s.Data["calibration"] == "" {
			t.Errorf("%s params %+v, data %v", id, q, s.Data)
		}
	}
	s, _ := p.Step("trtllm-build:trtllm-int4@c2048/jetson-orin-nano-super")
	if b := s.Params.(*nvidia.BuildParams); *b != (nvidia.BuildParams{Context: 2048, Device: "jetson-orin-nano-super"}) {
		t.Errorf("build params %+v", b)
	}
}

// Without a GPU the plan says, before anything runs, which targets need
// one, at their format's position.
func TestGPUCheck(t *testing.T) {
	t.Setenv(nvidia.PretendNvidiaGPUEnv, "")
	if ok, found := nvidia.NvidiaGPU(); ok {
		t.Skipf("this host has an NVIDIA GPU (%s)", found)
	}
	p, err := load(t, nvidiaRecipe+"  cpu: {device: jetson-thor, format: gguf-q4_k_m}\n")
	if err != nil {
		t.Fatal(err)
	}
	diags := nvidia.NvidiaGPUCheck(p)
	if len(diags) != 4 {
		t.Fatalf("%d diagnostics, want one per NVIDIA target: %v", len(diags), diags)
	}
	if d := diags[0]; d.Pos.Line != 5 || !strings.Contains(d.Msg, `target "thor-nvfp4": nvfp4 needs an NVIDIA GPU to quantize and build its engine`) ||
		!strings.Contains(d.Hint, "--keep-going") {
		t.Errorf("diagnostic %+v", d)
	}
	t.Setenv(nvidia.PretendNvidiaGPUEnv, "1")
	if diags := nvidia.NvidiaGPUCheck(p); len(diags) != 0 {
		t.Errorf("with a GPU: %v", diags)
	}
}

func TestRefusedTargets(t *testing.T) {
	for _, tc := range []struct{ target, want string }{
		{"{device: jetson-orin-nano-super, format: nvfp4, kv_dtype: fp8}", `r.yaml:5:47: target "t": no runtime on jetson-orin-nano-super loads nvfp4`},
		{"{device: jetson-thor, format: nvfp4, kv_dtype: q8}", `target "t": nvfp4 on jetson-thor cannot hold a q8 KV cache`},
		{"{device: jetson-thor, format: trtllm-int4, kv_dtype: q4_0}", `targets.t.kv_dtype "q4_0" is not a KV-cache type edgepipe knows`},
		{"{device: jetson-thor, format: nvfp4, with: {calib_size: 8}}", "targets.t.with: format nvfp4 takes no options"},
	} {
		_, err := load(t, "edgepipe: 1\nname: thor\nmodel: {source: builtin:smollm2-135m}\ntargets:\n  t: "+tc.target+"\n")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.target, err, tc.want)
		}
	}
}

// On a host without a GPU the NVIDIA steps are refused, and so is what
// comes after them (the contract, the publish): their tools are neither
// installed nor locked here, so a run says "no GPU", not "install llama".
func TestRefusedStepsAndTheirToolsWithoutAGPU(t *testing.T) {
	t.Setenv(nvidia.PretendNvidiaGPUEnv, "")
	if ok, found := nvidia.NvidiaGPU(); ok {
		t.Skipf("this host has an NVIDIA GPU (%s)", found)
	}
	p, err := load(t, nvidiaRecipe)
	if err != nil {
		t.Fatal(err)
	}
	refused := p.Refused()
	for _, id := range []string{"modelopt-quantize:trtllm-int4", "trtllm-build:trtllm-int4@c2048/jetson-orin-nano-super",
		"contract:trtllm-build:trtllm-int4@c2048/jetson-orin-nano-super", "publish:nano-int4"} {
		if !refused[id] {
			t.Errorf("%s is not refused without a GPU", id)
		}
	}
	if refused[plan.SourceStepID] {
		t.Error("the source step is refused")
	}
	if tools := p.Tools(); slices.Contains(tools, "contract.py") {
		t.Errorf("tools %v: the contract of a model that cannot be built here needs no toolchain here", tools)
	}
	t.Setenv(nvidia.PretendNvidiaGPUEnv, "1")
	if refused := p.Refused(); len(refused) != 0 {
		t.Errorf("with a GPU: refused %v", refused)
	}
	if tools := p.Tools(); !slices.Contains(tools, "contract.py") {
		t.Errorf("with a GPU: tools %v lack contract.py", tools)
	}
}

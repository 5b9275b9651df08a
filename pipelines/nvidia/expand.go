package nvidia

import (
	"fmt"

	"github.com/edgepipe/edgepipe/internal/plan"

	"github.com/edgepipe/edgepipe/internal/recipe"

	"github.com/edgepipe/edgepipe/internal/catalog"
)

// expandNvidia: source -> modelopt-quantize (INT4 AWQ to a TensorRT-LLM
// checkpoint, or NVFP4 with the target's KV cache type to a Hugging Face
// checkpoint; it checks the checkpoint declares what was asked) -> the
// engine build (trtllm-build, or TensorRT Edge-LLM's export and llm_build).
// Every step needs an NVIDIA GPU; NvidiaGPUCheck says so at plan time.
func expandNvidia(r *recipe.Recipe, t *recipe.Target, f catalog.Format, add plan.AddFunc) (*plan.Step, []string) {
	n := plan.TargetContext(t)
	// Validation already refused what the device cannot hold (an FP8 KV
	// cache without FP8 tensor cores, INT8 for NVFP4, any 4-bit KV).
	kv := map[string]string{"fp8": "fp8", "q8": "int8"}[t.KVDtype]
	if kv == "" {
		kv = "none"
	}
	qid := "modelopt-quantize:" + f.Name
	if kv != "none" {
		qid += "+kv=" + kv
	}
	quant := add(&plan.Step{ID: qid, Kind: "modelopt-quantize", Needs: []string{plan.SourceStepID},
		Params: &QuantizeParams{Format: f.Name, KVCache: kv, CalibSize: DefaultCalibSize, CalibSeqLen: DefaultCalibSeqLen},
		Data:   plan.CalibrationData(r)}, t.Name)
	kind := "edgellm-build"
	if f.Family == "trtllm" {
		kind = "trtllm-build"
	}
	// An engine is built for the GPU it is built on, so each device gets
	// its own; the checkpoint is portable and shared.
	engine := add(&plan.Step{ID: fmt.Sprintf("%s:%s@c%d/%s", kind, quant.ID[len("modelopt-quantize:"):], n, t.Device), Kind: kind,
		Needs: []string{quant.ID}, Params: &BuildParams{Context: n, Device: t.Device}}, t.Name)
	return engine, []string{quant.ID}
}

// NvidiaGPUCheck reports, before anything runs, each target whose format
// needs an NVIDIA GPU when this host has none; the hint gives the ways out.
// Whether it is an error or a warning is the caller's choice: `run
// --keep-going` still builds every other target.
func NvidiaGPUCheck(p *plan.Plan) recipe.Diagnostics {
	ok, found := NvidiaGPU()
	if ok {
		return nil
	}
	var diags recipe.Diagnostics
	for _, t := range p.Recipe.Targets {
		f, err := catalog.ParseFormat(t.Format)
		if err != nil || !f.NeedsNVIDIAGPU {
			continue
		}
		what := "to quantize and build its engine"
		if f.Family == "tensorrt" { // calibrated and gated on the CPU; only the engine needs the GPU
			what = "to build its engine (its QDQ model and gate run here)"
		}
		diags = append(diags, recipe.Diagnostic{Pos: t.FormatPos,
			Msg: fmt.Sprintf("target %q: %s needs an NVIDIA GPU %s, and this host has none (%s)", t.Name, t.Format, what, found),
			Hint: "run it on a machine with an NVIDIA GPU (the Jetson itself for the engine), or run with --keep-going to build the other targets; " +
				"on an 8 GB Orin Nano, gguf-q4_k_m runs through llama.cpp and builds here"})
	}
	return diags
}

// Calibration of modelopt-quantize: 64 windows of 512 tokens, modelopt's
// example scripts' smallest.
const (
	DefaultCalibSize   = 64
	DefaultCalibSeqLen = 512
)

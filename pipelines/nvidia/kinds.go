package nvidia

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/edgepipe/edgepipe/internal/boundedfile"
	"github.com/edgepipe/edgepipe/pipelines/nvidia/report"
	"github.com/edgepipe/edgepipe/pipelines/shared"
	"github.com/edgepipe/edgepipe/steps"
)

// NVIDIA Jetson steps. Quantization is nvidia-modelopt's (mtq.quantize with
// NVFP4_DEFAULT_CFG or INT4_AWQ_CFG, an FP8 KV cache on request), exported
// with export_hf_checkpoint (NVFP4, read by TensorRT Edge-LLM and vLLM) or
// export_tensorrt_llm_checkpoint (INT4 AWQ, read by trtllm-build). Engines
// are built with the documented commands:
//
//	trtllm-build --checkpoint_dir CKPT --output_dir OUT --max_seq_len N --max_batch_size 1 --gemm_plugin auto
//	tensorrt-edgellm-export-llm --model_dir CKPT --output_dir OUT/onnx
//	llm_build --onnxDir OUT/onnx --engineDir OUT/engine --maxInputLen N
//
// All of them need an NVIDIA GPU, and an engine is built for the GPU it is
// built on: for a Jetson, run the engine step on the Jetson.
type (
	modeloptQuantize struct{}
	trtllmBuild      struct{}
	edgellmBuild     struct{}
)

// Tool names.
const (
	ToolModelOpt      = "modelopt_quantize.py"
	ToolTRTLLMBuild   = "trtllm-build"
	ToolEdgeLLMExport = "tensorrt-edgellm-export-llm"
	ToolEdgeLLMBuild  = "llm_build"
)

// PretendNvidiaGPUEnv, set to 1, makes edgepipe believe an NVIDIA GPU is
// present. It exists for the stand-in tests of the NVIDIA steps only; a
// real run with it set fails in the real tools.
const PretendNvidiaGPUEnv = "EDGEPIPE_TEST_PRETEND_NVIDIA_GPU"

// NvidiaGPU reports whether this host has an NVIDIA GPU the NVIDIA tools
// can use, and what it found: the driver's device node (/dev/nvidia0 on
// discrete GPUs), Jetson's L4T release file, or nvidia-smi listing a GPU.
func NvidiaGPU() (bool, string) {
	if os.Getenv(PretendNvidiaGPUEnv) == "1" {
		return true, PretendNvidiaGPUEnv + "=1 (tests only: no GPU was looked for)"
	}
	if _, err := os.Stat("/dev/nvidia0"); err == nil {
		return true, "/dev/nvidia0"
	}
	if _, err := os.Stat("/etc/nv_tegra_release"); err == nil {
		return true, "Jetson (/etc/nv_tegra_release)"
	}
	if p, err := exec.LookPath("nvidia-smi"); err == nil {
		out, err := exec.Command(p, "-L").Output()
		if err == nil && strings.Contains(string(out), "GPU ") {
			return true, strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
		}
	}
	return false, "no /dev/nvidia0, no /etc/nv_tegra_release, and no nvidia-smi that lists a GPU"
}

// requireNvidiaGPU fails a step before any work on a host without one.
func requireNvidiaGPU(sc *steps.Context, what string) error {
	if err := noNvidiaGPU(what); err != nil {
		return err
	}
	_, found := NvidiaGPU()
	sc.Result.SetFact("nvidia_gpu", found)
	return nil
}

// noNvidiaGPU is the refusal, with its fixes, on a host without a GPU.
func noNvidiaGPU(what string) error {
	if ok, found := NvidiaGPU(); !ok {
		return fmt.Errorf("%s needs an NVIDIA GPU and this host has none (%s): run this recipe on a machine with an NVIDIA GPU and driver (the Jetson itself for its engine), or leave the NVIDIA targets out, or use --keep-going to build the other targets", what, found)
	}
	return nil
}

// The NVIDIA kinds refuse a host without a GPU before their tools are
// looked up: "no GPU" is the reason to give, not "modelopt is not installed".
func (modeloptQuantize) RequireHost(p any) error {
	return noNvidiaGPU("nvidia-modelopt calibration for " + steps.ParamsOf[QuantizeParams](p).Format)
}
func (trtllmBuild) RequireHost(any) error { return noNvidiaGPU("trtllm-build") }
func (edgellmBuild) RequireHost(any) error {
	return noNvidiaGPU("TensorRT Edge-LLM export and engine build")
}

func (modeloptQuantize) Name() string { return "modelopt-quantize" }
func (modeloptQuantize) Version() int { return 1 }

// QuantizeParams are a modelopt-quantize step's.
type QuantizeParams struct {
	Format  string `json:"format"`
	KVCache string `json:"kv_cache"` // none, fp8, or int8 (trtllm-int4)
	// CalibSize windows of CalibSeqLen tokens calibrate it.
	CalibSize   int `json:"calib_size"`
	CalibSeqLen int `json:"calib_seq_len"`
}

// BuildParams are an engine build's: engines are built for one context
// and one device.
type BuildParams struct {
	Context int    `json:"context"`
	Device  string `json:"device"`
}

func (modeloptQuantize) NewParams() any { return &QuantizeParams{} }
func (trtllmBuild) NewParams() any      { return &BuildParams{} }
func (edgellmBuild) NewParams() any     { return &BuildParams{} }

func (modeloptQuantize) Tools(any) []string { return []string{ToolModelOpt} }
func (modeloptQuantize) Resources(any) steps.Resources {
	return steps.Resources{Cores: 2, MemoryMB: 6144, Host: steps.HostNeeds{NvidiaGPU: true}}
}

// modeloptFormats maps a format to modelopt's config and export.
var modeloptFormats = map[string]struct{ qformat, export string }{
	"nvfp4":       {"nvfp4", "hf"},
	"trtllm-int4": {"int4_awq", "trtllm"},
}

func (modeloptQuantize) Run(ctx context.Context, sc *steps.Context) error {
	p := steps.ParamsOf[QuantizeParams](sc.Params)
	format := p.Format
	f, ok := modeloptFormats[format]
	if !ok {
		return fmt.Errorf("modelopt-quantize: format %q is not one it makes (nvfp4, trtllm-int4)", format)
	}
	if err := requireNvidiaGPU(sc, "nvidia-modelopt calibration for "+format); err != nil {
		return err
	}
	src, err := sc.Input(shared.Fetch)
	if err != nil {
		return err
	}
	calib, err := sc.Data(steps.DataCalibration)
	if err != nil {
		return err
	}
	kv := p.KVCache
	args := []string{"--model", src.Dir, "--qformat", f.qformat, "--kv-cache", kv, "--export", f.export,
		"--calib", calib, "--calib-size", strconv.Itoa(p.CalibSize),
		"--seq-len", strconv.Itoa(p.CalibSeqLen), "--out", sc.Out}
	if err := sc.RunTool(ctx, ToolModelOpt, args...); err != nil {
		return err
	}
	var res report.ModelOpt
	if err := steps.ReadReport(ToolModelOpt, sc.LogPath, &res); err != nil {
		return err
	}
	sc.Result.SetFile("checkpoint", ".")
	sc.Result.SetFile("model", "config.json")
	sc.Result.SetFact("quant_algo", res.QuantAlgo)
	sc.Result.SetFact("kv_cache_quant_algo", res.KVCacheQuantAlgo)
	sc.Result.SetFact("export", res.Export)
	if res.ModelOpt != "" {
		sc.Result.SetFact("modelopt", res.ModelOpt)
	}
	// The quantization the checkpoint declares must be the one asked for.
	wantAlgo := map[string]string{"nvfp4": "NVFP4", "int4_awq": "W4A16_AWQ"}[f.qformat]
	wantKV := map[string]string{"fp8": "FP8", "int8": "INT8", "none": ""}[kv]
	sc.Result.Checks = append(sc.Result.Checks, steps.Check{Name: "checkpoint declares the quantization",
		Passed: res.QuantAlgo == wantAlgo && res.KVCacheQuantAlgo == wantKV,
		Detail: fmt.Sprintf("quant_algo %q (want %q), kv_cache_quant_algo %q (want %q)", res.QuantAlgo, wantAlgo, res.KVCacheQuantAlgo, wantKV)})
	return nil
}

func (trtllmBuild) Name() string       { return "trtllm-build" }
func (trtllmBuild) Version() int       { return 2 }
func (trtllmBuild) Tools(any) []string { return []string{ToolTRTLLMBuild} }
func (trtllmBuild) Resources(p any) steps.Resources {
	return steps.Resources{Cores: 2, MemoryMB: 8192, Host: buildHost(p)}
}

func (trtllmBuild) Run(ctx context.Context, sc *steps.Context) error {
	if err := requireNvidiaGPU(sc, "trtllm-build"); err != nil {
		return err
	}
	ckpt, err := sc.Input(modeloptQuantize{})
	if err != nil {
		return err
	}
	n := steps.ParamsOf[BuildParams](sc.Params).Context
	if err := sc.RunTool(ctx, ToolTRTLLMBuild, "--checkpoint_dir", ckpt.Dir, "--output_dir", sc.Out,
		"--max_seq_len", strconv.Itoa(n), "--max_batch_size", "1", "--gemm_plugin", "auto"); err != nil {
		return err
	}
	engines, _ := filepath.Glob(filepath.Join(sc.Out, "*.engine"))
	if len(engines) == 0 {
		return fmt.Errorf("trtllm-build wrote no *.engine into its output (see %s)", sc.LogPath)
	}
	sc.Result.SetFile("model", filepath.Base(engines[0]))
	sc.Result.SetFact("engine_for", "the GPU of the host that built it; build on the target device")
	// An engine holds no tokenizer: it ships beside it.
	_, err = shared.CopyTokenizerFiles(ckpt.Dir, sc.Out)
	return err
}

func (edgellmBuild) Name() string { return "edgellm-build" }
func (edgellmBuild) Version() int { return 2 }
func (edgellmBuild) Tools(any) []string {
	return []string{ToolEdgeLLMExport, ToolEdgeLLMBuild}
}
func (edgellmBuild) Resources(p any) steps.Resources {
	return steps.Resources{Cores: 2, MemoryMB: 8192, Host: buildHost(p)}
}

// buildHost: an engine is built on the GPU it runs on, so on the device.
func buildHost(p any) steps.HostNeeds {
	return steps.HostNeeds{NvidiaGPU: true, Device: steps.ParamsOf[BuildParams](p).Device}
}

func (edgellmBuild) Run(ctx context.Context, sc *steps.Context) error {
	if err := requireNvidiaGPU(sc, "TensorRT Edge-LLM export and engine build"); err != nil {
		return err
	}
	ckpt, err := sc.Input(modeloptQuantize{})
	if err != nil {
		return err
	}
	onnx := filepath.Join(sc.Out, "onnx")
	engine := filepath.Join(sc.Out, "engine")
	if err := sc.RunTool(ctx, ToolEdgeLLMExport, "--model_dir", ckpt.Dir, "--output_dir", onnx); err != nil {
		return err
	}
	n := steps.ParamsOf[BuildParams](sc.Params).Context
	if err := sc.RunTool(ctx, ToolEdgeLLMBuild, "--onnxDir", onnx, "--engineDir", engine,
		"--maxInputLen", strconv.Itoa(n)); err != nil {
		return err
	}
	engines, _ := filepath.Glob(filepath.Join(engine, "*.engine"))
	if len(engines) == 0 {
		return fmt.Errorf("llm_build wrote no *.engine into %s (see %s)", engine, sc.LogPath)
	}
	rel, _ := filepath.Rel(sc.Out, engines[0])
	sc.Result.SetFile("model", rel)
	// Keep the quantization the engine was built from on record.
	if b, err := boundedfile.Read(filepath.Join(ckpt.Dir, "hf_quant_config.json"), boundedfile.ModelJSONLimit); err == nil {
		var q struct {
			Quantization map[string]any `json:"quantization"`
		}
		if json.Unmarshal(b, &q) == nil {
			sc.Result.SetFact("quantization", fmt.Sprint(q.Quantization))
		}
	}
	sc.Result.SetFact("engine_for", "the GPU of the host that built it; build on the target device")
	_, err = shared.CopyTokenizerFiles(ckpt.Dir, sc.Out)
	return err
}

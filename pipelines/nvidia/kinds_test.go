package nvidia

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/steps"
)

// fakeTools is a steps.Context whose tools do not run: Exec records each
// argv, leaves the files a tool would write in Out, and appends to the
// step's log the report modelopt_quantize.py prints (its golden unless a
// test sets another).
type fakeTools struct {
	sc     *steps.Context
	argv   [][]string
	report string
	writes map[string][]byte
}

func newFake(t *testing.T, params any, inputs ...steps.Input) *fakeTools {
	t.Helper()
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join("python", "reports", "modelopt_quantize.json"))
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeTools{report: strings.TrimSpace(string(b)), writes: map[string][]byte{}}
	out := filepath.Join(dir, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "step.log")
	f.sc = &steps.Context{StepID: "step", Params: params, Inputs: inputs, Out: out, Scratch: dir,
		Tool: func(name string) ([]string, error) { return []string{"/opt/tools/" + name}, nil },
		Exec: func(_ context.Context, argv []string, _ []string) error {
			f.argv = append(f.argv, argv)
			for name, b := range f.writes {
				p := filepath.Join(out, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					return err
				}
				if err := os.WriteFile(p, b, 0o644); err != nil {
					return err
				}
			}
			lf, err := os.OpenFile(log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			if filepath.Base(argv[0]) == ToolModelOpt {
				fmt.Fprintf(lf, "quantization summary\n%s\n", f.report)
			}
			return lf.Close()
		},
		Data:    func(role string) (string, error) { return "/data/" + role + ".txt", nil },
		Result:  &steps.Result{},
		LogPath: log, Log: io.Discard, Threads: 2}
	return f
}

func TestModelOptArgvAndCheck(t *testing.T) {
	t.Setenv(PretendNvidiaGPUEnv, "1")
	p := &QuantizeParams{Format: "nvfp4", KVCache: "fp8", CalibSize: 64, CalibSeqLen: 512}
	src := steps.Input{StepID: "source", Kind: "fetch", Dir: "/models/src"}
	f := newFake(t, p, src)
	if err := (modeloptQuantize{}).Run(context.Background(), f.sc); err != nil {
		t.Fatal(err)
	}
	want := []string{"/opt/tools/modelopt_quantize.py", "--model", "/models/src", "--qformat", "nvfp4", "--kv-cache", "fp8", "--export", "hf",
		"--calib", "/data/calibration.txt", "--calib-size", "64", "--seq-len", "512", "--out", f.sc.Out}
	if !slices.Equal(f.argv[0], want) {
		t.Errorf("argv %q\nwant %q", f.argv[0], want)
	}
	r := f.sc.Result
	if len(r.Checks) != 1 || !r.Checks[0].Passed || r.Facts["quant_algo"] != "NVFP4" || r.Facts["kv_cache_quant_algo"] != "FP8" ||
		r.Facts["modelopt"] != "0.47.0" || r.Files["model"] != "config.json" || !strings.Contains(r.Facts["nvidia_gpu"], PretendNvidiaGPUEnv) {
		t.Errorf("result %+v", r)
	}

	// INT4 AWQ goes to a TensorRT-LLM checkpoint; the golden declares
	// NVFP4, which is not what was asked: the check fails.
	f = newFake(t, &QuantizeParams{Format: "trtllm-int4", KVCache: "int8", CalibSize: 64, CalibSeqLen: 512}, src)
	if err := (modeloptQuantize{}).Run(context.Background(), f.sc); err != nil {
		t.Fatal(err)
	}
	if a := strings.Join(f.argv[0], " "); !strings.Contains(a, "--qformat int4_awq --kv-cache int8 --export trtllm") {
		t.Errorf("trtllm argv %s", a)
	}
	if c := f.sc.Result.Checks[0]; c.Passed || c.Detail != `quant_algo "NVFP4" (want "W4A16_AWQ"), kv_cache_quant_algo "FP8" (want "INT8")` {
		t.Errorf("check %+v", c)
	}

	for _, tc := range []struct {
		p      *QuantizeParams
		report string
		want   string
	}{
		{&QuantizeParams{Format: "nvfp8"}, "", `format "nvfp8" is not one it makes`},
		{p, strings.Replace(f.report, `"group_size": 16, `, "", 1), "missing field(s) group_size"},
		{p, strings.Replace(f.report, `"export": "hf"`, `"export": "hf", "engine": "none"`, 1), `unknown field "engine"`},
	} {
		f := newFake(t, tc.p, src)
		if tc.report != "" {
			f.report = tc.report
		}
		if err := (modeloptQuantize{}).Run(context.Background(), f.sc); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.p, err, tc.want)
		}
	}
}

func checkpoint(t *testing.T) steps.Input {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "hf_quant_config.json"), []byte(`{"quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8"}}`), 0o644)
	return steps.Input{StepID: "modelopt-quantize:nvfp4+kv=fp8", Kind: "modelopt-quantize", Dir: dir}
}

func TestEngineBuilds(t *testing.T) {
	t.Setenv(PretendNvidiaGPUEnv, "1")
	ckpt := checkpoint(t)
	f := newFake(t, &BuildParams{Context: 2048, Device: "jetson-orin-nano-super"}, ckpt)
	f.writes["rank0.engine"] = []byte("engine")
	if err := (trtllmBuild{}).Run(context.Background(), f.sc); err != nil {
		t.Fatal(err)
	}
	want := []string{"/opt/tools/trtllm-build", "--checkpoint_dir", ckpt.Dir, "--output_dir", f.sc.Out, "--max_seq_len", "2048",
		"--max_batch_size", "1", "--gemm_plugin", "auto"}
	if !slices.Equal(f.argv[0], want) || f.sc.Result.Files["model"] != "rank0.engine" {
		t.Errorf("argv %q, files %v", f.argv[0], f.sc.Result.Files)
	}
	if err := (trtllmBuild{}).Run(context.Background(), newFake(t, &BuildParams{Context: 2048}, ckpt).sc); err == nil ||
		!strings.Contains(err.Error(), "trtllm-build wrote no *.engine") {
		t.Errorf("no engine: %v", err)
	}

	f = newFake(t, &BuildParams{Context: 4096, Device: "jetson-thor"}, ckpt)
	f.writes["engine/llm.engine"] = []byte("engine")
	if err := (edgellmBuild{}).Run(context.Background(), f.sc); err != nil {
		t.Fatal(err)
	}
	if len(f.argv) != 2 || !slices.Equal(f.argv[0], []string{"/opt/tools/tensorrt-edgellm-export-llm", "--model_dir", ckpt.Dir,
		"--output_dir", filepath.Join(f.sc.Out, "onnx")}) || !slices.Equal(f.argv[1], []string{"/opt/tools/llm_build",
		"--onnxDir", filepath.Join(f.sc.Out, "onnx"), "--engineDir", filepath.Join(f.sc.Out, "engine"), "--maxInputLen", "4096"}) {
		t.Errorf("argv %q", f.argv)
	}
	if f.sc.Result.Files["model"] != "engine/llm.engine" || !strings.Contains(f.sc.Result.Facts["quantization"], "NVFP4") {
		t.Errorf("result %+v", f.sc.Result)
	}
	if err := (edgellmBuild{}).Run(context.Background(), newFake(t, &BuildParams{Context: 4096}, ckpt).sc); err == nil ||
		!strings.Contains(err.Error(), "llm_build wrote no *.engine") {
		t.Errorf("no engine: %v", err)
	}
}

// Without a GPU every kind refuses before its tools are looked up.
func TestNoGPURefusals(t *testing.T) {
	t.Setenv(PretendNvidiaGPUEnv, "")
	if ok, found := NvidiaGPU(); ok {
		t.Skipf("this host has an NVIDIA GPU (%s)", found)
	}
	p := &QuantizeParams{Format: "nvfp4", KVCache: "fp8", CalibSize: 64, CalibSeqLen: 512}
	for name, err := range map[string]error{
		"modelopt host": modeloptQuantize{}.RequireHost(p),
		"trtllm host":   trtllmBuild{}.RequireHost(&BuildParams{}),
		"edgellm host":  edgellmBuild{}.RequireHost(&BuildParams{}),
		"modelopt run":  modeloptQuantize{}.Run(context.Background(), newFake(t, p).sc),
		"trtllm run":    trtllmBuild{}.Run(context.Background(), newFake(t, &BuildParams{}).sc),
	} {
		if err == nil || !strings.Contains(err.Error(), "needs an NVIDIA GPU and this host has none") || !strings.Contains(err.Error(), "--keep-going") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := (modeloptQuantize{}).RequireHost(p); !strings.Contains(err.Error(), "nvidia-modelopt calibration for nvfp4") {
		t.Errorf("the refusal does not name the format: %v", err)
	}
}

func TestResourcesNeedTheGPUAndDevice(t *testing.T) {
	if r := (modeloptQuantize{}).Resources(&QuantizeParams{}); !r.Host.NvidiaGPU || r.Host.Device != "" {
		t.Errorf("modelopt host needs %+v", r.Host)
	}
	for _, k := range []steps.Kind{trtllmBuild{}, edgellmBuild{}} {
		if r := k.Resources(&BuildParams{Device: "jetson-thor"}); !r.Host.NvidiaGPU || r.Host.Device != "jetson-thor" {
			t.Errorf("%s host needs %+v", k.Name(), r.Host)
		}
	}
}

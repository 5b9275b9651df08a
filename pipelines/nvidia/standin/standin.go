// Package standin holds the nvidia family's stand-ins (see internal/standin).
package standin

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/edgepipe/edgepipe/internal/standin"
	"github.com/edgepipe/edgepipe/pipelines/nvidia/report"
)

// NVIDIA stand-ins: they read the checkpoint and write the real layouts
// (hf_quant_config.json, a TensorRT-LLM checkpoint config, ONNX and
// *.engine files), but nothing in them was computed by ModelOpt or
// TensorRT: the weights are the input's bytes resampled, the engines say
// they are stand-ins.
func init() {
	standin.Tools["modelopt_quantize.py"] = modeloptQuantize
	standin.Tools["trtllm-build"] = trtllmBuild
	standin.Tools["tensorrt-edgellm-export-llm"] = edgellmExport
	standin.Tools["llm_build"] = edgellmBuild
}

func modeloptQuantize(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("modelopt_quantize", flag.ContinueOnError)
	model := fs.String("model", "", "")
	qformat := fs.String("qformat", "", "")
	kv := fs.String("kv-cache", "none", "")
	export := fs.String("export", "", "")
	calib := fs.String("calib", "", "")
	fs.Int("calib-size", 64, "")
	fs.Int("seq-len", 512, "")
	out := fs.String("out", "", "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	algo := map[string]string{"nvfp4": "NVFP4", "int4_awq": "W4A16_AWQ"}[*qformat]
	group := map[string]int{"nvfp4": 16, "int4_awq": 128}[*qformat]
	if algo == "" || *out == "" || (*export != "hf" && *export != "trtllm") {
		return errors.New("usage: modelopt_quantize.py --model DIR --qformat nvfp4|int4_awq --export hf|trtllm --calib TEXT --out OUT")
	}
	if _, err := os.Stat(*calib); err != nil {
		return fmt.Errorf("calibration text: %w", err)
	}
	cfg, err := os.ReadFile(filepath.Join(*model, "config.json"))
	if err != nil {
		return fmt.Errorf("no config.json in %s", *model)
	}
	shards, _ := filepath.Glob(filepath.Join(*model, "*.safetensors"))
	if len(shards) == 0 {
		return fmt.Errorf("no *.safetensors in %s", *model)
	}
	sort.Strings(shards)
	var payload []byte
	for _, s := range shards {
		b, err := os.ReadFile(s)
		if err != nil {
			return err
		}
		payload = append(payload, b...)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	kvAlgo := map[string]string{"fp8": "FP8", "int8": "INT8"}[*kv]
	quant := map[string]any{"quant_algo": algo, "kv_cache_quant_algo": nilIfEmpty(kvAlgo), "group_size": group}
	bits := 4 + 8/float64(group)
	if *export == "hf" {
		hq, _ := json.MarshalIndent(map[string]any{"producer": map[string]string{"name": "modelopt", "version": "stand-in"},
			"quantization": quant}, "", "  ")
		if err := os.WriteFile(filepath.Join(*out, "hf_quant_config.json"), append(hq, '\n'), 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(*out, "config.json"), cfg, 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(*out, "model.safetensors"), standin.Resample(payload, bits/32), 0o644); err != nil {
			return err
		}
	} else {
		var hf map[string]any
		_ = json.Unmarshal(cfg, &hf)
		tc, _ := json.MarshalIndent(map[string]any{"architecture": "LlamaForCausalLM", "dtype": "float16",
			"hidden_size": hf["hidden_size"], "num_hidden_layers": hf["num_hidden_layers"], "quantization": quant,
			"mapping": map[string]int{"world_size": 1, "tp_size": 1, "pp_size": 1}}, "", "  ")
		if err := os.WriteFile(filepath.Join(*out, "config.json"), append(tc, '\n'), 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(*out, "rank0.safetensors"), standin.Resample(payload, bits/32), 0o644); err != nil {
			return err
		}
	}
	return standin.PrintJSON(stdout, report.ModelOpt{QuantAlgo: algo, KVCacheQuantAlgo: kvAlgo, GroupSize: &group,
		Export: *export, ModelOpt: "stand-in"})
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// standinEngine writes a placeholder engine derived from the files of dir.
func standinEngine(dir, out, what string) error {
	var payload []byte
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	sort.Strings(files)
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil {
			payload = append(payload, b...)
		}
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	head := []byte("edgepipe stand-in " + what + " (not a TensorRT engine)\n")
	return os.WriteFile(out, append(head, standin.Resample(payload, 0.5)...), 0o644)
}

// trtllm-build --checkpoint_dir C --output_dir O [...]
func trtllmBuild(args []string, stdout, stderr io.Writer) error {
	pos, flags, err := standin.Args(args)
	if err != nil || len(pos) != 0 || flags["--checkpoint_dir"] == "" || flags["--output_dir"] == "" {
		return errors.New("usage: trtllm-build --checkpoint_dir CKPT --output_dir OUT [--max_seq_len N]")
	}
	if _, err := os.Stat(filepath.Join(flags["--checkpoint_dir"], "config.json")); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return standinEngine(flags["--checkpoint_dir"], filepath.Join(flags["--output_dir"], "rank0.engine"), "trtllm-build engine")
}

// tensorrt-edgellm-export-llm --model_dir C --output_dir O
func edgellmExport(args []string, stdout, stderr io.Writer) error {
	_, flags, err := standin.Args(args)
	if err != nil || flags["--model_dir"] == "" || flags["--output_dir"] == "" {
		return errors.New("usage: tensorrt-edgellm-export-llm --model_dir CKPT --output_dir OUT")
	}
	if _, err := os.Stat(filepath.Join(flags["--model_dir"], "hf_quant_config.json")); err != nil {
		return fmt.Errorf("not a ModelOpt checkpoint: %w", err)
	}
	return standinEngine(flags["--model_dir"], filepath.Join(flags["--output_dir"], "model.onnx"), "ONNX export")
}

// llm_build --onnxDir D --engineDir E --maxInputLen N
func edgellmBuild(args []string, stdout, stderr io.Writer) error {
	_, flags, err := standin.Args(args)
	if err != nil || flags["--onnxDir"] == "" || flags["--engineDir"] == "" {
		return errors.New("usage: llm_build --onnxDir ONNX --engineDir ENGINE --maxInputLen N")
	}
	return standinEngine(flags["--onnxDir"], filepath.Join(flags["--engineDir"], "llm.engine"), "Edge-LLM engine")
}

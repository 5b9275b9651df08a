"""Quantize a Hugging Face causal LM with NVIDIA ModelOpt and export the checkpoint.

    python modelopt_quantize.py --model DIR --qformat nvfp4|int4_awq [--kv-cache fp8|int8|none]
                                --export hf|trtllm --calib TEXT [--calib-size N] [--seq-len L]
                                --out OUT

  * nvfp4: mtq.NVFP4_DEFAULT_CFG (FP4 E2M1 weights and activations, an FP8 scale per 16);
    int4_awq: mtq.INT4_AWQ_CFG (weight-only INT4, AWQ, group 128);
  * --kv-cache fp8 adds FP8 quantizers on the attention K/V outputs (the KV cache), as
    modelopt's examples/llm_ptq/hf_ptq.py does with its FP8 KV config;
  * calibration runs the model forward on --calib-size windows of --seq-len tokens from
    the calibration text, on the GPU (modelopt's calibration is a CUDA path);
  * export: export_hf_checkpoint (config.json + safetensors + hf_quant_config.json, read by
    TensorRT Edge-LLM and vLLM) or export_tensorrt_llm_checkpoint (read by trtllm-build).

Its report is report() below (reports/modelopt_quantize.json).
"""

import argparse
import copy
import json
import os
import sys

import edgepipe_env
import edgepipe_report


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--qformat", choices=["nvfp4", "int4_awq"], required=True)
    ap.add_argument("--kv-cache", choices=["fp8", "int8", "none"], default="none")
    ap.add_argument("--export", choices=["hf", "trtllm"], required=True)
    ap.add_argument("--calib", required=True)
    ap.add_argument("--calib-size", type=int, default=64)
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    edgepipe_env.offline()
    import torch
    if not torch.cuda.is_available():
        print("modelopt_quantize: no CUDA device: ModelOpt calibration needs an NVIDIA GPU", file=sys.stderr)
        return 2
    import modelopt
    import modelopt.torch.quantization as mtq
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float16).cuda().eval()

    cfg = copy.deepcopy(mtq.NVFP4_DEFAULT_CFG if args.qformat == "nvfp4" else mtq.INT4_AWQ_CFG)
    if args.kv_cache != "none":
        # FP8 needs FP8 tensor cores (Hopper, Ada, Blackwell); INT8 is the
        # KV cache Ampere (Orin) engines take. Named as TensorRT-LLM's
        # quantize.py names them; an older ModelOpt without one says so.
        kv_cfg = getattr(mtq, args.kv_cache.upper() + "_KV_CFG", None)
        if kv_cfg is None:
            print(f"modelopt_quantize: this ModelOpt ({modelopt.__version__}) has no {args.kv_cache.upper()}_KV_CFG", file=sys.stderr)
            return 2
        cfg["quant_cfg"].update(copy.deepcopy(kv_cfg["quant_cfg"]))

    with open(args.calib, encoding="utf-8") as f:
        ids = tokenizer(f.read(), add_special_tokens=False).input_ids
    windows = [ids[i:i + args.seq_len] for i in range(0, len(ids) - args.seq_len + 1, args.seq_len)]
    windows = windows[:args.calib_size]
    if not windows:
        print(f"modelopt_quantize: the calibration text has fewer than {args.seq_len} tokens", file=sys.stderr)
        return 2

    def forward_loop(m):
        with torch.no_grad():
            for w in windows:
                m(torch.tensor([w], device="cuda"))

    model = mtq.quantize(model, cfg, forward_loop)
    mtq.print_quant_summary(model)

    if args.export == "hf":
        from modelopt.torch.export import export_hf_checkpoint
        export_hf_checkpoint(model, export_dir=args.out)
        tokenizer.save_pretrained(args.out)
        with open(os.path.join(args.out, "hf_quant_config.json"), encoding="utf-8") as f:
            q = json.load(f).get("quantization", {})
    else:
        from modelopt.torch.export import export_tensorrt_llm_checkpoint
        export_tensorrt_llm_checkpoint(model, "llama", torch.float16, export_dir=args.out, inference_tensor_parallel=1)
        with open(os.path.join(args.out, "config.json"), encoding="utf-8") as f:
            q = json.load(f).get("quantization", {})
    edgepipe_report.emit(report(q, args.export, getattr(modelopt, "__version__", "")))
    return 0


def report(q, export, version):
    """q: the quantization the exported checkpoint's config declares."""
    return {"quant_algo": q.get("quant_algo") or "", "kv_cache_quant_algo": q.get("kv_cache_quant_algo") or "",
            "group_size": q.get("group_size", 0), "export": export, "modelopt": version}


if __name__ == "__main__":
    sys.exit(main())

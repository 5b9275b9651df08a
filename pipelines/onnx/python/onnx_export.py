"""Export a Hugging Face causal LM to ONNX with optimum-onnx, on the CPU, in fp32.

    python onnx_export.py --model DIR --out DIR [--opset 17] [--no-past]

With a KV cache (default) the graph takes input_ids, attention_mask, position_ids and
past_key_values.N.key/value ([batch, kv_heads, past, head_dim]) and returns logits and
present.N.key/value: task text-generation-with-past. --no-past exports the plain
text-generation graph (input_ids, attention_mask, position_ids -> logits), the prefill
graph that QNN's static-shape flow starts from.

optimum-onnx also copies config.json, generation_config.json and the tokenizer into OUT,
so the folder is a complete ONNX model for ONNX Runtime GenAI-style loaders.

Its report is report() below (reports/onnx_export.json): inputs and outputs without the
per-layer past_key_values / present tensors.
"""

import argparse
import os
import sys

import edgepipe_env
import edgepipe_report


def describe(out_dir, model_file, kv_cache):
    import onnx

    m = onnx.load(os.path.join(out_dir, model_file), load_external_data=False)
    opset = max((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), default=0)
    files = sorted(os.listdir(out_dir))
    size = sum(os.path.getsize(os.path.join(out_dir, f)) for f in files)
    return report(model_file, opset,
                  [i.name for i in m.graph.input if not i.name.startswith("past_key_values.")],
                  [o.name for o in m.graph.output if not o.name.startswith("present.")],
                  sum(1 for i in m.graph.input if i.name.endswith(".key")), kv_cache, files, size)


def report(model, opset, inputs, outputs, kv_layers, kv_cache, files, size):
    return {"model": model, "opset": opset, "inputs": inputs, "outputs": outputs, "kv_layers": kv_layers,
            "kv_cache": kv_cache, "files": files, "bytes": size}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="Hugging Face checkpoint directory")
    ap.add_argument("--out", required=True, help="output directory (created)")
    ap.add_argument("--opset", type=int, default=18, help="ONNX opset (17 or newer; optimum recommends 18 for Llama)")
    ap.add_argument("--no-past", action="store_true", help="export without KV cache inputs and outputs")
    args = ap.parse_args()
    if args.opset < 17:
        print("onnx_export: --opset must be 17 or newer (LayerNormalization and the attention patterns ONNX Runtime fuses need it)",
              file=sys.stderr)
        return 2

    edgepipe_env.offline()

    import torch
    from optimum.exporters.onnx import main_export

    torch.set_num_threads(edgepipe_env.threads())
    task = "text-generation" if args.no_past else "text-generation-with-past"
    main_export(
        model_name_or_path=args.model,
        output=args.out,
        task=task,
        opset=args.opset,
        device="cpu",
        dtype="fp32",
        # Validation runs the graph against PyTorch on random inputs; onnx_validate.py does
        # that on real text and gates on it, so it is not repeated here.
        do_validation=False,
    )
    model_file = "model.onnx"
    if not os.path.exists(os.path.join(args.out, model_file)):
        print(f"onnx_export: optimum wrote no {model_file} in {args.out}: {sorted(os.listdir(args.out))}", file=sys.stderr)
        return 1
    edgepipe_report.emit(describe(args.out, model_file, not args.no_past))
    return 0


if __name__ == "__main__":
    sys.exit(main())

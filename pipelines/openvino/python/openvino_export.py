"""Export a Hugging Face causal LM to an OpenVINO IR with its KV cache (optimum-intel), uncompressed.

    python openvino_export.py --model DIR --out DIR [--trust-remote-code]

What `optimum-cli export openvino --task text-generation-with-past --weight-format fp32` does,
through its Python entry point (optimum.exporters.openvino.main_export): a stateful IR (the KV
cache lives in the model's state; inputs input_ids, attention_mask, position_ids, beam_idx),
the OpenVINO tokenizer and detokenizer beside it (openvino-tokenizers), and the checkpoint's
config and tokenizer files. No explicit quantization config is passed and optimum-intel only
compresses models over 1B parameters by default, so the weights stay at full precision (the
step checks the IR's constants, as the compression step does). Hugging Face is never contacted.

Its report is report() below (reports/openvino_export.json).
"""

import argparse
import sys

import edgepipe_env
import edgepipe_report
import edgepipe_tokenizer
import openvino_census


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--trust-remote-code", action="store_true")
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()
    edgepipe_env.offline()

    import torch
    from optimum.exporters.openvino import main_export

    torch.set_num_threads(edgepipe_env.threads(args.threads))
    main_export(model_name_or_path=args.model, output=args.out, task="text-generation-with-past",
                trust_remote_code=args.trust_remote_code, library_name="transformers", framework="pt",
                stateful=True, convert_tokenizer=True)
    # optimum loads the tokenizer with AutoTokenizer, which on transformers 5 drops parts of
    # tokenizer.json's pipeline (edgepipe_tokenizer): the OpenVINO tokenizer is converted
    # again from the faithful one, and the source's own tokenizer files are the artifact's.
    from optimum.exporters.openvino.convert import export_tokenizer
    export_tokenizer(edgepipe_tokenizer.load(args.model, args.trust_remote_code), args.out,
                     task="text-generation-with-past")
    restored = edgepipe_tokenizer.copy_files(args.model, args.out)
    print(f"openvino_export: the source's {', '.join(restored) or 'no'} tokenizer files kept", file=sys.stderr)
    ir = openvino_census.describe(args.out)
    if ir is None:
        return 1
    edgepipe_report.emit(report(ir))
    return 0


def report(ir):
    """ir: openvino_census.describe's reading of the IR."""
    return {"model": ir["model"], "files": ir["files"], "inputs": ir["inputs"], "outputs": ir["outputs"],
            "stateful": ir["stateful"], "weights": ir["weights"], "low_bit_fraction": ir["low_bit_fraction"],
            "versions": ir["versions"]}


if __name__ == "__main__":
    sys.exit(main())

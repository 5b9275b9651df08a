"""Export a Hugging Face causal LM to an OpenVINO IR with its KV cache (optimum-intel), uncompressed.

    python openvino_export.py --model DIR --out DIR [--trust-remote-code]

What `optimum-cli export openvino --task text-generation-with-past --weight-format fp32` does,
through its Python entry point (optimum.exporters.openvino.main_export): a stateful IR (the KV
cache lives in the model's state; inputs input_ids, attention_mask, position_ids, beam_idx),
the OpenVINO tokenizer and detokenizer beside it (openvino-tokenizers), and the checkpoint's
config and tokenizer files. No explicit quantization config is passed and optimum-intel only
compresses models over 1B parameters by default, so the weights stay at full precision (the
step checks the IR's constants, as the compression step does). Hugging Face is never contacted.

Prints one JSON line: {"model", "files", "inputs", "outputs", "stateful", "weights", "versions"}.
"""

import argparse
import json
import os
import sys

import openvino_census


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--trust-remote-code", action="store_true")
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()
    openvino_census.offline()

    import torch
    from optimum.exporters.openvino import main_export

    torch.set_num_threads(args.threads or int(os.environ.get("EDGEPIPE_THREADS") or 0) or os.cpu_count() or 1)
    main_export(model_name_or_path=args.model, output=args.out, task="text-generation-with-past",
                trust_remote_code=args.trust_remote_code, library_name="transformers", framework="pt",
                stateful=True, convert_tokenizer=True)
    out = openvino_census.describe(args.out)
    if out is None:
        return 1
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())

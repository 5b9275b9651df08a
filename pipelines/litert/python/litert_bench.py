"""Time a .tflite image classifier with the LiteRT interpreter: single inferences.

    python litert_bench.py --model model.tflite --config DIR --warmup 10 --runs 50 --batch 1 --threads N

The input is fixed: --batch images at config.json's input_size and in_channels, in the layout
the model's input tensor has, normalized with its mean and std, the same pixels every run; a
quantized input (int8 or uint8) is quantized once with the tensor's scale and zero point, as
litert_validate.py does, outside the clock. Each of the --warmup + --runs runs is set_tensor,
invoke and get_tensor of the output, timed alone (the caller drops the warm-up runs), on the
interpreter litert_validate.py gates with (ai_edge_litert, its default CPU delegates, --threads
threads). A batch other than the model's is asked for with resize_tensor_input; a model the
interpreter cannot resize fails.

Prints the bench protocol's JSON line (vision_benchlib.py).
"""

import sys

import vision_benchlib as vb

TOOL = "litert_bench"


def main():
    args = vb.parse_args(__doc__)
    cfg = vb.read_config(TOOL, args.config)
    import numpy as np
    import ai_edge_litert
    from ai_edge_litert.interpreter import Interpreter

    before = vb.rss_bytes()
    try:
        it = Interpreter(model_path=args.model, num_threads=args.threads)
        inp = it.get_input_details()[0]
        shape = [int(v) for v in inp["shape"]]
        if shape and shape[0] != args.batch:
            it.resize_tensor_input(inp["index"], [args.batch] + shape[1:])
        it.allocate_tensors()
    except (ValueError, RuntimeError) as e:
        vb.fail(TOOL, f"{args.model}: the LiteRT interpreter refused it at batch {args.batch} ({e})")
    inp, out = it.get_input_details()[0], it.get_output_details()[0]
    shape = [int(v) for v in inp["shape"]]
    axis = vb.channel_axis(TOOL, shape, cfg)
    x = vb.make_input(cfg, shape, axis)
    dtype = inp["dtype"]
    if np.issubdtype(dtype, np.integer):
        scale, zero = inp["quantization"]
        if scale == 0:
            vb.fail(TOOL, f"{args.model}: integer input without a quantization scale")
        info = np.iinfo(dtype)
        x = np.clip(np.rint(x / scale) + zero, info.min, info.max).astype(dtype)

    def run():
        it.set_tensor(inp["index"], x)
        it.invoke()
        it.get_tensor(out["index"])

    latency = vb.time_runs(run, args.warmup + args.runs)
    version = f"ai-edge-litert {ai_edge_litert.__version__} interpreter (default CPU delegates)"
    vb.emit(args, latency, shape, x.dtype, version, before)
    return 0


if __name__ == "__main__":
    sys.exit(main())

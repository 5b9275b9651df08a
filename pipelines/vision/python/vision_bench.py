"""Time an image classifier's ONNX model on ONNX Runtime's CPU provider: single inferences.

    python vision_bench.py --model model.onnx --config DIR --warmup 10 --runs 50 --batch 1 --threads N

The input is fixed: --batch images at config.json's input_size and in_channels (NCHW, float32,
normalized with its mean and std), the same pixels every run. Each of the --warmup + --runs
runs is one InferenceSession.run with the input already built, timed alone (the caller drops
the warm-up runs). The session is the one vision_eval.py gates with: CPUExecutionProvider,
--threads intra-op threads, sequential execution, default graph optimizations.

Prints the bench protocol's JSON line (vision_benchlib.py).
"""

import sys

import vision_benchlib as vb

TOOL = "vision_bench"


def main():
    args = vb.parse_args(__doc__)
    cfg = vb.read_config(TOOL, args.config)
    import numpy as np  # noqa: F401  (imported before the baseline, as the runtime needs it)
    import onnxruntime as ort

    before = vb.rss_bytes()
    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    try:
        sess = ort.InferenceSession(args.model, sess_options=so, providers=["CPUExecutionProvider"])
    except Exception as e:  # onnxruntime raises its own exception types
        vb.fail(TOOL, f"{args.model}: ONNX Runtime refused it ({e})")
    inp = sess.get_inputs()[0]
    shape = [args.batch, cfg["in_channels"], cfg["input_size"], cfg["input_size"]]
    declared = inp.shape
    if len(declared) != 4 or any(isinstance(d, int) and d != s for d, s in zip(declared[1:], shape[1:])):
        vb.fail(TOOL, f"the model's input {inp.name} {declared} does not take {shape} (config.json's size)")
    if isinstance(declared[0], int) and declared[0] != args.batch:
        vb.fail(TOOL, f"the model's batch is fixed at {declared[0]}: bench it with batch: {declared[0]}")
    x = vb.make_input(cfg, shape, 1)
    feed = {inp.name: x}
    latency = vb.time_runs(lambda: sess.run(None, feed), args.warmup + args.runs)
    version = f"onnxruntime {ort.__version__} {','.join(sess.get_providers())}"
    vb.emit(args, latency, shape, x.dtype, version, before)
    return 0


if __name__ == "__main__":
    sys.exit(main())

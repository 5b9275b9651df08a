"""Time an OpenVINO IR image classifier on OpenVINO's CPU plugin: single inferences.

    python openvino_vision_bench.py --model DIR/model.xml --config DIR --warmup 10 --runs 50 --batch 1 --threads N

The input is fixed: --batch images at config.json's input_size and in_channels (NCHW, float32,
normalized with its mean and std), the same pixels every run. Each of the --warmup + --runs
runs is one InferRequest.infer of the input already built, timed alone (the caller drops the
warm-up runs). The compiled model is the IR openvino_vision_eval.py gates, with its dynamic
batch axis fixed at --batch (a latency deployment's static shape; the weights and graph are the
same), the CPU plugin, f32 inference precision (int8 where FakeQuantize says, f32 rather than
the bf16 an AMX CPU would pick elsewhere) and --threads as INFERENCE_NUM_THREADS. The input is
shared with the request rather than copied into it, as ONNX Runtime reads a numpy feed in place.

Why the batch is fixed: OpenVINO's CPU plugin (2026.1 to 2026.4.1 at least) dies with SIGSEGV in
its JIT kernels on the first infer of an INT8 model with a dynamic input dimension at small
inputs on CPUs with AMX (openvinotoolkit/openvino#37577; a 32x32 digits IR at batch 1 crashes
every time on an AMX Xeon, and runs once its batch is static or oneDNN is held below AMX).

Prints the bench protocol's JSON line (vision_benchlib.py).
"""

import sys

import vision_benchlib as vb

TOOL = "openvino_vision_bench"


def main():
    args = vb.parse_args(__doc__)
    cfg = vb.read_config(TOOL, args.config)
    import numpy as np  # noqa: F401  (imported before the baseline, as the runtime needs it)
    import openvino as ov

    core = ov.Core()
    before = vb.rss_bytes()
    props = {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": args.threads}
    try:
        model = core.read_model(args.model)
    except RuntimeError as e:  # OpenVINO raises RuntimeError for an IR it cannot read or compile
        vb.fail(TOOL, f"{args.model}: OpenVINO could not read it ({e})")
    inp = model.input(0)
    declared = inp.get_partial_shape()
    shape = [args.batch, cfg["in_channels"], cfg["input_size"], cfg["input_size"]]
    dims = [d.get_length() if d.is_static else None for d in declared] if declared.rank.is_static else []
    if len(dims) != 4 or any(d is not None and d != s for d, s in zip(dims[1:], shape[1:])):
        vb.fail(TOOL, f"the model's input {inp.any_name} {declared} does not take {shape} (config.json's size)")
    if dims[0] is not None and dims[0] != args.batch:
        vb.fail(TOOL, f"the model's batch is fixed at {dims[0]}: bench it with batch: {dims[0]}")
    if None in dims:
        model.reshape({inp.any_name: shape})
    try:
        compiled = core.compile_model(model, "CPU", props)
    except RuntimeError as e:
        vb.fail(TOOL, f"{args.model}: OpenVINO's CPU plugin refused it ({e})")
    # What the plugin compiled with, in the log: a plugin that lowered the
    # threads or precision asked for would time something else.
    print(f"{TOOL}: compiled with INFERENCE_NUM_THREADS={compiled.get_property('INFERENCE_NUM_THREADS')}, "
          f"INFERENCE_PRECISION_HINT={compiled.get_property('INFERENCE_PRECISION_HINT').get_type_name()}, "
          f"PERFORMANCE_HINT={compiled.get_property('PERFORMANCE_HINT')}", file=sys.stderr)
    x = vb.make_input(cfg, shape, 1)
    req = compiled.create_infer_request()
    latency = vb.time_runs(lambda: req.infer({0: x}, share_inputs=True), args.warmup + args.runs)
    version = f"openvino {ov.get_version().split('-')[0]} CPU plugin (f32 inference precision, int8 where quantized)"
    vb.emit(args, latency, shape, x.dtype, version, before)
    return 0


if __name__ == "__main__":
    sys.exit(main())

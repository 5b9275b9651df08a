"""What the vision bench scripts share (vision_bench.py, litert_bench.py): the protocol's
arguments and JSON line, the fixed input, the timing loop and the memory figures.

The protocol (pipelines/vision/bench.go, BenchRuntime):

    TOOL --model FILE --config DIR --warmup W --runs R --batch B --threads T

builds one input of B images at the shape config.json (in DIR) and the model say, runs W+R
single inferences of it, each timed alone, and prints one JSON line, report() below
(reports/vision_benchlib.json): {"latency_ns" (W+R, warm-up first), "batch", "threads",
"input_shape", "input_dtype", "runtime_version", "peak_rss_bytes", "rss_before_load_bytes",
"rss_after_runs_bytes"}.

Memory, named for what it is:
  peak_rss_bytes         the process's peak resident set over its whole life (Python, numpy, the
                         runtime's libraries, the model, its arena): VmHWM of /proc/self/status on
                         Linux, not getrusage's ru_maxrss, which Linux carries over an execve from
                         the process that started this one (edgepipe's own peak, when the tool is
                         spawned with CLONE_VM as Go does); ru_maxrss where there is no /proc
  rss_before_load_bytes  the resident set once the runtime is imported, before the model loads
  rss_after_runs_bytes   the resident set after the last timed run
Only the standard library and numpy are imported here, so the scripts can measure what
their runtime adds.
"""

import argparse
import json
import os
import resource
import sys
import time

import edgepipe_report


def fail(tool, msg):
    print(f"{tool}: {msg}", file=sys.stderr)
    sys.exit(2)


def parse_args(doc):
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--model", required=True, help="the model file")
    ap.add_argument("--config", required=True, help="the classifier folder whose config.json gives the input shape")
    ap.add_argument("--warmup", type=int, default=10, help="runs timed and dropped by the caller")
    ap.add_argument("--runs", type=int, default=50, help="timed runs")
    ap.add_argument("--batch", type=int, default=1, help="images per inference")
    ap.add_argument("--threads", type=int, required=True, help="the runtime's threads")
    args = ap.parse_args()
    if args.warmup < 0 or args.runs < 1 or args.batch < 1 or args.threads < 1:
        ap.error("--warmup must be >= 0, --runs, --batch and --threads >= 1")
    return args


def read_config(tool, folder):
    path = os.path.join(folder, "config.json")
    try:
        with open(path, encoding="utf-8") as f:
            cfg = json.load(f)
        size, channels = int(cfg["input_size"]), int(cfg["in_channels"])
        mean, std = [float(v) for v in cfg["mean"]], [float(v) for v in cfg["std"]]
    except (OSError, ValueError, KeyError, TypeError) as e:
        fail(tool, f"{path}: not an image classifier's config.json (input_size, in_channels, mean, std): {e}")
    if size < 1 or channels < 1 or len(mean) != channels or len(std) != channels:
        fail(tool, f"{path}: input_size {size}, in_channels {channels}, mean {mean}, std {std} do not describe an input")
    return {"input_size": size, "in_channels": channels, "mean": mean, "std": std}


def rss_bytes():
    """The resident set now (Linux /proc/self/statm; elsewhere the peak so far)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return peak_rss_bytes()


def peak_rss_bytes():
    """This process's peak resident set: VmHWM (Linux), else ru_maxrss."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    value, unit = line.split()[1:3]
                    if unit == "kB":
                        return int(value) * 1024
    except (OSError, ValueError):
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # macOS: bytes; Linux: KiB


def channel_axis(tool, shape, cfg):
    """1 for NCHW, 3 for NHWC; fails when the model's input is neither at config.json's size."""
    c, s = cfg["in_channels"], cfg["input_size"]
    if len(shape) == 4 and shape[1] == c and shape[2] == s and shape[3] == s:
        return 1
    if len(shape) == 4 and shape[3] == c and shape[1] == s and shape[2] == s:
        return 3
    fail(tool, f"the model's input shape {shape} is not (B, {c}, {s}, {s}) or (B, {s}, {s}, {c}) as config.json says")


def make_input(cfg, shape, axis):
    """A fixed pseudo-random image batch, normalized as config.json says (float32). Latency does
    not depend on which pixels they are; the same seed gives every runtime the same images."""
    import numpy as np

    pixels = np.random.default_rng(0).integers(0, 256, size=shape).astype(np.float32) / 255.0
    view = [1, 1, 1, 1]
    view[axis] = cfg["in_channels"]
    mean = np.asarray(cfg["mean"], dtype=np.float32).reshape(view)
    std = np.asarray(cfg["std"], dtype=np.float32).reshape(view)
    return np.ascontiguousarray((pixels - mean) / std, dtype=np.float32)


def time_runs(run, n):
    """Wall-clock nanoseconds of each of n calls of run(), one by one."""
    out = []
    for _ in range(n):
        start = time.perf_counter_ns()
        run()
        out.append(time.perf_counter_ns() - start)
    return out


def emit(args, latency_ns, shape, dtype, version, before):
    """Print the protocol's report line, with the memory figures read now."""
    after = rss_bytes()
    edgepipe_report.emit(report(args, latency_ns, shape, dtype, version, max(peak_rss_bytes(), after, before), before, after))


def report(args, latency_ns, shape, dtype, version, peak, before, after):
    return {"latency_ns": latency_ns, "batch": args.batch, "threads": args.threads,
            "input_shape": [int(v) for v in shape], "input_dtype": str(dtype), "runtime_version": version,
            "peak_rss_bytes": peak, "rss_before_load_bytes": before, "rss_after_runs_bytes": after}

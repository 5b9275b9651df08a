"""Execute a Core ML ML program (.mlpackage) without Core ML: a small MIL interpreter.

Core ML's runtime exists only on Apple's systems. To check a converted image classifier on
Linux, this module reads the package's own program (the MIL protobuf inside the spec, the
weights from its blob file) and executes it op by op in PyTorch on the CPU:

    prog = Program.load("model.mlpackage")
    out = prog.run({"image": x})          # every named value, not only the outputs
    logits = out["logits"]

Only the ops the converted image classifiers use are implemented (see OPS). Any other op
stops with UnsupportedOp naming it: a program is never run with an op skipped or guessed.

Numerics: every op computes in float32; a value whose MIL type is fp16 is rounded to fp16
after the op that makes it (the program's stored precision), but fp16 arithmetic inside an
op (accumulation order, the Neural Engine's own rounding) is not reproduced. quantize and
dequantize follow the MIL definitions (iOS 17): q = clip(round(x / scale) + zero_point) with
round half to even, x = (q - zero_point) * scale.
"""

import os

import numpy as np

# MIL DataType enum values (coremltools/proto/MIL.proto) -> numpy dtypes.
_DTYPES = {
    1: np.bool_, 2: str,
    10: np.float16, 11: np.float32, 12: np.float64,
    21: np.int8, 22: np.int16, 23: np.int32, 24: np.int64,
    31: np.uint8, 32: np.uint16, 33: np.uint32, 34: np.uint64,
}


class UnsupportedOp(Exception):
    """The program uses an op (or an op's form) this interpreter does not implement."""


def _dtype(value_type):
    tt = value_type.tensorType
    if tt.dataType not in _DTYPES:
        raise UnsupportedOp(f"MIL data type {tt.dataType} is not one this interpreter reads")
    return _DTYPES[tt.dataType]


def _shape(value_type):
    tt = value_type.tensorType
    return tuple(int(d.constant.size) for d in tt.dimensions)


class Program:
    """The main function of a package's ML program, ready to run."""

    def __init__(self, spec, weights_dir):
        if spec.WhichOneof("Type") != "mlProgram":
            raise UnsupportedOp(f"the model is a {spec.WhichOneof('Type')}, not an ML program")
        fn = spec.mlProgram.functions.get("main")
        if fn is None:
            raise UnsupportedOp("the ML program has no main function")
        self.opset = fn.opset
        self.block = fn.block_specializations[fn.opset]
        self.inputs = [i.name for i in fn.inputs]
        self.outputs = list(self.block.outputs)
        self.weights_dir = weights_dir
        self._blobs = {}
        self.op_types = {}
        self.consts = {}
        for op in self.block.operations:
            self.op_types[op.type] = self.op_types.get(op.type, 0) + 1
            if op.blocks:
                raise UnsupportedOp(f"op {op.type} ({_out_name(op)}) has nested blocks (control flow)")
            if op.type not in OPS and op.type != "const":
                raise UnsupportedOp(f"op {op.type} ({_out_name(op)}) is not one this MIL interpreter implements "
                                    f"({', '.join(sorted(OPS))})")
        # Constants are read once; constexpr ops (weights Core ML decompresses when it loads
        # the model) too.
        for op in self.block.operations:
            if op.type == "const":
                self.consts[op.outputs[0].name] = self._value(op.attributes["val"])
            elif op.type.startswith("constexpr_"):
                self._execute(op, self.consts)

    @classmethod
    def load(cls, package):
        from coremltools.proto import Model_pb2

        import json

        with open(os.path.join(package, "Manifest.json"), encoding="utf-8") as f:
            manifest = json.load(f)
        root = manifest["itemInfoEntries"][manifest["rootModelIdentifier"]]["path"]
        spec = Model_pb2.Model()
        with open(os.path.join(package, "Data", root), "rb") as f:
            spec.ParseFromString(f.read())
        return cls(spec, os.path.join(package, "Data", os.path.dirname(root), "weights"))

    def _blob(self, name):
        if name not in self._blobs:
            from coremltools.libmilstoragepython import _BlobStorageReader

            path = name.replace("@model_path/weights", self.weights_dir)
            self._blobs[name] = _BlobStorageReader(path)
        return self._blobs[name]

    def _value(self, v):
        dt, shape = _dtype(v.type), _shape(v.type)
        kind = v.WhichOneof("value")
        if kind == "blobFileValue":
            r = self._blob(v.blobFileValue.fileName)
            off = v.blobFileValue.offset
            read = {np.float16: r.read_fp16_data, np.float32: r.read_float_data, np.int8: r.read_int8_data,
                    np.uint8: r.read_uint8_data, np.int16: r.read_int16_data, np.uint16: r.read_uint16_data,
                    np.int32: r.read_int32_data, np.uint32: r.read_uint32_data}.get(dt)
            if read is None:
                raise UnsupportedOp(f"blob values of dtype {dt} are not read by this interpreter")
            a = np.array(read(off))
            if dt is np.float16:  # the reader returns the raw uint16 bit patterns
                a = a.view(np.float16)
            return a.reshape(shape)
        if kind != "immediateValue":
            raise UnsupportedOp(f"a constant of kind {kind} is not read by this interpreter")
        t = v.immediateValue.tensor
        which = t.WhichOneof("value")
        if which == "floats":
            a = np.array(t.floats.values, dtype=np.float32)
        elif which == "ints":
            a = np.array(t.ints.values, dtype=np.int64)
        elif which == "longInts":
            a = np.array(t.longInts.values, dtype=np.int64)
        elif which == "bools":
            a = np.array(t.bools.values, dtype=np.bool_)
        elif which == "doubles":
            a = np.array(t.doubles.values, dtype=np.float64)
        elif which == "strings":
            vals = list(t.strings.values)
            return vals[0] if not shape and vals else vals
        elif which == "bytes":
            a = np.frombuffer(t.bytes.values, dtype=dt)
        else:
            raise UnsupportedOp(f"an immediate tensor of kind {which} is not read by this interpreter")
        if dt is not str:
            a = a.astype(dt)
        return a.reshape(shape) if shape else (a.reshape(()) if a.size == 1 else a)

    def _execute(self, op, env):
        """Runs op on the values in env and stores its outputs there. An op's arguments are
        its inputs (names or immediate values) and its attributes (coremltools serializes
        the constant arguments of constexpr ops as attributes)."""
        args = {k: self._value(v) for k, v in op.attributes.items() if k != "name"}
        for k, arg in op.inputs.items():
            vals = []
            for b in arg.arguments:
                if b.WhichOneof("binding") == "name":
                    vals.append(env[b.name])
                else:
                    vals.append(self._value(b.value))
            args[k] = vals if len(vals) != 1 or k == "values" else vals[0]
        out = OPS[op.type](args)
        outs = out if isinstance(out, tuple) else (out,)
        for o, val in zip(op.outputs, outs):
            env[o.name] = _store(val, _dtype(o.type))

    def run(self, feeds, keep=True):
        """Runs the program on feeds (input name -> array); returns every value by name (keep)
        or only the outputs."""
        import torch

        env = dict(self.consts)
        for name in self.inputs:
            if name not in feeds:
                raise ValueError(f"the program needs input {name!r}")
            env[name] = feeds[name]
        with torch.no_grad():
            for op in self.block.operations:
                if op.type != "const" and not op.type.startswith("constexpr_"):
                    self._execute(op, env)
        if keep:
            return env
        return {k: env[k] for k in self.outputs}


def _out_name(op):
    return op.outputs[0].name if op.outputs else "?"


def _store(val, dt):
    """The value as the program stores it: fp16 values are rounded to fp16."""
    import torch

    if isinstance(val, torch.Tensor):
        val = val.numpy()
    val = np.asarray(val)
    if dt is np.float16 or dt is np.float32:
        return val.astype(dt)
    return val.astype(dt) if dt is not str else val


def _t(x):
    import torch

    a = np.asarray(x)
    if a.dtype.kind == "f":
        a = a.astype(np.float32)
    return torch.from_numpy(np.ascontiguousarray(a))


def _f(x):
    return np.asarray(x).astype(np.float32)


def _axis_shape(param, ndim, axis):
    """A per-channel quantization parameter shaped to broadcast along axis."""
    p = _f(param)
    if p.ndim == 0:
        return p
    shape = [1] * ndim
    shape[axis] = p.size
    return p.reshape(shape)


def _conv(a):
    import torch.nn.functional as F

    x, w = _t(a["x"]), _t(a["weight"])
    nd = x.ndim - 2
    if nd != 2:
        raise UnsupportedOp(f"conv over {nd} spatial axes (only 2-D is implemented)")
    strides = [int(s) for s in np.atleast_1d(a.get("strides", [1, 1]))]
    dil = [int(s) for s in np.atleast_1d(a.get("dilations", [1, 1]))]
    groups = int(a.get("groups", 1))
    pad_type = str(a.get("pad_type", "valid"))
    if pad_type == "custom":
        p = [int(v) for v in np.atleast_1d(a["pad"])]  # [top, bottom, left, right]
    elif pad_type == "valid":
        p = [0, 0, 0, 0]
    elif pad_type in ("same", "same_lower"):
        p = []
        for i in range(2):
            size, k = x.shape[2 + i], (w.shape[2 + i] - 1) * dil[i] + 1
            out = -(-size // strides[i])
            total = max((out - 1) * strides[i] + k - size, 0)
            lo = total // 2 if pad_type == "same" else total - total // 2
            p += [lo, total - lo]
    else:
        raise UnsupportedOp(f"conv pad_type {pad_type!r}")
    x = F.pad(x, (p[2], p[3], p[0], p[1]))
    b = _t(a["bias"]) if a.get("bias") is not None else None
    return F.conv2d(x, w, b, strides, 0, dil, groups)


def _linear(a):
    import torch.nn.functional as F

    b = _t(a["bias"]) if a.get("bias") is not None else None
    return F.linear(_t(a["x"]), _t(a["weight"]), b)


def _pool(kind):
    def run(a):
        import torch.nn.functional as F

        x = _t(a["x"])
        k = [int(v) for v in np.atleast_1d(a["kernel_sizes"])]
        s = [int(v) for v in np.atleast_1d(a["strides"])]
        pad_type = str(a.get("pad_type", "valid"))
        if pad_type != "valid" and not (pad_type == "custom" and not np.any(np.asarray(a["pad"]))):
            raise UnsupportedOp(f"{kind} pooling with pad_type {pad_type!r}")
        if bool(a.get("ceil_mode", False)):
            raise UnsupportedOp(f"{kind} pooling with ceil_mode")
        if kind == "max":
            return F.max_pool2d(x, k, s)
        return F.avg_pool2d(x, k, s)
    return run


def _reduce(fn):
    def run(a):
        x = _t(a["x"])
        axes = a.get("axes")
        keep = bool(a.get("keep_dims", False))
        if axes is None:
            return fn(x, list(range(x.ndim)), keep)
        return fn(x, [int(v) for v in np.atleast_1d(axes)], keep)
    return run


def _quantize(a):
    x = _f(a["input"])
    dt = {"int8": np.int8, "uint8": np.uint8}.get(str(a["output_dtype"]))
    if dt is None:
        raise UnsupportedOp(f"quantize to {a['output_dtype']}")
    axis = int(a["axis"]) if a.get("axis") is not None else 0
    scale = _axis_shape(a["scale"], x.ndim, axis % max(x.ndim, 1))
    zp = _axis_shape(a["zero_point"], x.ndim, axis % max(x.ndim, 1)) if a.get("zero_point") is not None else 0
    info = np.iinfo(dt)
    return np.clip(np.round(x / scale) + zp, info.min, info.max).astype(dt)


def _dequantize(a):
    q = np.asarray(a["input"])
    axis = int(a["axis"]) if a.get("axis") is not None else 0
    scale = _axis_shape(a["scale"], q.ndim, axis % max(q.ndim, 1))
    zp = _axis_shape(a["zero_point"], q.ndim, axis % max(q.ndim, 1)) if a.get("zero_point") is not None else 0
    return (q.astype(np.float32) - zp) * scale


def _affine_dequantize(a):
    q = np.asarray(a["quantized_data"])
    axis = int(a["axis"])
    scale = _axis_shape(a["scale"], q.ndim, axis)
    zp = _axis_shape(a["zero_point"], q.ndim, axis)
    return (q.astype(np.float32) - zp) * scale


def _blockwise_shift_scale(a):
    """iOS 18's constexpr_blockwise_shift_scale: data (ints) -> scale * (data - offset), each
    scale/offset entry covering a block of data along every axis."""
    d = np.asarray(a["data"]).astype(np.float32)
    scale = _f(a["scale"])
    if scale.ndim != d.ndim:
        raise UnsupportedOp("constexpr_blockwise_shift_scale with a scale of another rank than its data")
    reps = [ds // ss for ds, ss in zip(d.shape, scale.shape)]
    off = a.get("offset")
    if off is not None:
        d = d - _expand(_f(off), reps)
    return d * _expand(scale, reps)


def _expand(p, reps):
    for ax, r in enumerate(reps):
        if r > 1:
            p = np.repeat(p, r, axis=ax)
    return p


def _pad(a):
    """MIL pad: pad holds [before, after] for each of the last len(pad) / 2 axes, outermost
    first (torch's F.pad wants the innermost axis first)."""
    import torch.nn.functional as F

    x = _t(a["x"])
    p = [int(v) for v in np.atleast_1d(a["pad"])]
    mode = str(a.get("mode", "constant"))
    if mode not in ("constant", "reflect", "replicate"):
        raise UnsupportedOp(f"pad mode {mode!r}")
    pairs = [p[i:i + 2] for i in range(0, len(p), 2)]
    flat = [v for pair in reversed(pairs) for v in pair]
    if mode == "constant":
        return F.pad(x, flat, mode="constant", value=float(a.get("constant_val", 0.0)))
    return F.pad(x, flat, mode=mode)


def _binary(fn):
    def run(a):
        return fn(_t(a["x"]), _t(a["y"]))
    return run


def _unary(fn):
    def run(a):
        return fn(_t(a["x"]))
    return run


def _clip(a):
    import torch

    return torch.clamp(_t(a["x"]), float(a["alpha"]), float(a["beta"]))


def _cast(a):
    dt = {"fp16": np.float16, "fp32": np.float32, "int32": np.int32, "bool": np.bool_}.get(str(a["dtype"]))
    if dt is None:
        raise UnsupportedOp(f"cast to {a['dtype']}")
    return np.asarray(a["x"]).astype(dt)


def _reshape(a):
    return _t(a["x"]).reshape([int(v) for v in np.atleast_1d(a["shape"])])


def _concat(a):
    import torch

    return torch.cat([_t(v) for v in a["values"]], dim=int(a["axis"]))


def _softmax(a):
    import torch

    return torch.softmax(_t(a["x"]), dim=int(a.get("axis", -1)))


def _build_ops():
    import torch

    return {
        "conv": _conv,
        "linear": _linear,
        "matmul": lambda a: torch.matmul(_t(a["x"]).transpose(-1, -2) if bool(a.get("transpose_x", False)) else _t(a["x"]),
                                         _t(a["y"]).transpose(-1, -2) if bool(a.get("transpose_y", False)) else _t(a["y"])),
        "add": _binary(torch.add),
        "sub": _binary(torch.sub),
        "mul": _binary(torch.mul),
        "real_div": _binary(torch.div),
        "maximum": _binary(torch.maximum),
        "minimum": _binary(torch.minimum),
        "relu": _unary(torch.relu),
        "relu6": _unary(lambda x: torch.clamp(x, 0, 6)),
        "sigmoid": _unary(torch.sigmoid),
        "silu": _unary(torch.nn.functional.silu),
        "sigmoid_hard": lambda a: torch.clamp(float(a["alpha"]) * _t(a["x"]) + float(a["beta"]), 0, 1),
        "thresholded_relu": lambda a: torch.where(_t(a["x"]) >= float(a["alpha"]), _t(a["x"]), torch.zeros(())),
        "clip": _clip,
        "avg_pool": _pool("avg"),
        "max_pool": _pool("max"),
        "reduce_mean": _reduce(lambda x, axes, keep: x.mean(dim=axes, keepdim=keep)),
        "reduce_max": _reduce(lambda x, axes, keep: x.amax(dim=axes, keepdim=keep)),
        "reshape": _reshape,
        "squeeze": lambda a: _t(a["x"]).squeeze() if a.get("axes") is None else
        _t(a["x"]).reshape([d for i, d in enumerate(np.shape(a["x"]))
                            if i not in {int(v) % np.ndim(a["x"]) for v in np.atleast_1d(a["axes"])}]),
        "expand_dims": lambda a: _t(a["x"]).reshape(_expand_dims_shape(np.shape(a["x"]), a["axes"])),
        "transpose": lambda a: _t(a["x"]).permute([int(v) for v in np.atleast_1d(a["perm"])]),
        "concat": _concat,
        "pad": _pad,
        "softmax": _softmax,
        "cast": _cast,
        "identity": lambda a: np.asarray(a["x"]),
        "quantize": _quantize,
        "dequantize": _dequantize,
        "constexpr_affine_dequantize": _affine_dequantize,
        "constexpr_blockwise_shift_scale": _blockwise_shift_scale,
    }


def _expand_dims_shape(shape, axes):
    out = list(shape)
    n = len(shape) + len(np.atleast_1d(axes))
    for ax in sorted(int(v) % n for v in np.atleast_1d(axes)):
        out.insert(ax, 1)
    return out


class _Ops(dict):
    """OPS, built on first use so that importing this module does not import torch."""

    def _fill(self):
        if not dict.__len__(self):
            self.update(_build_ops())

    def __contains__(self, k):
        self._fill()
        return dict.__contains__(self, k)

    def __getitem__(self, k):
        self._fill()
        return dict.__getitem__(self, k)

    def __iter__(self):
        self._fill()
        return dict.__iter__(self)

    def __len__(self):
        self._fill()
        return dict.__len__(self)


OPS = _Ops()

"""The threads edgepipe's scheduler granted this step (EDGEPIPE_THREADS), applied to
libraries that do not read OMP_NUM_THREADS: ONNX Runtime's intra-op thread pool.

A step granted one core while another step holds the other must not run a pool the size of
the machine: the two would share a core and neither would get its grant."""
import edgepipe_env


def granted():
    """The step's grant; all cores when edgepipe did not set one (the script run by hand)."""
    return edgepipe_env.threads()


def limit_onnxruntime(ort, n=None):
    """Every ort.InferenceSession made from now on, by this script or by a library it calls
    (onnxruntime.quantization's calibrator makes its own, with its own options), gets n intra-op
    threads unless its options already set a count."""
    cls = ort.InferenceSession
    if not hasattr(cls, "_edgepipe_threads"):
        orig = cls.__init__

        def init(self, path_or_bytes, sess_options=None, *args, **kwargs):
            so = sess_options if sess_options is not None else ort.SessionOptions()
            if so.intra_op_num_threads == 0:
                so.intra_op_num_threads = cls._edgepipe_threads
            orig(self, path_or_bytes, so, *args, **kwargs)

        cls.__init__ = init
    cls._edgepipe_threads = n or granted()

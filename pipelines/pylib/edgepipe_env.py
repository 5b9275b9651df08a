"""The environment edgepipe gives a helper: the cores the scheduler granted the step, and
offline mode (no helper may reach a hub: the model is a folder edgepipe already checked)."""
import os


def threads(explicit=0):
    """The threads to use: an explicit --threads, else the step's grant (EDGEPIPE_THREADS),
    else every core (the script run by hand)."""
    return explicit or int(os.environ.get("EDGEPIPE_THREADS") or 0) or os.cpu_count() or 1


def offline(datasets=False):
    """Forbid Hugging Face downloads in this process (and its children), unless the caller's
    environment already decided."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    if datasets:
        os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

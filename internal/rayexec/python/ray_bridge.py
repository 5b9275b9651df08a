"""Bridge between edgepipe's orchestrator and a Ray cluster.

edgepipe keeps the DAG: it decides which step is ready, and this bridge
only places and runs each one as a Ray task that runs
`edgepipe step run BUNDLE STEP ...` on whichever node has the resources.

Protocol: JSON lines. On stdin, from edgepipe:
  {"op": "submit", "id": STEP, "argv": [...], "num_cpus": N, "memory": BYTES,
   "num_gpus": N, "resources": {NAME: N}, "prefer": {NAME: N}, "max_retries": N}
     argv's "{bundle}" is replaced by the bundle's path on the worker.
  {"op": "cancel", "id": STEP}
  end of input: cancel what runs, disconnect, exit.
On stdout, to edgepipe:
  {"event": "ready", "nodes": N, "cpus": N, "resources": {...}}
  {"event": "done", "id": STEP, "exit": CODE, "node": IP, "output": TAIL}
  {"event": "error", "id": STEP, "error": TEXT}     (Ray gave up: lost nodes, canceled)
  {"event": "fatal", "error": TEXT}                  (cannot reach the cluster)

Usage: ray_bridge.py --address ADDR --bundle FILE
"""

import argparse
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading

OUTPUT_TAIL = 8000  # characters of a step's output sent back
GRACE_S = 5  # SIGTERM to SIGKILL, as edgepipe's own cancellation


def emit(lock, obj):
    line = json.dumps(obj, sort_keys=True)
    with lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def _die_with_parent():
    # The step's edgepipe dies with the Ray worker running it (a forced
    # cancel or a lost worker kills the worker, not its children).
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def run_step(bundle, argv):
    """Runs on a worker: write the bundle, run edgepipe, return its exit code."""
    import ray

    d = tempfile.mkdtemp(prefix="edgepipe-ray-")
    path = os.path.join(d, "plan.bundle")
    with open(path, "wb") as f:
        f.write(bundle)
    argv = [path if a == "{bundle}" else a for a in argv]
    out_path = os.path.join(d, "output.log")
    node = ray.util.get_node_ip_address()
    with open(out_path, "wb") as out:
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             preexec_fn=_die_with_parent)
        try:
            code = p.wait()
        except BaseException:
            # Canceled (KeyboardInterrupt from ray.cancel): stop edgepipe,
            # which stops its tool's process group.
            p.terminate()
            try:
                p.wait(GRACE_S)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            raise
    with open(out_path, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - OUTPUT_TAIL))
        tail = f.read().decode("utf-8", "replace")
    try:
        os.remove(path)
        os.remove(out_path)
        os.rmdir(d)
    except OSError:
        pass
    return {"exit": code, "node": node, "output": tail}


def options_for(msg, cluster):
    """Ray task options from a submit message, capped to what some node has."""
    opts = {"max_retries": int(msg.get("max_retries", 2)), "retry_exceptions": False}
    biggest_cpu = max([n.get("CPU", 0) for n in cluster] or [1])
    biggest_mem = max([n.get("memory", 0) for n in cluster] or [0])
    opts["num_cpus"] = min(float(msg.get("num_cpus", 1)), biggest_cpu)
    mem = int(msg.get("memory", 0))
    if mem > 0 and biggest_mem > 0:
        opts["memory"] = min(mem, int(biggest_mem))
    if msg.get("num_gpus"):
        opts["num_gpus"] = float(msg["num_gpus"])
    res = dict(msg.get("resources") or {})
    # Preferred resources (macOS for Core ML prediction) are required only
    # when some node has them; elsewhere the step runs with less.
    for name, n in (msg.get("prefer") or {}).items():
        if any(node.get(name, 0) >= n for node in cluster):
            res[name] = n
    if res:
        opts["resources"] = res
    return opts


def alive_nodes(ray):
    return [n["Resources"] for n in ray.nodes() if n.get("Alive")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--address", required=True)
    ap.add_argument("--bundle", required=True)
    args = ap.parse_args()
    lock = threading.Lock()
    host = args.address.rsplit(":", 1)[0].strip("[]")
    if host in ("127.0.0.1", "localhost", "::1"):
        # Ray turns a loopback address into the machine's network address
        # (services.resolve_ip_for_localhost) unless it believes it runs a
        # single-machine cluster: a loopback cluster stays on loopback.
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    try:
        import ray

        kw = dict(address=args.address, include_dashboard=False, log_to_driver=False,
                  namespace="edgepipe", logging_level="ERROR")
        if not args.address.startswith("ray://"):
            # A driver on a node binds the node's address: loopback here.
            kw["_node_ip_address"] = os.environ.get("EDGEPIPE_RAY_NODE_IP", "127.0.0.1")
        ray.init(**kw)
        with open(args.bundle, "rb") as f:
            bundle_ref = ray.put(f.read())
        cluster = alive_nodes(ray)
    except Exception as e:  # noqa: BLE001 - any failure to connect is reported as is
        emit(lock, {"event": "fatal", "error": "%s: %s" % (type(e).__name__, e)})
        return 1
    remote = ray.remote(run_step)
    emit(lock, {"event": "ready", "nodes": len(cluster), "cpus": sum(n.get("CPU", 0) for n in cluster),
                "resources": ray.cluster_resources()})
    running = {}  # step id -> ObjectRef
    running_lock = threading.Lock()
    done_q = queue.Queue()

    def waiter():
        while True:
            with running_lock:
                refs = {ref: sid for sid, ref in running.items()}
            if not refs:
                if done_q.get() is None:
                    return
                continue
            ready, _ = ray.wait(list(refs), num_returns=1, timeout=0.5)
            for ref in ready:
                sid = refs[ref]
                with running_lock:
                    running.pop(sid, None)
                try:
                    r = ray.get(ref)
                    emit(lock, {"event": "done", "id": sid, "exit": r["exit"], "node": r["node"], "output": r["output"]})
                except Exception as e:  # noqa: BLE001 - lost nodes past retries, cancellation
                    emit(lock, {"event": "error", "id": sid, "error": "%s: %s" % (type(e).__name__, e)})

    t = threading.Thread(target=waiter, daemon=True)
    t.start()
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        msg = json.loads(line)
        if msg.get("op") == "submit":
            cluster = alive_nodes(ray)
            ref = remote.options(**options_for(msg, cluster)).remote(bundle_ref, msg["argv"])
            with running_lock:
                running[msg["id"]] = ref
            done_q.put(True)
        elif msg.get("op") == "cancel":
            with running_lock:
                ref = running.get(msg["id"])
            if ref is not None:
                ray.cancel(ref, force=False)
    # End of input: the orchestrator is done or gone.
    with running_lock:
        refs = list(running.values())
    for ref in refs:
        ray.cancel(ref, force=False)
    if refs:
        ray.wait(refs, num_returns=len(refs), timeout=GRACE_S + 2)
    done_q.put(None)
    ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())

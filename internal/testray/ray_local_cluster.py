"""A local Ray cluster on loopback, for tests, benchmarks and a person
trying `edgepipe run --engine ray` (`go tool task ray:cluster`).

`ray start` turns --node-ip-address=127.0.0.1 into the machine's network
address (ray/scripts/scripts.py resolves localhost to a reachable IP), so
the nodes are started through ray.cluster_utils.Cluster, which keeps
127.0.0.1: every node, and every address Ray hands out, is loopback.

Each node gets its own environment (EDGEPIPE_CACHE: its own local cache),
so the nodes share nothing but what the steps share: the remote cache.

Prints one JSON line when the cluster is up:
  {"address": "127.0.0.1:PORT", "nodes": [{"index": 0, "env": {...}}, ...]}
then reads commands on stdin, answering each with a JSON line:
  kill N      kill node N's processes at once (a lost machine); 0 is the head
  nodes       list the nodes
  end of input, SIGTERM or SIGINT: shut the whole cluster down.

Usage: ray_local_cluster.py --temp-dir DIR --node-env JSON [--node-env JSON ...]
       [--cpus N] [--head-cpus N] [--port N]
"""

import argparse
import json
import os
import signal
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--temp-dir", required=True)
    ap.add_argument("--node-env", action="append", default=[],
                    help="a node's environment overrides as JSON; one per node, the head first")
    ap.add_argument("--cpus", type=int, default=2, help="CPUs each worker node offers")
    ap.add_argument("--head-cpus", type=int, default=None, help="CPUs the head offers (default --cpus)")
    ap.add_argument("--port", type=int, default=0, help="the head's GCS port (0: a free one)")
    ap.add_argument("--object-store-mb", type=int, default=128)
    args = ap.parse_args()
    if not args.node_env:
        args.node_env = ["{}"] * 3
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # Ray's own files (sessions, sockets, the current-cluster address) go
    # under --temp-dir, not the machine's shared /tmp/ray.
    tmp = os.path.abspath(args.temp_dir)
    os.makedirs(os.path.join(tmp, "ray"), exist_ok=True)
    os.environ["RAY_TMPDIR"] = tmp
    # Addresses Ray derives for this machine are loopback too.
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

    from ray.cluster_utils import Cluster

    common = dict(node_ip_address="127.0.0.1", include_dashboard=False, temp_dir=os.path.join(tmp, "ray"),
                  object_store_memory=args.object_store_mb << 20)
    envs = [json.loads(e) for e in args.node_env]
    head_cpus = args.cpus if args.head_cpus is None else args.head_cpus
    head_args = dict(common, num_cpus=head_cpus, env_vars=envs[0])
    if args.port:
        head_args["port"] = args.port
    cluster = Cluster(initialize_head=True, head_node_args=head_args)
    nodes = [cluster.head_node]
    for env in envs[1:]:
        nodes.append(cluster.add_node(**dict(common, num_cpus=args.cpus, env_vars=env)))

    def describe():
        return [{"index": i, "env": envs[i]} for i in range(len(nodes))]

    def shutdown(*_):
        cluster.shutdown()
        sys.exit(0)

    signal.signal(signal.SIGTERM, shutdown)
    signal.signal(signal.SIGINT, shutdown)
    print(json.dumps({"address": cluster.address, "temp_dir": common["temp_dir"], "nodes": describe()}), flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "kill" and len(words) == 2:
            i = int(words[1])
            if 0 < i < len(nodes):
                cluster.remove_node(nodes[i], allow_graceful=False)
                print(json.dumps({"killed": i}), flush=True)
            else:
                print(json.dumps({"error": "no worker node %s (0 is the head)" % words[1]}), flush=True)
        elif words[0] == "nodes":
            print(json.dumps({"nodes": describe()}), flush=True)
        else:
            print(json.dumps({"error": "unknown command %r" % line.strip()}), flush=True)
    shutdown()


if __name__ == "__main__":
    main()

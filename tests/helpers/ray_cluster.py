"""A real two-node Ray cluster on this machine, loopback only, for the env-runner tests: Ray's own multi-node test
utility (`ray.cluster_utils.Cluster`), in a process of its own so that the tests' process never imports ray.

    python tests/helpers/ray_cluster.py --cpus 2

It prints the head's address and the two nodes' ids (head, worker), then reads commands: `remove` takes the worker node
away (its processes are killed, as when a machine goes); `nodes` prints the alive nodes' ids. End of input (or the
process's end) shuts the cluster down.
"""

import argparse
import os
import sys

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # read when ray is imported: every node stays on 127.0.0.1

import ray  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cpus", type=float, default=1, help="the CPUs of each of the two nodes")
    args = parser.parse_args()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": args.cpus, "include_dashboard": False})
    worker = cluster.add_node(num_cpus=args.cpus)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, logging_level="ERROR")
    print(cluster.address, cluster.head_node.node_id, worker.node_id, flush=True)
    try:
        for line in sys.stdin:
            if line.strip() == "remove":
                cluster.remove_node(worker)
                print("removed", worker.node_id, flush=True)
            elif line.strip() == "nodes":
                print(" ".join(node["NodeID"] for node in ray.nodes() if node["Alive"]), flush=True)
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main()

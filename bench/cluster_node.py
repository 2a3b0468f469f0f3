#!/usr/bin/env python3
"""One cluster node for the cluster bench's timing runs: what ``beanpole serve --cluster FILE
--node N -b DIR`` runs (``beanpole._core.ClusterNode``), with Raft timing the command line
does not offer, and every change of the node's role, term, leader or serving state printed
on stdout as a JSON line stamped with ``time.monotonic()`` (one clock for all processes),
so the bench can tell where a failover's time goes.

    python bench/cluster_node.py CLUSTER_FILE NODE DATA_DIR [--heartbeat-ms MS]
        [--election-ms LO,HI] [--poll-ms MS] [--hand-over] [--admin-token-file FILE]

Prints the same line as ``serve`` on stderr once both addresses listen; stops on SIGTERM
or SIGINT: with ``--hand-over`` a leader first hands its lead over, as ``serve`` does;
without, it stops at once, as ``serve`` did before hand-overs.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from typing import Any

from beanpole import _core

STOP = {signal.SIGTERM, signal.SIGINT}


def watch(node: Any, poll: float, done: threading.Event) -> None:
    """Print the node's status whenever role, term, leader or serving changes."""
    last: tuple[object, ...] | None = None
    while not done.is_set():
        t = time.monotonic()
        st = node.status()
        key = (st["role"], st["term"], st["leader"], st["serving"])
        if key != last:
            last = key
            line = {
                "t": t,
                "role": st["role"],
                "term": st["term"],
                "leader": st["leader"],
                "serving": st["serving"],
                "applied": st["applied"],
            }
            print(json.dumps(line), flush=True)
        done.wait(poll)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cluster")
    ap.add_argument("node", type=int)
    ap.add_argument("data")
    ap.add_argument("--heartbeat-ms", type=int, help="[the node's default]")
    ap.add_argument("--election-ms", help="LO,HI [the node's default]")
    ap.add_argument("--poll-ms", type=float, default=2.0)
    ap.add_argument("--hand-over", action="store_true", help="hand the lead over on SIGTERM")
    ap.add_argument("--admin-token-file", help="take membership changes with this token")
    a = ap.parse_args()
    timing: dict[str, Any] = {}
    if a.heartbeat_ms is not None:
        timing["heartbeat_ms"] = a.heartbeat_ms
    if a.election_ms is not None:
        lo, hi = (int(x) for x in a.election_ms.split(","))
        timing["election_timeout_ms"] = (lo, hi)
    # As serve does: the stop signals are blocked before the node's threads start, so only
    # the wait below takes them.
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP)
    try:
        token = None
        if a.admin_token_file is not None:
            with open(a.admin_token_file, encoding="ascii") as f:
                token = f.read().strip()
        node = _core.ClusterNode.start(a.cluster, a.node, a.data, admin_token=token, **timing)
    except (OSError, ValueError) as err:
        sys.exit(f"cluster_node: {err}")
    host, port = node.address
    print(
        f"beanpole node {a.node} of cluster {a.cluster}: clients on {host}:{port} while it "
        f"leads; data in {a.data}",
        file=sys.stderr,
        flush=True,
    )
    done = threading.Event()
    watcher = threading.Thread(target=watch, args=(node, a.poll_ms / 1000, done), daemon=True)
    watcher.start()
    try:
        signal.sigwait(STOP)
        if a.hand_over:
            node.hand_over()
    finally:
        done.set()
        watcher.join(timeout=1)
        node.stop()


if __name__ == "__main__":
    main()

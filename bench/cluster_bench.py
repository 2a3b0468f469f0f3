#!/usr/bin/env python3
"""Replicated cluster figures (issue 21), side by side in one run on loopback with real
processes: failover after the leader's SIGKILL, after its SIGTERM (a planned stop: it hands
its lead over first; and, for comparison, a SIGTERM without hand-over, as before), and after
``beanpole cluster remove`` of the leader; and durable puts from 100 connections through the
leader against a single node at ``-f 0``, and through a follower (which relays to the leader)
against through the leader.

    python bench/cluster_bench.py                    # 50 kills, 10 of each stop, 5 rounds
    python bench/cluster_bench.py --smoke            # a few seconds of each, for CI
    python bench/cluster_bench.py --only kill --kills 20 --phases
    python bench/cluster_bench.py --only stop,remove --nodes 5

**Failover.** Three nodes (``python -m beanpole serve --cluster FILE --node N -b DIR``).
Each time: find the leader (asked of the nodes), send it SIGKILL (or SIGTERM), and time
from the signal until a surviving node answers a put with INSERTED, probing the survivors
in turn every few milliseconds with raw sockets (a follower relays to the leader once it
knows one). Then the stopped node is started again on its directory and the
next round waits until its Raft log holds a put made through the leader after its restart,
so every kill starts from three nodes up to date.

**Planned stops.** ``stop``: SIGTERM to the leader, which hands its lead over before it
stops. Until it stops serving, a survivor's put is relayed to it and answered; so here a
probe puts and then asks ``stats`` on the same connection, and counts only a put answered
by another process (``pid``). ``stop-plain``: the same, with the nodes under
``cluster_node.py`` without ``--hand-over``: SIGTERM stops the node at once, as ``serve``
did before hand-overs (main's figure, in the same run). ``remove``: ``beanpole cluster
remove --node LEADER`` (the leader hands over, then its successor removes it), timed from
the request to the first put answered by another process; then the removed node is
stopped, its directory emptied, and it is added and promoted again.

**Durable puts.** ``beanpole-bench put --connections 100 --pipeline 1`` (each connection
one put in flight; bodies computed per job: its number, send time, a checksum and a pattern
chosen by the number, 100 bytes) for ``--duration`` seconds, against ``python -m beanpole
serve -b DIR -f 0`` (each put fsynced before its reply), against the leader of a fresh
three-node cluster (each put on a majority's disk before its reply) and through a follower
of another fresh cluster, in alternating order round by round; the ratios are the medians
of the per-round ratios cluster / single and via a follower / via the leader. Every run
starts from an empty server or cluster: one that a run before had filled would be making
snapshots of those jobs meanwhile.

With ``--phases`` (or ``--heartbeat-ms``/``--election-ms``) the nodes run under
``bench/cluster_node.py`` instead of ``serve``: the same node, with the timing given and its
role changes reported, so the failover table splits each failover into the time to the
first candidate, to a leader, to serving and to the put.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster_nodes import Cluster, Timing, served_by, try_put
from launch import nofile_limit, start_beanpole
from runner import build_bench, run_bench

GOALS = {
    "kill_p50": 1.0,
    "kill_p99": 1.5,
    "stop_p50": 0.3,
    "remove_p50": 0.3,
    "puts_ratio": 0.7,
    "follower_ratio": 0.85,
}
PROBE_GAP = 0.002  # seconds between rounds of probes over the survivors
PROBE_TIMEOUT = 1.0  # seconds one probe may wait for its connection or reply
# Before a planned stop or removal, the leader has led at least this long: a leader that
# has led for less than its lease (500 ms) waits, serving, until it has before it hands
# over, and the rounds here follow one another closely. Kills are not paced.
LED_FOR = 0.6


@dataclass
class Failover:
    """One leader stop: the signal, the node that took the first put after it, and the
    seconds from the signal to that put (and to the phases, with the launcher)."""

    sig: str
    victim: int
    winner: int
    seconds: float
    phases: dict[str, float] = field(default_factory=dict)


def first_put(
    cluster: Cluster, survivors: Sequence[int], t0: float, not_pid: int | None = None
) -> tuple[int, float]:
    """Probe the survivors in turn until one takes a put; (that node, seconds since t0).
    With ``not_pid``, a put counts only if a process other than that one answered it (a
    survivor relays to a leader that still serves)."""
    n = 0
    while True:
        for node in survivors:
            n += 1
            body = b"failover %d" % n
            if not_pid is None:
                took = try_put(cluster.clients[node], body, PROBE_TIMEOUT) is not None
            else:
                pid = served_by(cluster.clients[node], body, PROBE_TIMEOUT)
                took = pid is not None and pid != not_pid
            if took:
                return node, time.monotonic() - t0
        if time.monotonic() - t0 > 60:
            raise RuntimeError(f"no survivor of {list(survivors)} took a put within 60 s")
        time.sleep(PROBE_GAP)


def phases(cluster: Cluster, survivors: Sequence[int], t0: float) -> dict[str, float]:
    """From the launcher's events: seconds from t0 to the first survivor that became a
    candidate, a leader, and served clients."""
    out: dict[str, float] = {}
    for node in survivors:
        for t, ev in cluster.nodes[node].events:
            if t < t0:
                continue
            for name, hit in (
                ("candidate", ev["role"] == "candidate"),
                ("leader", ev["role"] == "leader"),
                ("serving", ev["serving"] is True),
            ):
                if hit and (name not in out or t - t0 < out[name]):
                    out[name] = t - t0
    return out


def start_caught_up(cluster: Cluster) -> float:
    """Start every node and wait until each follower holds the leader's log; when
    the leader is known to lead from."""
    cluster.start_all()
    lead = cluster.leader()
    for node in cluster.nodes:
        if node != lead:
            cluster.wait_caught_up(node, lead)
    return time.monotonic()


def failovers(
    root: Path, sig: int, count: int, timing: Timing | None, nodes: int = 3
) -> list[Failover]:
    """``count`` leader stops by ``sig`` on one cluster of ``nodes``, each restarted after."""
    cluster = Cluster(root, nodes, timing)
    out: list[Failover] = []
    try:
        led_from = start_caught_up(cluster)
        for i in range(count):
            victim = cluster.leader()
            survivors = [n for n in cluster.nodes if n != victim]
            if sig == signal.SIGTERM:
                time.sleep(max(0.0, led_from + LED_FOR - time.monotonic()))
            pid = cluster.nodes[victim].pid
            t0 = cluster.signal(victim, sig)
            _, seconds = first_put(
                cluster, survivors, t0, pid if sig == signal.SIGTERM else None
            )
            led_from = t0 + seconds
            # Any survivor answers (a follower forwards to the leader): the new
            # leader is asked of the nodes.
            winner = cluster.leader(survivors)
            status = cluster.wait_exit(victim)
            if sig == signal.SIGTERM and status != 0:
                raise RuntimeError(f"node {victim} exited with status {status} after SIGTERM")
            f = Failover(signal.Signals(sig).name, victim, winner, seconds)
            if timing is not None:
                f.phases = phases(cluster, survivors, t0)
            out.append(f)
            name = signal.Signals(sig).name
            extra = " ".join(f"{k} {v * 1000:.0f}" for k, v in f.phases.items())
            print(
                f"[{name} {i + 1}/{count}] node {victim} stopped, node {winner} took a put "
                f"after {seconds * 1000:.0f} ms {extra}",
                file=sys.stderr,
                flush=True,
            )
            cluster.start(victim)
            cluster.wait_caught_up(victim, winner)
    finally:
        cluster.stop_all()
    return out


def removals(root: Path, count: int, timing: Timing | None, nodes: int = 3) -> list[Failover]:
    """``count`` times ``beanpole cluster remove`` of the leader on one cluster of
    ``nodes``; each time the removed node is stopped, emptied, added and promoted again."""
    cluster = Cluster(root, nodes, timing, token=True)
    out: list[Failover] = []
    try:
        led_from = start_caught_up(cluster)
        for i in range(count):
            victim = cluster.leader()
            survivors = [n for n in cluster.nodes if n != victim]
            answers: list[str | BaseException] = []
            time.sleep(max(0.0, led_from + LED_FOR - time.monotonic()))

            def remove(victim: int = victim, answers: list[str | BaseException] = answers) -> None:
                try:
                    answers.append(cluster.change("remove", victim))
                except (OSError, ValueError) as err:
                    answers.append(err)

            t0 = time.monotonic()
            asker = threading.Thread(target=remove)
            asker.start()
            _, seconds = first_put(cluster, survivors, t0, cluster.nodes[victim].pid)
            led_from = t0 + seconds
            asker.join(timeout=120)
            if not answers or isinstance(answers[0], BaseException):
                raise RuntimeError(f"removing node {victim}: {answers}")
            winner = cluster.leader(survivors)
            f = Failover("remove", victim, winner, seconds)
            if timing is not None:
                f.phases = phases(cluster, survivors, t0)
            out.append(f)
            print(
                f"[remove {i + 1}/{count}] node {victim} removed, node {winner} took a put "
                f"after {seconds * 1000:.0f} ms ({answers[0]})",
                file=sys.stderr,
                flush=True,
            )
            cluster.signal(victim, signal.SIGTERM)
            cluster.wait_exit(victim)
            shutil.rmtree(root / f"node{victim}")
            cluster.start(victim)
            cluster.change("add", victim)
            cluster.change("promote", victim)
            cluster.wait_caught_up(victim, cluster.leader(survivors))
    finally:
        cluster.stop_all()
    return out


@dataclass
class PutRun:
    kind: str  # "single", "cluster" (via the leader) or "follower" (via a follower)
    round: int
    result: dict[str, Any] | None
    problem: str = ""
    nodes_cpu_us_per_op: float | None = None  # all three nodes' CPU per put (cluster)
    #: The three nodes' CPU per put by thread name (cluster).
    threads_cpu_us_per_op: dict[str, float] = field(default_factory=dict)

    @property
    def rate(self) -> float | None:
        return None if self.result is None else float(self.result["ops_per_s"])


def put_args(a: argparse.Namespace) -> list[str]:
    return [
        "put",
        "--connections",
        str(a.connections),
        "--pipeline",
        "1",
        "--body-size",
        "100",
        "--duration",
        str(a.duration),
    ]


def single_run(a: argparse.Namespace, bench: Path, rnd: int, root: Path) -> list[PutRun]:
    server = start_beanpole(["-b", str(root / "single"), "-f", "0"])
    try:
        code, result, err = run_bench(bench, put_args(a), server)
    finally:
        server.stop()
    ok = code == 0 and result is not None
    return [PutRun("single", rnd, result if ok else None, "" if ok else f"exit {code}: {err}")]


def cluster_run(
    a: argparse.Namespace, bench: Path, rnd: int, root: Path, kind: str = "cluster"
) -> list[PutRun]:
    """On a fresh three-node cluster: the puts via the leader (``cluster``) or via a
    follower (``follower``, which relays them to the leader). Each way gets a cluster of
    its own: the way measured second on a shared one started with the first one's jobs
    in every node's state and its snapshots being made (measured: 0.45-0.53x via the
    leader after the follower's run against 0.56-0.58x before it)."""
    cluster = Cluster(root, 3, None)
    runs: list[PutRun] = []
    try:
        cluster.start_all()
        lead = cluster.leader()
        for node in cluster.nodes:
            if node != lead:
                cluster.wait_caught_up(node, lead)
        node = lead if kind == "cluster" else next(n for n in cluster.nodes if n != lead)
        before = sum(n.cpu_seconds() for n in cluster.nodes.values())
        threads_before = _threads_cpu(cluster)
        server = _Target(cluster.clients[node], cluster.nodes[node].pid)
        code, result, err = run_bench(bench, put_args(a), server)  # type: ignore[arg-type]
        after = sum(n.cpu_seconds() for n in cluster.nodes.values())
        threads_after = _threads_cpu(cluster)
        ok = code == 0 and result is not None
        run = PutRun(kind, rnd, result if ok else None, "" if ok else f"exit {code}: {err}")
        if ok and result is not None and result["ops"]:
            run.nodes_cpu_us_per_op = (after - before) * 1e6 / result["ops"]
            run.threads_cpu_us_per_op = {
                name: (cpu - threads_before.get(name, 0.0)) * 1e6 / result["ops"]
                for name, cpu in threads_after.items()
                if name.startswith("beanpole")
            }
        runs.append(run)
    finally:
        cluster.stop_all()
    return runs


def follower_run(a: argparse.Namespace, bench: Path, rnd: int, root: Path) -> list[PutRun]:
    return cluster_run(a, bench, rnd, root, "follower")


def _threads_cpu(cluster: Cluster) -> dict[str, float]:
    """The nodes' CPU seconds so far, summed by thread name over the nodes."""
    out: dict[str, float] = {}
    for node in cluster.nodes.values():
        for name, cpu in node.threads_cpu_seconds().items():
            out[name] = out.get(name, 0.0) + cpu
    return out


@dataclass
class _Target:
    """What ``run_bench`` needs of a server: its port and pid."""

    port: int
    pid: int


def puts(a: argparse.Namespace, bench: Path, tmp: Path) -> list[PutRun]:
    out: list[PutRun] = []
    for rnd in range(a.rounds):
        ways = (single_run, cluster_run, follower_run)
        for fn in ways if rnd % 2 == 0 else ways[::-1]:
            root = Path(tempfile.mkdtemp(prefix="cluster-bench-", dir=tmp))
            try:
                runs = fn(a, bench, rnd, root)
            finally:
                shutil.rmtree(root, ignore_errors=True)
            out.extend(runs)
            for run in runs:
                r = run.result or {}
                print(
                    f"[puts {rnd + 1}/{a.rounds}] {run.kind}: "
                    + (
                        f"{r['ops_per_s']:,.0f} puts/s, p50 {r['p50_us']:,.0f} µs, client CPU "
                        f"{r['client_cpu_us_per_op']:.1f} µs/put"
                        if run.result
                        else run.problem
                    ),
                    file=sys.stderr,
                    flush=True,
                )
    return out


# -- the report ------------------------------------------------------------------------------


def quantile(xs: Sequence[float], q: float) -> float:
    """Nearest-rank quantile (q in 0..1) of a non-empty sequence."""
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, int(-(-q * len(s) // 1)) - 1))]


def failover_summary(runs: Sequence[Failover]) -> dict[str, Any]:
    xs = [f.seconds for f in runs]
    out: dict[str, Any] = {"count": len(xs)}
    if xs:
        out.update(
            p50=quantile(xs, 0.5),
            p90=quantile(xs, 0.9),
            p99=quantile(xs, 0.99),
            max=max(xs),
            min=min(xs),
        )
    names = sorted({k for f in runs for k in f.phases})
    out["phases_p50"] = {
        k: statistics.median([f.phases[k] for f in runs if k in f.phases]) for k in names
    }
    return out


def puts_summary(runs: Sequence[PutRun]) -> dict[str, Any]:
    def med(kind: str, key: str) -> float | None:
        xs = [float(r.result[key]) for r in runs if r.kind == kind and r.result is not None]
        return statistics.median(xs) if xs else None

    by_round: dict[int, dict[str, float]] = {}
    for r in runs:
        if r.rate is not None:
            by_round.setdefault(r.round, {})[r.kind] = r.rate
    ratios = [
        p["cluster"] / p["single"] for p in by_round.values() if "cluster" in p and "single" in p
    ]
    via = [
        p["follower"] / p["cluster"]
        for p in by_round.values()
        if "cluster" in p and "follower" in p
    ]
    cpu = [
        r.nodes_cpu_us_per_op
        for r in runs
        if r.nodes_cpu_us_per_op is not None and r.kind == "cluster"
    ]
    return {
        kind: {
            k: med(kind, k)
            for k in (
                "ops_per_s",
                "p50_us",
                "p99_us",
                "server_cpu_us_per_op",
                "client_cpu_us_per_op",
            )
        }
        for kind in ("single", "cluster", "follower")
    } | {
        "ratios": ratios,
        "ratio": statistics.median(ratios) if ratios else None,
        "follower_ratios": via,
        "follower_ratio": statistics.median(via) if via else None,
        "nodes_cpu_us_per_op": statistics.median(cpu) if cpu else None,
        "threads_cpu_us_per_op": {
            kind: _threads_median(runs, kind) for kind in ("cluster", "follower")
        },
        "problems": [f"{r.kind} round {r.round + 1}: {r.problem}" for r in runs if r.problem],
    }


def _threads_median(runs: Sequence[PutRun], kind: str) -> dict[str, float]:
    """Median over the rounds of the nodes' CPU per put, by thread name, of one kind."""
    mine = [r.threads_cpu_us_per_op for r in runs if r.kind == kind and r.threads_cpu_us_per_op]
    names = sorted({name for threads in mine for name in threads})
    return {name: statistics.median(t.get(name, 0.0) for t in mine) for name in names}


def ms(v: float | None) -> str:
    return "—" if v is None else f"{v * 1000:,.0f}"


def report(summary: dict[str, Any], a: argparse.Namespace) -> str:
    lines = [
        f"load average before/after: {summary['load_before']} / {summary['load_after']}; "
        f"took {summary['took']:.0f} s",
        "",
    ]
    n = a.nodes
    for key, title, goal in (
        (
            "kill",
            f"leader SIGKILL, {n} nodes",
            f"p50 ≤ {GOALS['kill_p50']} s, p99 ≤ {GOALS['kill_p99']} s",
        ),
        ("stop", f"leader SIGTERM (hand-over), {n} nodes", f"p50 ≤ {GOALS['stop_p50']} s"),
        ("stop-plain", f"leader SIGTERM, no hand-over (as before), {n} nodes", "—"),
        ("remove", f"`cluster remove` of the leader, {n} nodes", f"p50 ≤ {GOALS['remove_p50']} s"),
    ):
        s = summary.get(key)
        if not s:
            continue
        if not lines[-1].startswith("|"):
            lines += [
                "| failover | runs | p50 ms | p90 ms | p99 ms | max ms | goal |",
                "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
            ]
        lines.append(
            f"| {title} | {s['count']} | {ms(s.get('p50'))} | {ms(s.get('p90'))} | "
            f"{ms(s.get('p99'))} | {ms(s.get('max'))} | {goal} |"
        )
    for key in ("kill", "stop", "stop-plain", "remove"):
        s = summary.get(key)
        if s and s["phases_p50"]:
            parts = ", ".join(f"{k} {ms(v)} ms" for k, v in s["phases_p50"].items())
            lines += ["", f"{key}: medians from the signal to the first survivor's {parts}"]
    p = summary.get("puts")
    if p:
        lines += [
            "",
            f"| durable puts, {a.connections} connections, 1 in flight | puts/s | "
            "p50 µs | p99 µs | server CPU µs/put | client CPU µs/put |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        for kind, title in (
            ("single", "single node, `-f 0`"),
            ("cluster", "3 nodes, via leader"),
            ("follower", "3 nodes, via a follower"),
        ):
            r = p[kind]
            lines.append(
                f"| {title} | {_n(r['ops_per_s'])} | {_n(r['p50_us'])} | {_n(r['p99_us'])} | "
                f"{_n(r['server_cpu_us_per_op'], 1)} | {_n(r['client_cpu_us_per_op'], 1)} |"
            )
        ratios = ", ".join(f"{x:.2f}" for x in p["ratios"])
        ratio = "—" if p["ratio"] is None else f"{p['ratio']:.2f}x"
        lines += [
            "",
            f"cluster / single: {ratio} (per round: {ratios}; goal ≥ "
            f"{GOALS['puts_ratio']}x); all three nodes' CPU per put "
            f"{_n(p['nodes_cpu_us_per_op'], 1)} µs",
        ]
        via = ", ".join(f"{x:.2f}" for x in p["follower_ratios"])
        via_ratio = "—" if p["follower_ratio"] is None else f"{p['follower_ratio']:.2f}x"
        lines.append(
            f"via a follower / via the leader: {via_ratio} (per round: {via}; goal ≥ "
            f"{GOALS['follower_ratio']}x)"
        )
        for kind, title in (("cluster", "via the leader"), ("follower", "via a follower")):
            threads = p.get("threads_cpu_us_per_op", {}).get(kind)
            if threads:
                parts = ", ".join(f"{name} {cpu:.1f}" for name, cpu in threads.items())
                lines.append(f"{title}, the three nodes' CPU µs per put by thread: {parts}")
        lines += [f"problem: {x}" for x in p["problems"]]
    return "\n".join(lines)


def _n(v: float | None, digits: int = 0) -> str:
    return "—" if v is None else f"{v:,.{digits}f}"


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--only",
        default="kill,stop,stop-plain,remove,puts",
        help="of kill, stop, stop-plain, remove, puts",
    )
    ap.add_argument("--kills", type=int, default=50)
    ap.add_argument("--stops", type=int, default=10, help="of each of stop and stop-plain")
    ap.add_argument("--removes", type=int, default=10)
    ap.add_argument("--nodes", type=int, default=3, help="nodes for the failovers")
    ap.add_argument("--rounds", type=int, default=5, help="durable-put rounds (pairs)")
    ap.add_argument("--duration", type=float, default=5.0, help="seconds of puts per run")
    ap.add_argument("--connections", type=int, default=100)
    ap.add_argument("--phases", action="store_true", help="nodes under cluster_node.py")
    ap.add_argument("--heartbeat-ms", type=int)
    ap.add_argument("--election-ms", help="LO,HI (implies --phases)")
    ap.add_argument("--smoke", action="store_true", help="2 kills, 1 stop, 1 short round")
    ap.add_argument("--bench", type=Path, help="the beanpole-bench binary")
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--tmp", type=Path, default=Path(tempfile.gettempdir()))
    ap.add_argument("--json", type=Path, help="write the runs and the summary here")
    a = ap.parse_args(argv)
    if a.smoke:
        a.kills, a.stops, a.removes, a.rounds, a.duration, a.connections = 2, 1, 1, 1, 1.0, 10
    only = set(a.only.split(","))
    timing = None
    if a.phases or a.heartbeat_ms is not None or a.election_ms is not None:
        el = None if a.election_ms is None else tuple(int(x) for x in a.election_ms.split(","))
        timing = Timing(a.heartbeat_ms, el)  # type: ignore[arg-type]
    nofile_limit()
    t_start = time.monotonic()
    summary: dict[str, Any] = {"load_before": loadavg(), "args": vars(a) | {"tmp": str(a.tmp)}}
    runs: dict[str, Any] = {}
    plain = Timing(
        timing.heartbeat_ms if timing else None, timing.election_ms if timing else None, False
    )
    for key, sig, count, how in (
        ("kill", signal.SIGKILL, a.kills, timing),
        ("stop", signal.SIGTERM, a.stops, timing),
        ("stop-plain", signal.SIGTERM, a.stops, plain),
        ("remove", None, a.removes, timing),
    ):
        if key in only and count > 0:
            root = Path(tempfile.mkdtemp(prefix=f"cluster-bench-{key}-", dir=a.tmp))
            try:
                if sig is None:
                    got = removals(root, count, how, a.nodes)
                else:
                    got = failovers(root, sig, count, how, a.nodes)
            finally:
                shutil.rmtree(root, ignore_errors=True)
            runs[key] = [f.__dict__ for f in got]
            summary[key] = failover_summary(got)
    if "puts" in only:
        bench = a.bench or build_bench(a.no_build)
        got_puts = puts(a, bench, a.tmp)
        runs["puts"] = [r.__dict__ for r in got_puts]
        summary["puts"] = puts_summary(got_puts)
    summary["load_after"] = loadavg()
    summary["took"] = time.monotonic() - t_start
    if a.json:
        a.json.write_text(json.dumps({"summary": summary, "runs": runs}, default=str, indent=1))
    print(report(summary, a))
    failed = "puts" in summary and (summary["puts"]["problems"] or summary["puts"]["ratio"] is None)
    return 1 if failed else 0


if __name__ == "__main__":
    os.chdir(Path(__file__).resolve().parent.parent)
    sys.exit(main())

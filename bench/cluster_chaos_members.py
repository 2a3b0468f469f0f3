"""Membership changes under load for bench/cluster_chaos.py (the ``members`` fault):
the cluster grows by its spare nodes, serves for the fault's hold time, and shrinks
back (3 -> 5 -> 3, or 5 -> 7 -> 5), the leader removed three times in four, through
the real command line, ``beanpole cluster add|promote|remove --cluster FILE --node N
--token-file T`` (the nodes run with ``--admin-token-file T``), while the clients go
on.

Growing: each spare is started (on its old data directory, or half the time, unless
it is node 1, on a wiped one: node 1 with an empty directory would found a cluster of
its own), added (it becomes a learner; the answer comes once it has caught up) and
promoted (a voter); from then on it is a member that clients and faults use.
Shrinking: as many members as there are spares are removed, the leader first three
times in four, each stopped (SIGTERM) once its removal is acknowledged: a node that
has been removed is not told, so its client address would otherwise go on relaying.
The clients stop using a node before its removal is asked for.

The command line runs in a mount namespace whose /etc/hosts sends every node's name
straight to it (the harness's own view, ``Net.hosts[0]``). A change whose command
fails (no leader yet after a removed leader stepped down, a timeout) is asked again
until ``beanpole cluster status`` shows it done, within CHANGE_WAIT. Each change is
recorded in the history (``join``, ``add``, ``promote``, ``remove``, then the
removed node's ``term``), with the command's answer.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from cluster_chaos_nodes import IN_NAMESPACE, ClusterNode, Monitor, Net

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from servechild import child_env

CHANGE_WAIT = 60.0  # seconds a change may take, asked again as often as needed
COMMAND_WAIT = 30.0  # seconds one command may take (its --timeout is less)
ROLES_DONE = {
    "add": ("learner", "follower", "leader"),
    "promote": ("follower", "leader"),
    "remove": ("removed",),
}
Note = Callable[..., None]


class MembershipError(RuntimeError):
    """A membership change was not done within CHANGE_WAIT."""


class Members:
    """Grows the cluster by its spares and shrinks it back."""

    def __init__(self, net: Net, nodes: dict[int, ClusterNode], monitor: Monitor,
                 token: Path, rng: random.Random, note: Note) -> None:  # fmt: skip
        self.net = net
        self.nodes = nodes
        self.monitor = monitor
        self.token = token
        self.rng = rng
        self.note = note
        self.size = len(net.members)  # the cluster's size between changes

    def cycle(self, hold: float) -> None:
        """Grow, serve ``hold`` seconds at the larger size, shrink back."""
        self.grow()
        time.sleep(hold)
        self.shrink()

    def grow(self) -> None:
        for ident in sorted(set(self.net.ids) - self.net.members):
            node = self.nodes[ident]
            if node.up:
                # Noted when the signal goes, as every fault is: a node told to
                # stop may end its clients' sessions before it exits.
                self.note("term", ident, role="removed")
                node.down("term")
            if ident != 1 and self.rng.random() < 0.5:
                node.wipe()
                self.note("wipe", ident)
            node.start()
            self.note("join", ident)
            self.ask("add", ident)
            self.ask("promote", ident)
            self.net.members.add(ident)

    def shrink(self) -> None:
        for _ in range(len(self.net.members) - self.size):
            lead = self.monitor.leader()
            members = sorted(self.net.members)
            if lead in self.net.members and self.rng.random() < 0.75:
                ident = lead
            else:
                ident = self.rng.choice(members)
            role = "leader" if ident == lead else "follower"
            self.net.members.discard(ident)  # clients go elsewhere from now on
            self.ask("remove", ident, role=role)
            self.note("term", ident, role="removed")
            self.nodes[ident].down("term")

    def ask(self, op: str, ident: int, **more: object) -> None:
        """``beanpole cluster OP --node IDENT``, asked again until status shows it
        done; recorded with the last answer."""
        deadline = time.monotonic() + CHANGE_WAIT
        tries = 0
        while True:
            tries += 1
            ok, said = self.command("cluster", op, "--cluster", str(self.net.all_file),
                                    "--node", str(ident), "--token-file", str(self.token),
                                    "--timeout", "20")  # fmt: skip
            if ok or self.roles().get(ident) in ROLES_DONE[op]:
                self.note(op, ident, answer=said, tries=tries, **more)
                return
            if time.monotonic() > deadline:
                raise MembershipError(f"cluster {op} --node {ident}: {said}")
            time.sleep(0.2)

    def roles(self) -> dict[int, str]:
        """Each node's role as the leader's membership has it; nothing while no node
        leads (a node the cluster has not added calls itself a learner)."""
        ok, out = self.command("cluster", "status", "--cluster", str(self.net.all_file),
                               "--format", "json", "--timeout", "1")  # fmt: skip
        if not ok:
            return {}
        try:
            roles = {row["id"]: row["role"] for row in json.loads(out)}
        except (ValueError, KeyError, TypeError):
            return {}
        return roles if "leader" in roles.values() else {}

    def command(self, *argv: str) -> tuple[bool, str]:
        """Run ``python -m beanpole ARGV`` in the harness's namespace: (exit 0, its
        output, or its error line)."""
        prefix = ["unshare", "--mount", "sh", "-c", IN_NAMESPACE, str(self.net.hosts[0])]
        try:
            done = subprocess.run(
                [*prefix, sys.executable, "-m", "beanpole", *argv], env=child_env(),
                capture_output=True, text=True, timeout=COMMAND_WAIT, check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            return False, f"no answer within {COMMAND_WAIT:.0f}s"
        if done.returncode == 0:
            return True, done.stdout.strip()
        return False, (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]

"""``beanpole cluster add|promote|remove``: membership changes of real node processes,
3 -> 5 -> 3, with the leader removed on the way. Every acknowledged job is there
after each change, the nodes' roles follow, and changes without the admin token, of
a node that is no learner, or on nodes started without a token are refused with one
line."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

from servechild import BeanpoleChild, free_port
from test_cluster_serve import DEADLINE, leader

TOKEN = "membership-test-token"


def write_file(path: Path, nodes: dict[int, tuple[int, int]]) -> Path:
    path.write_text(
        "".join(
            f'[[node]]\nid = {n}\nclient = "127.0.0.1:{c}"\npeer = "127.0.0.1:{p}"\n'
            for n, (c, p) in nodes.items()
        ),
        encoding="utf-8",
    )
    return path


def run(*args: str) -> tuple[int, str, str]:
    child = BeanpoleChild(*args, stdout=subprocess.PIPE)
    assert child.proc.stdout is not None
    out = child.proc.stdout.read()
    child.finish()
    return child.proc.returncode, out, "".join(child.stderr)


def roles(path: Path) -> dict[int, str]:
    status, out, err = run("cluster", "status", "--cluster", str(path), "--format", "json")
    assert status == 0, err
    return {row["id"]: row["role"] for row in json.loads(out)}


def wait_roles(path: Path, want: dict[int, str]) -> dict[int, str]:
    deadline = time.monotonic() + DEADLINE
    while True:
        seen = roles(path)
        if all(seen.get(n) == r for n, r in want.items()) or time.monotonic() > deadline:
            return seen
        time.sleep(0.1)


def test_three_to_five_to_three_with_the_leader_removed(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n", encoding="utf-8")
    ports = {n: (free_port(), free_port()) for n in range(1, 6)}
    three = write_file(tmp_path / "three.toml", {n: ports[n] for n in (1, 2, 3)})
    five = write_file(tmp_path / "five.toml", ports)
    clients = {n: ports[n][0] for n in ports}

    def start(n: int, path: Path) -> BeanpoleChild:
        child = BeanpoleChild(
            "serve",
            "--cluster",
            str(path),
            "--node",
            str(n),
            "-b",
            str(tmp_path / f"n{n}"),
            "--admin-token-file",
            str(token),
        )
        child.wait_line(rf"^beanpole node {n} of cluster ")
        return child

    children = {n: start(n, three) for n in (1, 2, 3)}
    try:
        first, client = leader(clients, children, {1, 2, 3})
        client.use("m")
        ids = [client.put(f"before {i}".encode()) for i in range(20)]
        client.close()

        children[4] = start(4, five)
        children[5] = start(5, five)
        change = ("cluster", "{}", "--cluster", str(five), "--token-file", str(token))

        def member(op: str, node: int) -> tuple[int, str, str]:
            args = [a.replace("{}", op) for a in change]
            return run(*args, "--node", str(node))

        # Refused: a wrong token, a promotion of a node that is no learner.
        wrong = tmp_path / "wrong"
        wrong.write_text("not-it\n", encoding="utf-8")
        status, _, err = run(
            "cluster", "add", "--cluster", str(five), "--token-file", str(wrong), "--node", "4"
        )
        assert status == 1 and "wrong admin token" in err
        status, _, err = member("promote", 4)
        assert status == 1 and "not a learner" in err

        for n in (4, 5):
            status, out, err = member("add", n)
            assert status == 0, err
            assert "caught up" in out
        assert {n: r for n, r in roles(five).items() if n > 3} == {4: "learner", 5: "learner"}
        for n in (4, 5):
            status, out, err = member("promote", n)
            assert status == 0, err
        seen = wait_roles(five, {n: "follower" for n in ports if n != first})
        assert sorted(seen.values()).count("follower") == 4, seen

        # The leader leaves: it hands its lead to another voter first, which removes
        # it and leads, with every job.
        status, out, err = member("remove", first)
        assert status == 0, err
        handed = re.search(rf"node {first} handed the lead to node (\d+);", out)
        assert handed is not None, out
        second, client = leader(clients, children, set(ports) - {first})
        assert second == int(handed[1]) != first
        client.use("m")
        assert client.stats_tube("m")["current-jobs-ready"] == 20
        assert client.peek(ids[-1]).body == "before 19"
        ids.append(client.put(b"after the leader left"))
        client.close()

        # Down to three voters again.
        for n in [n for n in ports if n not in (first, second)][:1]:
            status, out, err = member("remove", n)
            assert status == 0, err
        seen = roles(five)
        voters = {n for n, r in seen.items() if r in ("leader", "follower")}
        assert len(voters) == 3, seen
        assert sorted(r for r in seen.values() if r not in ("leader", "follower")) == [
            "removed",
            "removed",
        ]
        _, client = leader(clients, children, voters)
        client.use("m")
        assert client.stats_tube("m")["current-jobs-ready"] == 21
        client.close()
    finally:
        for child in children.values():
            child.kill()


def test_nodes_without_a_token_take_no_change(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(TOKEN, encoding="utf-8")
    ports = {n: (free_port(), free_port()) for n in (1, 2, 3)}
    path = write_file(tmp_path / "c.toml", ports)
    children = {
        n: BeanpoleChild(
            "serve", "--cluster", str(path), "--node", str(n), "-b", str(tmp_path / f"n{n}")
        )
        for n in ports
    }
    try:
        for n, child in children.items():
            child.wait_line(rf"^beanpole node {n} of cluster ")
        leader({n: p[0] for n, p in ports.items()}, children, set(ports))
        status, _, err = run(
            "cluster", "remove", "--cluster", str(path), "--token-file", str(token), "--node", "3"
        )
        assert status == 1
        assert "takes no membership changes" in err
        assert len(err.strip().splitlines()) == 1
    finally:
        for child in children.values():
            child.kill()

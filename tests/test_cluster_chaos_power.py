"""The fault harness's simulated power loss (``bench/cluster_chaos_power.py``): a data
directory cut back to what a node's sync record says it had made durable, and a real
node's record matching its files."""

from __future__ import annotations

import importlib.util
import random
import shutil
import socket
import sys
from pathlib import Path

import pytest

from servechild import BeanpoleChild, free_port

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

from cluster_chaos_power import cut, read


def record(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def layout(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()}


def test_what_was_never_synced_is_gone_and_tails_go_back_to_the_synced_length(
    tmp_path: Path,
) -> None:
    root = tmp_path / "node"
    (root / "raft").mkdir(parents=True)
    (root / "fresh").mkdir()  # a directory whose entry was never synced
    (root / "fresh" / "x").write_bytes(b"x" * 10)
    (root / "cluster").write_bytes(b"m" * 40)
    (root / "raft" / "seg").write_bytes(b"s" * 100)
    (root / "raft" / "vote.new").write_bytes(b"v" * 25)  # written aside, never renamed
    rec = record(
        tmp_path / "synced",
        [
            f"F\t40\t{root / 'cluster'}",
            f"D\t{root}\tcluster\traft",
            f"F\t16\t{root / 'raft' / 'seg'}",
            f"D\t{root / 'raft'}\tseg",
            f"F\t60\t{root / 'raft' / 'seg'}",  # the last length wins
        ],
    )
    cuts = []
    for seed in range(20):
        work = tmp_path / f"copy{seed}"
        shutil.copytree(root, work / "node")
        lines = rec.read_text().replace(str(root), str(work / "node"))
        done = cut(work / "node", record(work / "synced", lines.splitlines()), random.Random(seed))
        got = layout(work / "node")
        assert set(got) == {"cluster", "raft/seg"}, got
        assert got["cluster"] == 40
        assert 60 <= got["raft/seg"] <= 100
        assert sorted(done.removed) == ["fresh", "raft/vote.new"]
        cuts.append(got["raft/seg"])
        # Kept past the synced length: a prefix of what was written, or zeroes.
        data = (work / "node" / "raft" / "seg").read_bytes()
        assert data[:60] == b"s" * 60 and set(data[60:]) <= {0, ord("s")}
        # The record now says all of it is durable: a second cut changes nothing.
        again = cut(work / "node", work / "synced", random.Random(seed + 1))
        assert layout(work / "node") == got and not again.removed and not again.cut
        assert read(work / "synced").files[work / "node" / "raft" / "seg"] == got["raft/seg"]
    assert 60 in cuts and any(c > 60 for c in cuts), cuts  # dropped, and torn


def test_a_file_whose_content_was_never_synced_may_be_kept_lost_or_cut(tmp_path: Path) -> None:
    outcomes = set()
    for seed in range(30):
        root = tmp_path / f"n{seed}"
        root.mkdir()
        (root / "committed").write_bytes(b"c" * 33)
        rec = record(tmp_path / f"r{seed}", [f"D\t{root}\tcommitted"])
        cut(root, rec, random.Random(seed))
        path = root / "committed"
        outcomes.add("gone" if not path.exists() else path.stat().st_size == 33)
    assert outcomes == {"gone", True, False}


def test_without_a_record_nothing_was_durable(tmp_path: Path) -> None:
    root = tmp_path / "node"
    (root / "raft").mkdir(parents=True)
    (root / "raft" / "seg").write_bytes(b"s" * 10)
    done = cut(root, tmp_path / "missing", random.Random(1))
    assert layout(root) == {} and done.removed == ["raft"]


@pytest.mark.skipif(
    importlib.util.find_spec("beanpole._core") is None,
    reason="native module beanpole._core is not built (run `maturin develop`)",
)
def test_a_node_records_every_file_it_synced_at_its_length(tmp_path: Path) -> None:
    """A real one-node cluster with puts: after a clean stop (which syncs what it
    wrote), the record names every file of the log and the marker at its length,
    and lists the directories' entries."""
    cluster = tmp_path / "cluster.toml"
    client = free_port()
    cluster.write_text(
        f'[[node]]\nid = 1\nclient = "127.0.0.1:{client}"\npeer = "127.0.0.1:{free_port()}"\n',
        encoding="utf-8",
    )
    data = tmp_path / "data"
    synced = tmp_path / "synced"
    child = BeanpoleChild(
        "serve", "--cluster", str(cluster), "--node", "1", "-b", str(data),
        env={"BEANPOLE_SYNC_RECORD": str(synced)},
    )  # fmt: skip
    try:
        # The node's banner and its first lead come in either order.
        child.wait_line(r"leads .*serving clients")
        with socket.create_connection(("127.0.0.1", client), timeout=10) as s:
            for i in range(20):
                s.sendall(b"put 0 0 60 5\r\nhello\r\n")
                got = b""
                while not got.endswith(b"\r\n"):
                    got += s.recv(100)
                assert got.startswith(b"INSERTED"), (i, got)
    finally:
        assert child.stop() == 0
    rec = read(synced)
    segments = sorted((data / "raft").glob("*.rlog"))
    assert segments
    for path in [*segments, data / "cluster", data / "raft" / "vote"]:
        assert rec.files.get(path) == path.stat().st_size, (path, rec.files)
    assert {p.name for p in segments} | {"vote"} <= rec.dirs[data / "raft"]
    assert {"cluster", "raft"} <= rec.dirs[data]

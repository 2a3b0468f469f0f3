"""Simulated power loss for bench/cluster_chaos.py: a killed node's data directory cut
back to what it had fsynced, as a machine that lost power would find it.

A node started with ``BEANPOLE_SYNC_RECORD=FILE`` (rust/cluster/src/synced.rs) appends
a line to FILE after every fsync of its storage, before the fsync's outcome is
reported to anyone: ``F <len> <path>`` (the first len bytes of the file are on disk)
and ``D <dir> <name>...`` (the directory's entries, listed before its fsync). After
the node's SIGKILL, ``cut`` makes the directory what a power loss may leave:

- an entry (file or directory) that its directory's last ``D`` line does not list was
  never made durable there: it is removed (a directory never synced keeps nothing);
- a file's bytes past its last ``F`` length were never synced: they are dropped, or,
  as a torn write, the file is cut at a random point past that length and a random
  stretch of what is kept past it is zeroed (pages whose size reached the disk
  before their data). The Raft log's frames are checksummed, and a frame that does
  not read back at the end of the last segment is cut at the start;
- a durable file never fsynced itself (the ``committed`` id, overwritten in place,
  advice only) is kept, removed, emptied or cut short.

Then everything left is fsynced and the record rewritten to say so, so a later power
loss cuts back to this state, not past it. Not simulated: a removed file coming back
(a file unlinked without a directory fsync, as purged log segments are, stays gone),
and a rename undone when the node died between the rename and the directory's fsync
(the window is one system call; the new content is kept).
"""

from __future__ import annotations

import os
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Record:
    """What a node's sync record says is durable."""

    files: dict[Path, int] = field(default_factory=dict)  # path -> durable length
    dirs: dict[Path, set[str]] = field(default_factory=dict)  # dir -> durable entries


def read(path: Path) -> Record:
    rec = Record()
    if not path.exists():
        return rec
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        parts = line.split("\t")
        if parts[0] == "F" and len(parts) == 3 and parts[1].isdigit():
            rec.files[Path(parts[2])] = int(parts[1])
        elif parts[0] == "D" and len(parts) >= 2:
            rec.dirs[Path(parts[1])] = set(parts[2:])
    return rec


@dataclass
class Cut:
    """What a cut did, for the history."""

    removed: list[str] = field(default_factory=list)
    cut: list[str] = field(default_factory=list)  # "name:from->to" (torn: "name:from~to")

    def summary(self) -> dict[str, list[str]]:
        return {"removed": self.removed, "cut": self.cut}


def cut(root: Path, record_path: Path, rng: random.Random) -> Cut:
    """Cut ``root`` (a stopped node's data directory) back to what its record says was
    durable, then make that the durable state."""
    rec = read(record_path)
    done = Cut()
    if root.exists():
        _cut_dir(root, root, rec, rng, done)
    _settle(root, record_path)
    return done


def _cut_dir(root: Path, d: Path, rec: Record, rng: random.Random, done: Cut) -> None:
    durable = rec.dirs.get(d, set())
    for entry in sorted(d.iterdir()):
        rel = str(entry.relative_to(root))
        if entry.name not in durable:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
            done.removed.append(rel)
        elif entry.is_dir():
            _cut_dir(root, entry, rec, rng, done)
        else:
            _cut_file(entry, rel, rec.files.get(entry), rng, done)


def _cut_file(path: Path, rel: str, synced: int | None, rng: random.Random, done: Cut) -> None:
    size = path.stat().st_size
    if synced is None:  # durable name, content never synced
        r = rng.random()
        if r < 0.25:
            path.unlink()
            done.removed.append(rel)
        elif r < 0.75 and size > 0:
            to = rng.randrange(0, size)
            os.truncate(path, to)
            done.cut.append(f"{rel}:{size}~{to}")
        return
    if size <= synced:
        return
    if rng.random() < 0.5:
        os.truncate(path, synced)
        done.cut.append(f"{rel}:{size}->{synced}")
        return
    to = rng.randint(synced + 1, size)
    os.truncate(path, to)
    if rng.random() < 0.5:
        start = rng.randint(synced, to - 1)
        end = rng.randint(start + 1, to)
        with path.open("r+b") as f:
            f.seek(start)
            f.write(bytes(end - start))
        done.cut.append(f"{rel}:{size}~{to} zeroed {start}-{end}")
    else:
        done.cut.append(f"{rel}:{size}~{to}")


def _settle(root: Path, record_path: Path) -> None:
    """Fsync everything under ``root`` and rewrite the record to list it all as
    durable: what survived the power loss is on disk."""
    lines = []
    if root.exists():
        for d, dirs, files in os.walk(root):
            for name in files:
                path = Path(d) / name
                fd = os.open(path, os.O_RDONLY)
                try:
                    os.fsync(fd)
                    lines.append(f"F\t{os.fstat(fd).st_size}\t{path}")
                finally:
                    os.close(fd)
            fd = os.open(d, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            lines.append("\t".join(["D", d, *sorted(dirs + files)]))
    record_path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")

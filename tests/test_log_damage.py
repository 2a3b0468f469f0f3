"""Damaged logs: corruption, a torn tail, half-made segments, a lost spare segment."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import beanpole
from restart_servers import client_on

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("beanpole._core") is None,
    reason="native module beanpole._core is not built (run `maturin develop`)",
)


def segments(log_dir: Path) -> list[Path]:
    return sorted(log_dir.glob("*.log"))


def record_offsets(segment: Path) -> list[int]:
    """Where each record of a segment starts (read by length only, as documented in
    rust/engine/src/wal/format.rs: 40-byte header, then u32 len, u32 crc, len bytes)."""
    data = segment.read_bytes()
    offsets = []
    at = 40
    while at + 8 <= len(data):
        length = int.from_bytes(data[at : at + 4], "little")
        if length == 0:
            break
        offsets.append(at)
        at += 8 + length
    return [*offsets, at]  # the last one is where the next record would go


def fill_and_stop(log_dir: Path, count: int) -> dict[int, bytes]:
    with client_on(log_dir) as c:
        return {c.put(b"job %d" % i, pri=i): b"job %d" % i for i in range(count)}


def test_corruption_in_the_middle_refuses_to_start_unless_skipped(tmp_path: Path) -> None:
    jobs = fill_and_stop(tmp_path, 10)
    segment = next(s for s in segments(tmp_path) if len(record_offsets(s)) > 1)
    offsets = record_offsets(segment)
    data = bytearray(segment.read_bytes())
    data[offsets[4] + 20] ^= 0x40  # inside the fifth record: job 5
    segment.write_bytes(bytes(data))

    with pytest.raises(OSError) as info:
        beanpole.Server(listen="127.0.0.1", port=0, binlog_dir=str(tmp_path)).start()
    message = str(info.value)
    assert f"segment {int(segment.stem)}" in message
    assert f"offset {offsets[4]}" in message

    # Told to skip it, the server starts without that job and keeps every other one.
    with client_on(tmp_path, skip_corrupt=True) as c:
        assert c.peek(5) is None
        for job_id, body in jobs.items():
            if job_id != 5:
                assert c.peek(job_id) == body, job_id


def test_a_torn_tail_before_the_spare_segment_is_cut(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    # What SIGKILL (or a power cut) during a write leaves: the first bytes of the last
    # record reached the file, the rest did not. The preallocated spare segment after
    # it holds only its header.
    jobs = fill_and_stop(tmp_path, 5)
    written = [s for s in segments(tmp_path) if len(record_offsets(s)) > 1]
    assert written and segments(tmp_path)[-1] not in written, "a spare segment follows"
    segment = written[-1]
    end = record_offsets(segment)[-1]
    torn = (60).to_bytes(4, "little") + b"\xde\xad\xbe\xef" + b"\x01" + b"\x07" * 20
    with segment.open("r+b") as f:
        f.seek(end)
        f.write(torn)

    with client_on(tmp_path) as c:
        for job_id, body in jobs.items():
            assert c.peek(job_id) == body
        assert c.put(b"next") == max(jobs) + 1
    # Reported, not silently dropped.
    report = capfd.readouterr().err
    assert f"segment {int(segment.stem)}" in report
    assert f"torn tail cut at offset {end}" in report


@pytest.mark.parametrize("size", [0, 8192])
def test_a_segment_killed_while_being_preallocated_is_harmless(tmp_path: Path, size: int) -> None:
    # Enough live jobs that compaction keeps every segment in between.
    settings: dict[str, object] = {"segment_size": 4096, "max_job_size": 100}
    with client_on(tmp_path, **settings) as c:
        ids = [c.put(b"j" * 50) for _ in range(1000)]
    newest = segments(tmp_path)[-1]
    headerless = tmp_path / f"{int(newest.stem) + 1:010d}.log"
    with headerless.open("wb") as f:
        f.truncate(size)  # created (and maybe preallocated), header not yet written

    for start in range(3):
        with client_on(tmp_path, **settings) as c:
            assert c.peek(ids[0]) is not None, start
            assert c.peek(ids[-1]) is not None, start


def test_ids_are_not_reused_once_their_segments_are_compacted_away(tmp_path: Path) -> None:
    settings: dict[str, object] = {"segment_size": 4096, "max_job_size": 100}
    with client_on(tmp_path, **settings) as c:
        keeper = c.put(b"long-lived")
        for _ in range(300):
            c.delete(c.put(b"0123456789"))
        highest = c.put(b"the highest id")
        c.delete(highest)
        where = int(c.stats()["binlog-current-index"])
        # Work on the one live job until compaction has removed that segment.
        while int(c.stats()["binlog-oldest-index"]) <= where:
            assert c.reserve()[0] == keeper
            c.release(keeper, 0, 0)
    # The newest segment is the spare after the current one and holds no record; a
    # crash just before it was preallocated leaves the directory without it.
    spare = segments(tmp_path)[-1]
    assert len(record_offsets(spare)) == 1, "the newest segment is an empty spare"
    spare.unlink()

    with client_on(tmp_path, **settings) as c:
        assert c.peek(keeper) == b"long-lived"
        assert c.put(b"new") == highest + 1

"""The cases: each drives a fresh beanstalkd into one state of its files and stops it."""

from __future__ import annotations

import shutil
import signal
import tempfile
from collections.abc import Callable
from pathlib import Path

from binlog_burst import Burst
from binlog_journal import Meta, Recorder
from binlog_server import Server, binlog_files, use

# The cases. Each gets a fresh directory and server and returns the recorder.

ODD_TUBE = "t$()+;./_-"
LONG_TUBE = "L" * 199 + ")"


def case_states(exe: str, d: Path, meta: Meta) -> Recorder:
    """Jobs in every state, several tubes, deletes, releases, kicks, counters."""
    srv = Server(exe, d, ["-f", "0", "-s", "8192"])
    ctl, prod, work = srv.connect(), srv.connect(), srv.connect()
    rec = Recorder(ctl)
    use(prod, "default")
    ready1 = rec.put(prod, b"ready in default", pri=100)
    use(prod, ODD_TUBE)
    urgent = rec.put(prod, b"urgent in an odd tube", pri=0, ttr=5)
    use(prod, "emails.v2")
    lowest = rec.put(prod, b"lowest priority", pri=2**32 - 1, ttr=0)
    use(prod, LONG_TUBE)
    rec.put(prod, b"in a 200-byte tube name", pri=7)
    use(prod, "default")
    rec.put(prod, b"delayed for an hour", pri=10, delay=3600)
    use(prod, "graves")
    b1 = rec.put(prod, b"buried third", pri=30)
    b2 = rec.put(prod, b"buried first", pri=31)
    b3 = rec.put(prod, b"buried second", pri=32)
    for j, p in ((b2, 500), (b3, 501), (b1, 502)):
        rec.reserve(work, j)
        rec.bury(work, j, p)
    use(prod, "default")
    held = rec.put(prod, b"reserved when the server stopped", pri=40, ttr=3600)
    rec.reserve(work, held)
    rel_delay = rec.put(prod, b"released with a new priority and a delay", pri=50)
    rec.reserve(work, rel_delay)
    rec.release(work, rel_delay, 51, 1800)
    rel_now = rec.put(prod, b"released with a new priority, no delay", pri=60)
    rec.reserve(work, rel_now)
    rec.release(work, rel_now, 61, 0)  # not journaled (beanstalkd issue 597)
    gone_ready = rec.put(prod, b"deleted while ready")
    rec.delete(prod, gone_ready)
    gone_buried = rec.put(prod, b"deleted while buried")
    rec.reserve(work, gone_buried)
    rec.bury(work, gone_buried, 1)
    rec.delete(prod, gone_buried)
    gone_delayed = rec.put(prod, b"deleted while delayed", delay=600)
    rec.delete(prod, gone_delayed)
    gone_reserved = rec.put(prod, b"deleted while reserved")
    rec.reserve(work, gone_reserved)
    rec.delete(work, gone_reserved)
    kicked_buried = rec.put(prod, b"buried then kicked", pri=70)
    rec.reserve(work, kicked_buried)
    rec.bury(work, kicked_buried, 71)
    rec.kick_job(prod, kicked_buried)
    kicked_delayed = rec.put(prod, b"delayed then kicked", pri=80, delay=900)
    rec.kick_job(prod, kicked_delayed)
    use(prod, "kickme")
    k1 = rec.put(prod, b"kicked by kick 1")
    k2 = rec.put(prod, b"still buried after kick 1")
    for j in (k1, k2):
        rec.reserve(work, j)
        rec.bury(work, j, 5)
    rec.run(prod, "kick 1", "KICKED 1", [k1])
    busy = rec.put(prod, b"reserved twice, buried twice, kicked once", pri=90)
    rec.reserve(work, busy)
    rec.bury(work, busy, 91)
    rec.kick_job(prod, busy)
    rec.reserve(work, busy)
    rec.bury(work, busy, 92)
    touched = rec.put(prod, b"reserved and touched, then released with a delay")
    rec.reserve(work, touched)
    rec.run(work, f"touch {touched}", "TOUCHED", [])
    rec.release(work, touched, 3, 7200)
    del ready1, urgent, lowest
    meta.stop = "SIGTERM"
    meta.args = ["-f", "0", "-s", "8192"]
    srv.stop(signal.SIGTERM)
    return rec


def case_max_size(exe: str, d: Path, meta: Meta) -> Recorder:
    """A 65535-byte body (the default maximum) followed by two small jobs: beanstalkd's own
    replay drops all three."""
    args = ["-f", "0", "-s", "66560"]
    srv = Server(exe, d, args)
    ctl, prod = srv.connect(), srv.connect()
    rec = Recorder(ctl)
    big = bytes((i * 7 + 3) % 251 for i in range(65535))
    rec.put(prod, big, pri=1)
    rec.put(prod, b"small after the big one", pri=2)
    rec.put(prod, b"another small one", pri=3, delay=3000)
    meta.args = args
    meta.stop = "SIGKILL"
    srv.stop()
    # What beanstalkd itself makes of this directory (in a copy: it writes a new file).
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "copy"
        copy.mkdir()
        for p in binlog_files(d):
            shutil.copyfile(p, copy / p.name)
        again = Server(exe, copy, args)
        c = again.connect()
        stats = c.yaml("stats")
        assert stats is not None
        c.close()
        err = again.stop()
        meta.extra["beanstalkd_replay_total_jobs"] = int(stats["total-jobs"])
        meta.extra["beanstalkd_replay_stderr"] = [
            line.replace(str(copy), "DIR") for line in err.splitlines() if line.strip()
        ]
    return rec


def case_binary(exe: str, d: Path, meta: Meta) -> Recorder:
    """Bodies with NUL, CR, LF and CRLF inside, every byte value, and an empty body."""
    args = ["-f", "0", "-s", "4096"]
    srv = Server(exe, d, args)
    ctl, prod = srv.connect(), srv.connect()
    rec = Recorder(ctl)
    use(prod, "bin")
    for body in (
        b"",
        b"\x00",
        b"\r\n",
        b"a\r\nb",
        b"\r\n\r\n",
        b"\x00\x00\r\n\x00",
        b"\r",
        b"\n",
        bytes(range(256)),
        b"\x00" * 100,
        b"ends with CR\r",
    ):
        rec.put(prod, body, pri=len(body))
    meta.args = args
    meta.stop = "SIGKILL"
    srv.stop()
    return rec


def case_multi_file(exe: str, d: Path, meta: Meta) -> Recorder:
    """Small segments: jobs and their updates spread over many files."""
    args = ["-f", "0", "-s", "1024"]
    srv = Server(exe, d, args)
    ctl, prod, work = srv.connect(), srv.connect(), srv.connect()
    rec = Recorder(ctl)
    ids: list[int] = []
    for i in range(24):
        tube = ("alpha", "beta", ODD_TUBE)[i % 3]
        use(prod, tube)
        body = f"job {i} ".encode() + b"." * (i * 5)
        ids.append(rec.put(prod, body, pri=i, delay=3600 if i % 7 == 3 else 0))
    for j in (ids[1], ids[0], ids[5]):
        rec.reserve(work, j)
        rec.bury(work, j, 1000 + j)
    rec.reserve(work, ids[2])
    rec.release(work, ids[2], 5, 600)
    for j in (ids[6], ids[9], ids[20]):
        rec.delete(prod, j)
    rec.kick_job(prod, ids[1])
    rec.reserve(work, ids[8])
    meta.args = args
    meta.stop = "SIGKILL"
    srv.stop()
    return rec


def case_compaction(exe: str, d: Path, meta: Meta) -> Recorder:
    """Compaction copies old jobs forward: two buried ones (copied in put order, which is
    not their bury order) and one that is reserved at that moment (the only way state 2
    reaches a file). A later ready job keeps the oldest file, and with it the bury
    records, alive: once that file goes, the files no longer say in which order jobs
    were buried, as the copies come in the order of their puts."""
    args = ["-f", "0", "-s", "2048"]
    srv = Server(exe, d, args)
    ctl, prod, work = srv.connect(), srv.connect(), srv.connect()
    rec = Recorder(ctl)
    use(prod, "old")
    c = rec.put(prod, b"C: reserved while copied", pri=3, ttr=3600)
    a = rec.put(prod, b"A: buried second", pri=1)
    b = rec.put(prod, b"B: buried first", pri=2)
    for k in range(6):  # compaction may copy several at once; some must stay
        rec.put(prod, f"K{k}: ready, keeps the first file".encode(), pri=6)
    rec.reserve(work, b)
    rec.bury(work, b, 20)
    rec.reserve(work, a)
    rec.bury(work, a, 10)
    rec.reserve(work, c)
    use(prod, "churn")
    n = 0
    while rec.migrations < 3 and n < 200:
        n += 1
        j = rec.put(prod, f"filler {n}".encode() + b"-" * 40)
        rec.delete(prod, j)
    copied = {job_id for job_id, job in rec.disk.items() if job.file > 1}
    if not {a, b, c} <= copied:
        raise RuntimeError(f"compaction copied {sorted(copied)}, not A, B and C")
    if rec.disk[c].state != "reserved":
        raise RuntimeError("the reserved job was not copied while reserved")
    stats = ctl.yaml("stats")
    assert stats is not None
    if stats["binlog-oldest-index"] != "1":
        raise RuntimeError("the first file is gone, and the bury order with it")
    rec.put(prod, b"E: after compaction", pri=5)
    meta.args = args
    meta.stop = "SIGKILL"
    srv.stop()
    return rec


def case_burst_kill(exe: str, d: Path, meta: Meta) -> Recorder:
    """Clients put and delete as fast as they can; beanstalkd is killed in the middle of
    writing a record (found by stopping it and looking at its newest file)."""
    args = ["-s", "4096"]
    srv = Server(exe, d, args)
    rec = Recorder(srv.connect())
    rec.ctl.close()
    burst = Burst(srv, rec, "burst")
    burst.start()
    torn = burst.kill_mid_record(want="body")
    burst.account()
    meta.args = args
    meta.stop = "SIGKILL"
    meta.torn = torn
    print(f"  burst: {burst.attempts} stops, {len(burst.acked)} puts acknowledged")
    return rec


def case_restart(exe: str, d: Path, meta: Meta) -> Recorder:
    """Killed in the middle of a record, restarted on the same directory (beanstalkd
    replays it and buries its buried jobs again), used some more, killed again. The file
    with the torn record is no longer the newest."""
    args = ["-s", "2048"]
    srv = Server(exe, d, args)
    ctl, prod, work = srv.connect(), srv.connect(), srv.connect()
    rec = Recorder(ctl)
    use(prod, "first")
    g1 = [rec.put(prod, f"generation 1 job {i}".encode(), pri=i) for i in range(6)]
    for j in (g1[4], g1[1]):
        rec.reserve(work, j)
        rec.bury(work, j, 100 + j)
    delayed = rec.put(prod, b"delayed across the restart", delay=7200)
    burst = Burst(srv, rec, "burst", clients=2)
    burst.start()
    torn = burst.kill_mid_record(want="job struct")
    for c in (ctl, prod, work):
        c.close()

    srv = Server(exe, d, args)
    ctl, prod, work = srv.connect(), srv.connect(), srv.connect()
    rec.ctl = ctl
    rec.reset_counters()
    burst.account()
    for job_id, job in rec.disk.items():
        sj = rec.stats_job(job_id)
        if sj is None:
            raise RuntimeError(f"job {job_id} did not survive beanstalkd's own replay")
        # (Compaction may have copied it during the burst; the copy holds the same
        # struct, as nothing unjournaled happened to these jobs.)
        job.file = int(sj["file"])
    use(prod, "second")
    g2 = [rec.put(prod, f"generation 2 job {i}".encode(), pri=50 + i) for i in range(4)]
    rec.kick_job(prod, g1[1])
    rec.reserve(work, g2[0])
    rec.bury(work, g2[0], 7)
    rec.reserve(work, g1[2])
    rec.bury(work, g1[2], 8)
    rec.delete(prod, g1[3])
    rec.reserve(work, g2[1])
    rec.release(work, g2[1], 9, 60)
    del delayed
    meta.args = args
    meta.stop = "SIGKILL, restarted, SIGKILL"
    meta.torn = torn
    srv.stop()
    return rec


def case_deleted(exe: str, d: Path, meta: Meta) -> Recorder:
    """Every job deleted: nothing live, but ids must continue after the highest."""
    args = ["-f", "0", "-s", "4096"]
    srv = Server(exe, d, args)
    ctl, prod = srv.connect(), srv.connect()
    rec = Recorder(ctl)
    for i in range(3):
        j = rec.put(prod, f"to be deleted {i}".encode())
        rec.delete(prod, j)
    meta.args = args
    meta.stop = "SIGKILL"
    srv.stop()
    return rec


def case_fresh(exe: str, d: Path, meta: Meta) -> Recorder:
    """Started and stopped with no job ever put: one file with a version and zeros."""
    args = ["-s", "4096"]
    srv = Server(exe, d, args)
    rec = Recorder(srv.connect())
    meta.args = args
    meta.stop = "SIGKILL"
    srv.stop()
    return rec


CASES: dict[str, Callable[[str, Path, Meta], Recorder]] = {
    "states": case_states,
    "max-size": case_max_size,
    "binary": case_binary,
    "multi-file": case_multi_file,
    "compaction": case_compaction,
    "burst-kill": case_burst_kill,
    "restart": case_restart,
    "deleted": case_deleted,
    "fresh": case_fresh,
}

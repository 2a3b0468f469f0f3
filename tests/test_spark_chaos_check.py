"""The checker of bench/spark_chaos.py on small made-up histories: a clean one passes,
and a loss, an unexpected row, a job delivered twice, and a job left behind after a
clean end are each caught (no Spark needed)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

from spark_chaos_check import (
    History,
    Left,
    Progress,
    Put,
    Row,
    Taken,
    body_for,
    check,
    counter_growth,
    seq_of,
)

A, B = "127.0.0.1:1001", "127.0.0.1:1002"


def put(seq: int, server: str = A, job_id: int | None = None, **kw: object) -> Put:
    fields: dict[str, object] = {"incarnation": 0, "status": "ok", "ttr": 60, "cycle": 1}
    fields.update(kw)
    return Put(
        seq=seq,
        server=server,
        id=seq if job_id is None else job_id,
        sent=100.0 + seq,
        **fields,  # type: ignore[arg-type]
    )


def row(seq: int, batch: int, server: str = A, job_id: int | None = None, **kw: object) -> Row:
    fields: dict[str, object] = {"cycle": 1, "phase": "main"}
    fields.update(kw)
    return Row(
        batch=batch,
        server=server,
        id=seq if job_id is None else job_id,
        body=body_for(seq),
        **fields,  # type: ignore[arg-type]
    )


def clean() -> History:
    """Three jobs on A and two on B, each delivered once, in two batches."""
    puts = [put(1), put(2), put(3), put(4, B, 1), put(5, B, 2)]
    rows = [row(1, 0), row(2, 0), row(4, 0, B, 1), row(3, 1), row(5, 1, B, 2)]
    return History(puts=puts, rows=rows, faults={1: "clean_stop"}, planned={0: 200.0, 1: 201.0})


def test_bodies_are_unique_vary_in_length_and_name_their_job() -> None:
    bodies = [body_for(s) for s in range(1, 2000)]
    assert len(set(bodies)) == len(bodies)
    assert len({len(b) for b in bodies}) > 100
    assert all(seq_of(b) == s for s, b in enumerate(bodies, start=1))
    assert seq_of(b"job-5-" + b"x" * 10) is None  # a made-up body with a real prefix
    assert seq_of(b"something else") is None


def test_a_clean_history_passes() -> None:
    v = check(clean())
    assert v.ok, v.violations
    assert (v.acknowledged, v.delivered, len(v.lost), v.unexpected) == (5, 5, 0, [])
    assert sum(v.repeats.values()) == 0


def test_a_job_neither_delivered_nor_in_a_server_is_lost() -> None:
    h = clean()
    h.puts.append(put(6))
    v = check(h)
    assert [p.seq for p in v.lost] == [6]
    assert not v.ok and v.violations[0].startswith("lost: 1 ")


def test_a_job_still_in_a_server_is_not_lost() -> None:
    h = clean()
    h.puts.append(put(6))
    h.in_server.add(body_for(6))
    assert check(h).ok


def test_a_put_without_reply_is_not_lost_when_missing() -> None:
    h = clean()
    h.puts.append(put(6, status="unknown", job_id=None))
    assert check(h).ok


def test_jobs_of_a_server_restarted_without_a_log_are_counted_apart() -> None:
    h = clean()
    h.puts.append(put(6, B, 3))
    h.lossy = {(B, 0)}
    v = check(h)
    assert v.ok, v.violations
    assert (v.lost_with_server, len(v.lost)) == (1, 0)


def test_a_loss_by_a_reused_id_is_named() -> None:
    # B restarted without a log; a job of its new incarnation has id 2, which a batch
    # of the old one named, and it vanished: the delete of batch 1 took it.
    h = clean()
    h.lossy = {(B, 0)}
    h.puts.append(put(6, B, 2, incarnation=1, cycle=2))
    h.progress = [Progress(1, "main", 1, {"batch": 2, "jobs": {B: {"t": "2"}, A: {"t": "3"}}})]
    v = check(h)
    assert (len(v.lost), v.lost_reused_id) == (1, 1)
    assert not v.ok


def test_a_row_no_producer_put_is_unexpected() -> None:
    h = clean()
    h.rows.append(Row(1, A, 99, b"job-99-forged", 1, "main"))
    v = check(h)
    assert len(v.unexpected) == 1 and "no producer put" in v.unexpected[0]
    assert not v.ok


def test_a_row_under_another_jobs_id_is_unexpected() -> None:
    h = clean()
    h.rows[0] = row(1, 0, job_id=7)
    v = check(h)
    assert len(v.unexpected) == 1 and "it was put to" in v.unexpected[0]


def test_a_row_of_a_refused_put_is_unexpected() -> None:
    h = clean()
    h.puts.append(put(6, status="refused", job_id=None))
    h.rows.append(row(6, 1))
    v = check(h)
    assert any("refused" in u for u in v.unexpected)


def test_a_row_read_by_a_batch_planned_before_its_put_is_unexpected() -> None:
    # A replay after a restart without a log reserved a new job under an old id.
    h = clean()
    h.planned[1] = 104.0 - 1.0  # job 4 was sent at 104.0, a second after batch 1's plan
    h.rows.append(row(4, 1, B, 1))  # also a repeat (batch 0 has it): both are seen
    v = check(h)
    assert any("after the batch was planned" in u for u in v.unexpected)


def test_a_job_in_two_batches_after_a_clean_stop_is_a_violation() -> None:
    h = clean()
    h.rows.append(row(2, 2, phase="settle"))
    v = check(h)
    assert v.repeats == {"clean stop": 1}
    assert any("delivered twice after clean stop" in x for x in v.violations)


def test_a_job_twice_in_one_batch_is_a_repeat() -> None:
    h = clean()
    h.rows.append(row(3, 1))
    v = check(h)
    assert v.repeats == {"clean availableNow": 1}  # the main run follows a settle
    assert not v.ok


def test_repeats_after_a_sigkill_pass_when_counted_and_bounded() -> None:
    h = clean()
    h.faults = {1: "driver_kill"}
    h.rows.append(row(2, 2, phase="settle"))
    h.progress = [
        Progress(1, "main", 0, {"batch": 1, "redelivered": 0, "lost": 0}),
        Progress(1, "settle", 2, {"batch": 3, "redelivered": 1, "lost": 0}),
    ]
    v = check(h)
    assert v.repeats == {"driver SIGKILL": 1}
    assert v.ok, v.violations


def test_uncounted_repeats_after_a_sigkill_are_a_violation() -> None:
    h = clean()
    h.faults = {1: "driver_kill"}
    h.rows.append(row(2, 2, phase="settle"))
    v = check(h)
    assert any("(uncounted)" in x for x in v.violations)


def test_unbounded_repeats_after_a_sigkill_are_a_violation() -> None:
    h = clean()
    h.faults = {1: "driver_kill"}
    h.max_rows = 1
    h.rows += [row(1, 2, phase="settle"), row(2, 2, phase="settle"), row(3, 3, phase="settle")]
    h.progress = [Progress(1, "settle", 3, {"batch": 4, "redelivered": 3})]
    v = check(h)
    assert [x for x in v.violations if "(unbounded)" in x]
    assert not [x for x in v.violations if "(uncounted)" in x]


def test_a_job_taken_by_another_worker_under_a_slow_sink_is_a_violation() -> None:
    h = clean()
    h.faults = {1: "ttr"}
    h.taken = [Taken(body_for(3), 1)]
    v = check(h)
    assert v.repeats == {"TTR expiry": 1}
    assert any("after TTR expiry" in x for x in v.violations)


def test_a_job_left_in_a_server_after_a_clean_stop_is_a_violation() -> None:
    h = clean()
    h.left = [Left(1, "clean stop", body_for(3))]
    v = check(h)
    assert v.left == {"clean stop": 1}
    assert any("left in a server after clean stop" in x for x in v.violations)


def test_counter_growth_is_per_cycle_from_running_totals() -> None:
    progress = [
        Progress(1, "main", 0, {"batch": 1, "redelivered": 0, "lost": 0, "jobs": {}}),
        Progress(1, "settle", 1, {"batch": 2, "redelivered": 5, "lost": 1}),
        Progress(2, "main", 2, {"batch": 3, "redelivered": 5, "lost": 1, "skipped": 4}),
        Progress(3, "settle", 3, {"batch": 4, "redelivered": 7, "lost": 1, "skipped": 4}),
    ]
    grew = counter_growth(progress)
    assert grew == {1: {"redelivered": 5, "lost": 1}, 2: {"skipped": 4}, 3: {"redelivered": 2}}

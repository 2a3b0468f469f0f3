"""The checker of bench/cluster_chaos.py on small made-up histories: each kind of
violation is caught, and the histories that only look suspicious (overlapping
operations, replies that never came, TTR expiry, releases, closed connections,
killed nodes) pass."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

from cluster_chaos_check import History, Verdict, check, parse, report

MS = 1_000_000  # ns


class Made:
    """A history written by hand: times in milliseconds, connections opened at 0 on
    node 1 when first used, bodies named by the test."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.conns: set[int] = set()
        self.ids: dict[str, int] = {}

    def _conn(self, conn: int) -> None:
        if conn not in self.conns:
            self.conns.add(conn)
            self.records.append(
                {"t": "open", "conn": conn, "client": f"c{conn}", "node": 1, "at": 0}
            )

    def op(
        self, conn: int, cmd: str, inv: float, ret: float | None, reply: str | None, **kw: Any
    ) -> Made:
        self._conn(conn)
        self.records.append(
            {
                "t": "op",
                "conn": conn,
                "client": f"c{conn}",
                "cmd": cmd,
                "inv": int(inv * MS),
                "ret": None if ret is None else int(ret * MS),
                "reply": None if ret is None else reply,
                **kw,
            }
        )
        return self

    def put(self, conn: int, body: str, inv: float, ret: float | None, **kw: Any) -> Made:
        job_id = self.ids.setdefault(body, len(self.ids) + 1)
        fields: dict[str, Any] = {"tube": "a", "pri": 0, "delay": 0, "ttr": 1, "id": job_id}
        fields.update(kw)
        return self.op(conn, "put", inv, ret, "INSERTED", target=body, **fields)

    def reserve(self, conn: int, body: str, inv: float, ret: float | None, **kw: Any) -> Made:
        fields: dict[str, Any] = {"watch": ["a"], "id": self.ids.get(body), "body": body}
        fields.update(kw)
        return self.op(conn, "reserve-with-timeout", inv, ret, "RESERVED", **fields)

    def on(
        self, conn: int, cmd: str, job: str, inv: float, ret: float | None, reply: str, **kw: Any
    ) -> Made:
        """A command naming a job by the id learned for ``job``."""
        return self.op(conn, cmd, inv, ret, reply, target=job, id=self.ids.get(job), **kw)

    def open(self, conn: int, at: float, node: int) -> Made:
        """Connection ``conn`` opened at ``at`` to ``node`` (before its first use)."""
        self.conns.add(conn)
        self.records.append(
            {"t": "open", "conn": conn, "client": f"c{conn}", "node": node, "at": int(at * MS)}
        )
        return self

    def seen(self, kind: str, node: int, at: float, seen: float) -> Made:
        """What the harness's monitor saw of a cluster's leadership, in [at, seen]."""
        self.records.append(
            {"t": "fault", "kind": kind, "node": node, "at": int(at * MS), "seen": int(seen * MS)}
        )
        return self

    def close(self, conn: int, at: float) -> Made:
        self.records.append({"t": "close", "conn": conn, "at": int(at * MS)})
        return self

    def fault(
        self, kind: str, at: float, node: int = 1, peers: list[int] | None = None
    ) -> Made:
        record: dict[str, Any] = {"t": "fault", "kind": kind, "node": node, "at": int(at * MS)}
        if peers is not None:
            record["peers"] = peers
        self.records.append(record)
        return self

    def end(self, at: float) -> History:
        self.records.append(
            {"t": "end", "inv": int(at * MS), "ret": int((at + 1) * MS), "empty": True}
        )
        return parse(self.records)


def done(body: str = "j1", ttr: int = 1) -> Made:
    """A put, a reserve and a delete, one after the other."""
    m = Made().put(1, body, 0, 1, ttr=ttr).reserve(2, body, 2, 3)
    return m.on(2, "delete", body, 4, 5, "DELETED")


def counts(v: Verdict) -> dict[str, int]:
    return {k: n for k, n in v.counts().items() if n}


def test_a_plain_history_passes() -> None:
    v = check(done().end(10))
    assert v.ok, report(v)
    assert (v.jobs, v.acknowledged) == (1, 1)


# -- each kind is caught ------------------------------------------------------------


def test_an_acknowledged_put_never_deleted_and_gone_at_the_end_is_lost() -> None:
    v = check(done().put(1, "j2", 6, 7).end(20))
    assert counts(v) == {"lost": 1, "linearizability": 1}
    assert "'j2'" in v.lost.examples[0]


def test_losses_are_not_judged_without_an_empty_end() -> None:
    m = done().put(1, "j2", 6, 7)
    v = check(parse(m.records))
    assert v.lost.count == 0 and not v.ok
    assert "not judged" in v.problems[0]


def test_a_job_reserved_after_its_delete_was_acknowledged_is_resurrected() -> None:
    v = check(done().reserve(3, "j1", 6, 7).on(3, "delete", "j1", 8, 9, "DELETED").end(20))
    assert v.resurrected.count == 1 and v.linearizability.count == 1
    assert "c3#3 reserve-with-timeout RESERVED" in v.resurrected.examples[0]


def test_a_peek_or_stats_job_finding_a_deleted_job_is_a_resurrection() -> None:
    for cmd, reply in [("peek", "FOUND"), ("stats-job", "OK")]:
        extra = {"body": "j1"} if cmd == "peek" else {"state": "ready"}
        v = check(done().on(3, cmd, "j1", 6, 7, reply, **extra).end(20))
        assert v.resurrected.count == 1, cmd
        assert v.linearizability.count == 1, cmd


def test_a_second_reserve_while_the_first_holder_still_holds_it_is_a_duplicate() -> None:
    m = Made().put(1, "j1", 0, 1, ttr=3).reserve(2, "j1", 2, 3).reserve(3, "j1", 500, 501)
    v = check(m.on(3, "delete", "j1", 600, 601, "DELETED").end(5000))
    assert v.duplicates.count == 1 and v.linearizability.count == 1
    assert "c2#2" in v.duplicates.examples[0] and "c3#3" in v.duplicates.examples[0]


def test_a_touch_moves_the_deadline_a_duplicate_is_measured_from() -> None:
    m = Made().put(1, "j1", 0, 1, ttr=1).reserve(2, "j1", 2, 3)
    m.on(2, "touch", "j1", 800, 801, "TOUCHED").reserve(3, "j1", 1300, 1301)
    v = check(m.on(3, "delete", "j1", 1400, 1401, "DELETED").end(5000))
    assert v.duplicates.count == 1 and v.linearizability.count == 1


def test_a_body_never_put_is_unexpected() -> None:
    v = check(done().reserve(3, "nobody", 6, 7, id=99).end(20))
    assert v.unexpected.count == 1 and "never put" in v.unexpected.examples[0]


def test_a_job_under_another_id_or_from_an_unwatched_tube_is_unexpected() -> None:
    v = check(Made().put(1, "j1", 0, 1).reserve(2, "j1", 2, 3, id=7).end(20))
    assert v.unexpected.count == 1 and "put as id 1" in v.unexpected.examples[0]
    v = check(Made().put(1, "j1", 0, 1).reserve(2, "j1", 2, 3, watch=["b"]).end(20))
    assert v.unexpected.count == 1 and "watcher of" in v.unexpected.examples[0]


def test_states_no_order_explains_are_linearizability_violations() -> None:
    # stats-job says buried, though nobody buried it.
    m = done().on(3, "stats-job", "j1", 2.5, 2.6, "OK", state="buried")
    assert counts(check(m.end(20))) == {"linearizability": 1}
    # A reserve before the put's delay ran out.
    m = Made().put(1, "j1", 0, 1, delay=2).reserve(2, "j1", 500, 501)
    assert counts(check(m.on(2, "delete", "j1", 600, 601, "DELETED").end(5000))) == {
        "linearizability": 1
    }
    # A release by a connection that never reserved the job.
    m = Made().put(1, "j1", 0, 1).on(3, "release", "j1", 2, 3, "RELEASED")
    assert counts(check(m.on(3, "delete", "j1", 4, 5, "DELETED").end(20))) == {"linearizability": 1}
    # A delete answered NOT_FOUND while the job was ready and nobody could hold it.
    m = Made().put(1, "j1", 0, 1).on(3, "delete", "j1", 2, 3, "NOT_FOUND")
    assert counts(check(m.on(3, "delete", "j1", 4, 5, "DELETED").end(20))) == {"linearizability": 1}


def test_a_reserve_timing_out_while_a_job_was_surely_ready_is_caught() -> None:
    m = done().put(1, "j2", 6, 7).op(3, "reserve-with-timeout", 10, 20, "TIMED_OUT", watch=["a"])
    v = check(m.reserve(3, "j2", 30, 31).on(3, "delete", "j2", 32, 33, "DELETED").end(40))
    assert counts(v) == {"timed_out": 1}


def test_a_search_over_its_budget_is_undecided_not_a_violation() -> None:
    m = Made().put(1, "j1", 0, 100)
    for k in range(10):  # ten reads all overlapping the put and each other
        m.on(2 + k, "peek", "j1", 1 + k, 200 + k, "FOUND", body="j1")
    m.reserve(20, "j1", 300, 301).on(20, "delete", "j1", 302, 303, "DELETED")
    v = check(m.end(400), budget=5)
    assert counts(v) == {"undecided": 1}
    assert check(m.end(400)).ok


# -- what only looks wrong ----------------------------------------------------------


def test_overlapping_operations_may_take_effect_in_either_order() -> None:
    # The reserve replies before the put does; a delete NOT_FOUND overlaps the reserve.
    m = Made().put(1, "j1", 0, 10).reserve(2, "j1", 5, 8)
    m.on(3, "delete", "j1", 6, 9, "NOT_FOUND").on(2, "delete", "j1", 11, 12, "DELETED")
    # A release overlapping another connection's reserve of the same job.
    m.put(1, "j2", 20, 21).reserve(4, "j2", 22, 23).on(4, "release", "j2", 24, 40, "RELEASED")
    m.reserve(5, "j2", 30, 35).on(5, "delete", "j2", 41, 42, "DELETED")
    v = check(m.end(50))
    assert v.ok, report(v)


def test_a_put_without_reply_may_or_may_not_have_happened() -> None:
    m = Made().put(1, "j1", 0, None).put(2, "j2", 0, None)
    m.reserve(3, "j2", 5, 6).on(3, "delete", "j2", 7, 8, "DELETED")
    v = check(m.end(20))
    assert v.ok, report(v)
    assert v.acknowledged == 0


def test_a_job_comes_back_after_its_ttr() -> None:
    m = Made().put(1, "j1", 0, 1, ttr=1).reserve(2, "j1", 2, 3).reserve(3, "j1", 1100, 1101)
    m.on(2, "delete", "j1", 1200, 1201, "NOT_FOUND").on(3, "delete", "j1", 1300, 1301, "DELETED")
    v = check(m.end(2000))
    assert v.ok, report(v)


def test_a_former_holder_may_delete_a_job_that_timed_out_and_is_ready() -> None:
    m = Made().put(1, "j1", 0, 1, ttr=1).reserve(2, "j1", 2, 3)
    v = check(m.on(2, "delete", "j1", 1500, 1501, "DELETED").end(2000))
    assert v.ok, report(v)


def test_release_then_reserve_again() -> None:
    m = Made().put(1, "j1", 0, 1, ttr=5).reserve(2, "j1", 2, 3)
    m.on(2, "release", "j1", 4, 5, "RELEASED", delay=0).reserve(3, "j1", 6, 7)
    m.on(3, "release", "j1", 8, 9, "RELEASED", delay=1).reserve(2, "j1", 1100, 1101)
    v = check(m.on(2, "delete", "j1", 1200, 1201, "DELETED").end(2000))
    assert v.ok, report(v)


def test_a_closed_connection_or_a_killed_node_gives_its_reservations_back() -> None:
    m = Made().put(1, "j1", 0, 1, ttr=60).reserve(2, "j1", 2, 3).close(2, 10)
    m.reserve(3, "j1", 20, 21).fault("kill", 30).reserve(4, "j1", 40, 41)
    v = check(m.on(4, "delete", "j1", 50, 51, "DELETED").end(100))
    assert v.ok, report(v)


def test_a_reserve_without_reply_may_have_held_the_job() -> None:
    m = Made().put(1, "j1", 0, 1, ttr=60)
    m.op(2, "reserve-with-timeout", 2, None, None, watch=["a"]).close(2, 50)
    m.on(3, "delete", "j1", 10, 11, "NOT_FOUND").on(
        3, "stats-job", "j1", 12, 13, "OK", state="reserved"
    )
    m.reserve(4, "j1", 60, 61).on(4, "delete", "j1", 62, 63, "DELETED")
    v = check(m.end(100))
    assert v.ok, report(v)
    # Without that reserve, the same delete NOT_FOUND is a violation.
    m.records = [r for r in m.records if r.get("conn") != 2]
    assert counts(check(m.end(100))) == {"linearizability": 1}


def test_delays_kicks_burials_and_reads() -> None:
    m = Made().put(1, "j1", 0, 1, delay=1).on(1, "peek-delayed", "j1", 100, 101, "FOUND", body="j1")
    m.reserve(2, "j1", 1200, 1201).on(2, "bury", "j1", 1202, 1203, "BURIED")
    m.on(3, "stats-job", "j1", 1204, 1205, "OK", state="buried")
    m.op(3, "kick", 1206, 1207, "KICKED", tube="a", count=1)
    m.on(3, "peek-ready", "j1", 1208, 1209, "FOUND", body="j1").reserve(3, "j1", 1210, 1211)
    m.on(3, "bury", "j1", 1212, 1213, "BURIED").on(3, "kick-job", "j1", 1214, 1215, "KICKED")
    m.on(3, "peek", "j1", 1216, 1217, "FOUND", body="j1").reserve(2, "j1", 1218, 1219)
    m.on(2, "touch", "j1", 1220, 1221, "TOUCHED").on(2, "delete", "j1", 1222, 1223, "DELETED")
    m.on(3, "peek", "j1", 1230, 1231, "NOT_FOUND")
    v = check(m.end(2000))
    assert v.ok, report(v)


def test_a_delete_without_reply_may_have_deleted_it() -> None:
    m = Made().put(1, "j1", 0, 1).reserve(2, "j1", 2, 3).on(2, "delete", "j1", 4, None, "")
    v = check(m.close(2, 1000).end(2000))
    assert v.ok, report(v)


def test_timed_out_reserves_that_are_not_provably_wrong() -> None:
    # Overlapping the put; and after a reserve without reply that may hold the job.
    m = Made().put(1, "j1", 0, 10).op(3, "reserve-with-timeout", 5, 15, "TIMED_OUT", watch=["a"])
    m.op(4, "reserve-with-timeout", 20, None, None, watch=["a"]).close(4, 25)
    m.op(3, "reserve-with-timeout", 30, 31, "TIMED_OUT", watch=["a"])
    # Watching another tube.
    m.op(3, "reserve-with-timeout", 32, 33, "TIMED_OUT", watch=["b"])
    m.reserve(3, "j1", 40, 41).on(3, "delete", "j1", 42, 43, "DELETED")
    v = check(m.end(100))
    assert v.ok, report(v)


def test_on_one_node_a_reserve_without_reply_ends_with_the_process() -> None:
    m = Made().op(4, "reserve-with-timeout", 2, None, None, watch=["a"])
    m.put(1, "j2", 10, 11).op(3, "reserve-with-timeout", 20, 21, "TIMED_OUT", watch=["a"])
    m.reserve(3, "j2", 30, 31).on(3, "delete", "j2", 32, 33, "DELETED")
    # The reserve of connection 4 may still take j2: not provably wrong.
    assert check(m.end(100)).ok
    # After the node was killed and restarted, it cannot.
    m.fault("kill", 5)
    assert counts(check(m.end(100))) == {"timed_out": 1}


def test_in_a_cluster_a_change_of_leader_keeps_every_reservation() -> None:
    # Every client of a cluster is a session whose reservations are replicated: the
    # leader's own (connection 2 on node 1, which served then) keeps its job when
    # node 1's term ends and node 2 serves, so another client's reserve of it is a
    # duplicate.
    m = Made().seen("leader", 1, 0, 0).open(1, 0, 1).open(2, 10, 1).open(3, 50, 2)
    m.put(1, "j1", 0, 1, ttr=60).reserve(2, "j1", 12, 13)
    m.seen("depose", 1, 20, 60).seen("leader", 2, 30, 45)
    m.reserve(3, "j1", 100, 101).on(3, "delete", "j1", 102, 103, "DELETED")
    assert counts(check(m.end(200))) == {"duplicates": 1, "linearizability": 1}
    # A follower's client (node 3 never served) keeps its job the same way.
    m = Made().seen("leader", 1, 0, 0).open(1, 0, 1).open(2, 40, 3).open(3, 41, 2)
    m.put(1, "j1", 0, 1, ttr=60).reserve(2, "j1", 42, 43).seen("leader", 2, 30, 45)
    m.reserve(3, "j1", 44, 46).on(3, "delete", "j1", 102, 103, "DELETED")
    assert counts(check(m.end(200))) == {"duplicates": 1, "linearizability": 1}


def test_in_a_cluster_reservations_end_with_their_node_or_its_links() -> None:
    # Connection 2 on node 1 holds j1; node 1's term ends and node 2 serves.
    def made() -> Made:
        m = Made().seen("leader", 1, 0, 0).open(1, 0, 1).open(2, 10, 1).open(3, 50, 2)
        m.put(1, "j1", 0, 1, ttr=60).reserve(2, "j1", 12, 13)
        return m.seen("depose", 1, 20, 60).seen("leader", 2, 30, 45)

    # Its node's process ends: so does the connection, and in time its job.
    m = made().fault("kill", 70, node=1)
    m.reserve(3, "j1", 100, 101).on(3, "delete", "j1", 102, 103, "DELETED")
    assert check(m.end(200)).ok
    # A cut of its node's links may end it too (its session loses its way).
    m = made().fault("cut", 70, node=2, peers=[1])
    m.reserve(3, "j1", 100, 101).on(3, "delete", "j1", 102, 103, "DELETED")
    assert check(m.end(200)).ok
    # Its TTR, or its client's close, end it as on one node.
    m = made().close(2, 80)
    m.reserve(3, "j1", 100, 101).on(3, "delete", "j1", 102, 103, "DELETED")
    assert check(m.end(200)).ok


def test_a_bulk_kick_without_reply_may_have_kicked_a_buried_job() -> None:
    # Found on one node (seed 13 of ``--seconds 30``): a kick whose reply a one-way
    # cut dropped had kicked the buried job another worker then reserved.
    m = Made().put(1, "j1", 0, 1).reserve(1, "j1", 2, 3).on(1, "bury", "j1", 4, 5, "BURIED")
    m.op(2, "kick", 10, None, None, tube="a")
    m.reserve(3, "j1", 2000, 2001).on(3, "delete", "j1", 2002, 2003, "DELETED")
    assert check(m.end(3000)).ok
    m.records = [r for r in m.records if r.get("cmd") != "kick"]
    assert counts(check(m.end(3000))) == {"linearizability": 1}

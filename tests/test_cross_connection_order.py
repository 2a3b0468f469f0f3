"""Cross-connection order: a connection woken in the middle of another connection's
pipelined batch (README, differences from beanstalkd).

beanstalkd applies one command per connection per turn of its event loop, so when a
pipelined batch answers a waiting ``reserve`` that has commands queued behind it, the
two connections' remaining commands run interleaved. beanpole applies a connection's
whole buffered batch under one lock (where its pipelined speed comes from), so the
answering batch finishes first, then the woken connection's queued commands run. This
is a difference by design, not a bug to fix; these two minimal cases pin both servers'
exact replies so that beanpole's changes only on purpose (and so that a beanstalkd that
behaves otherwise is noticed too). ``tests/diffrun.py`` keeps this class out of its
random sequences (``diffrules.allowed``).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

import pytest

import diffrun
from diffgen import DEFAULT_MAX_JOB_SIZE, PROBE, Case, Step
from diffmodel import ConnModel
from diffrules import PRIVATE_NOTE, allowed
from diffwire import Conn
from servers import KINDS, start
from test_differential import servers_missing
from transcript import protocol_version

PATIENCE = 5.0


def wait_for_waiting(address: tuple[str, int], count: int) -> None:
    """Until ``stats`` (asked on a connection of its own) shows ``count`` connections
    waiting in reserve."""
    with socket.create_connection(address, timeout=PATIENCE) as admin:
        deadline = time.monotonic() + PATIENCE
        while time.monotonic() < deadline:
            admin.sendall(b"stats\r\n")
            data = b""
            while data.count(b"\r\n") < 2:
                chunk = admin.recv(65536)
                assert chunk, "the server closed the stats connection"
                data += chunk
            if b"\ncurrent-waiting: %d\n" % count in data:
                return
        pytest.fail(f"{count} connections never waited in reserve")


def replies(conn: Conn, count: int) -> list[bytes]:
    assert conn.read_until(count, PATIENCE), [e.data for e in conn.events]
    return [e.data for e in conn.events]


def nothing_more(*conns: Conn) -> None:
    """No stray reply is pending on any of them: the next reply is the probe's."""
    for c in conns:
        before = len(c.events)
        c.send(b"list-tube-used\r\n")
        assert c.read_until(before + 1, PATIENCE)
        assert c.events[before].data.startswith(b"USING "), c.events[before:]


# Case 1: C0 waits in reserve on default with a put queued behind it; C1 sends put,
# put, list-tube-used, put in one write. Its first put answers C0's reserve.
CASE1_C0 = {
    "beanstalkd": [b"RESERVED 1 1\r\na\r\n", b"INSERTED 3\r\n"],
    # C1's batch runs to its end first: C0's queued put gets the last id.
    "beanpole": [b"RESERVED 1 1\r\na\r\n", b"INSERTED 4\r\n"],
}
CASE1_C1 = {
    "beanstalkd": [b"INSERTED 1\r\n", b"INSERTED 2\r\n", b"USING default\r\n", b"INSERTED 4\r\n"],
    "beanpole": [b"INSERTED 1\r\n", b"INSERTED 2\r\n", b"USING default\r\n", b"INSERTED 3\r\n"],
}


@pytest.mark.parametrize("kind", KINDS)
def test_a_batch_that_answers_a_reserve_runs_before_the_commands_queued_behind_it(
    kind: str,
) -> None:
    with start(kind) as srv:
        c0, c1 = Conn(srv.address), Conn(srv.address)
        try:
            c0.send(b"reserve\r\n")
            wait_for_waiting(srv.address, 1)
            c0.send(b"put 0 0 60 1\r\nq\r\n")  # queued behind the waiting reserve
            c1.send(
                b"put 0 0 60 1\r\na\r\nput 0 0 60 1\r\nb\r\nlist-tube-used\r\n"
                b"put 0 0 60 1\r\nc\r\n"
            )
            assert replies(c1, 4) == CASE1_C1[kind]
            assert replies(c0, 2) == CASE1_C0[kind]
            nothing_more(c0, c1)
        finally:
            c0.close()
            c1.close()


# Case 2: C2 watches only w and waits in reserve with reserve-with-timeout 0 queued
# behind it; C0 waits in reserve on default with use w, put a, put b, list-tube-used,
# peek-ready queued behind it; C1's put wakes C0. C0's put a answers C2's reserve.
CASE2_C0 = {
    "beanstalkd": [
        b"RESERVED 1 1\r\nx\r\n",
        b"USING w\r\n",
        b"INSERTED 2\r\n",
        b"INSERTED 3\r\n",
        b"USING w\r\n",
        # C2's reserve-with-timeout 0 ran between C0's commands and took b.
        b"NOT_FOUND\r\n",
    ],
    "beanpole": [
        b"RESERVED 1 1\r\nx\r\n",
        b"USING w\r\n",
        b"INSERTED 2\r\n",
        b"INSERTED 3\r\n",
        b"USING w\r\n",
        # C0's queued commands ran to their end before C2's.
        b"FOUND 3 1\r\nb\r\n",
    ],
}
CASE2_C2 = [
    b"WATCHING 2\r\n",
    b"WATCHING 1\r\n",
    b"RESERVED 2 1\r\na\r\n",
    b"RESERVED 3 1\r\nb\r\n",
]


@pytest.mark.parametrize("kind", KINDS)
def test_a_woken_connection_runs_its_queued_commands_before_another_it_wakes(kind: str) -> None:
    with start(kind) as srv:
        c0, c1, c2 = Conn(srv.address), Conn(srv.address), Conn(srv.address)
        try:
            c2.send(b"watch w\r\nignore default\r\n")
            assert replies(c2, 2) == CASE2_C2[:2]
            c2.send(b"reserve\r\nreserve-with-timeout 0\r\n")
            wait_for_waiting(srv.address, 1)
            c0.send(
                b"reserve\r\nuse w\r\nput 0 0 60 1\r\na\r\nput 0 0 60 1\r\nb\r\n"
                b"list-tube-used\r\npeek-ready\r\n"
            )
            wait_for_waiting(srv.address, 2)
            c1.send(b"put 0 0 60 1\r\nx\r\n")
            assert replies(c1, 1) == [b"INSERTED 1\r\n"]
            assert replies(c0, 6) == CASE2_C0[kind]
            assert replies(c2, 4) == CASE2_C2
            nothing_more(c0, c1, c2)
        finally:
            for c in (c0, c1, c2):
                c.close()


# -- the differential runner keeps this class out -----------------------------------------

PUT_A_B_USED_C = (
    b"put 0 0 60 1\r\na\r\nput 0 0 60 1\r\nb\r\nlist-tube-used\r\nput 0 0 60 1\r\nc\r\n"
)
QUEUED_C0 = (
    b"reserve\r\nuse p2\r\nput 0 0 60 1\r\na\r\nput 0 0 60 1\r\nb\r\n"
    b"list-tube-used\r\npeek-ready\r\n"
)


def case_one() -> Case:
    """Case 1 as the differential runner sends it (the reserve and what is queued
    behind it in one write)."""
    steps = (
        Step(0, b"reserve\r\nput 0 0 60 1\r\nq\r\n", note="queued behind reserve"),
        Step(1, PUT_A_B_USED_C, note="burst"),
        Step(0, PROBE, note="probe"),
        Step(1, PROBE, note="probe"),
    )
    return Case(-1, None, steps, short_ttr=False, loose_timeouts=False)


def case_two() -> Case:
    """Case 2 with connection 2 a private waiter (on tube p2)."""
    steps = (
        Step(0, b"list-tube-used\r\n", note="command"),
        Step(1, b"list-tube-used\r\n", note="command"),
        Step(2, b"watch p2\r\nignore default\r\n", note=PRIVATE_NOTE),
        Step(2, b"reserve\r\nreserve-with-timeout 0\r\n", note="queued behind reserve"),
        Step(0, QUEUED_C0, note="queued behind reserve"),
        Step(1, b"put 0 0 60 1\r\nx\r\n", note="command"),
        *(Step(conn, PROBE, note="probe") for conn in (0, 1, 2)),
    )
    return Case(-2, None, steps, short_ttr=False, loose_timeouts=False)


def test_the_rules_refuse_the_step_that_would_cross_a_waiting_queue() -> None:
    """With a connection waiting with commands queued, another may not send a batch
    (case 1) nor queue commands behind a reserve of its own (case 2); with no such
    connection both are allowed, so it is this rule that keeps them out."""
    models = {0: ConnModel(DEFAULT_MAX_JOB_SIZE), 1: ConnModel(DEFAULT_MAX_JOB_SIZE)}
    models[0].feed(b"reserve\r\nput 0 0 60 1\r\nq\r\n")
    assert not allowed(1, PUT_A_B_USED_C, models, False, loaded=frozenset({0}))
    assert allowed(1, PUT_A_B_USED_C, models, False)

    models = {k: ConnModel(DEFAULT_MAX_JOB_SIZE) for k in (0, 1, 2)}
    models[2].feed(b"watch p2\r\nignore default\r\nreserve\r\nreserve-with-timeout 0\r\n")
    models[2].private = True
    assert not allowed(0, QUEUED_C0, models, False, loaded=frozenset({2}))
    assert allowed(0, QUEUED_C0, models, False)


@pytest.mark.skipif(servers_missing() is not None, reason=str(servers_missing()))
@pytest.mark.parametrize("make", [case_one, case_two])
def test_the_runner_skips_it_and_would_see_it_otherwise(
    make: Callable[[], Case], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the runner: the step is skipped and the servers agree; sent anyway (the
    rules switched off for this run), the difference is there."""
    version = protocol_version("beanstalkd")
    kept = diffrun.run_case(make(), version)
    assert kept.difference is None and kept.skipped >= 1
    monkeypatch.setattr(diffrun, "allowed", lambda *args, **kwargs: True)
    sent = diffrun.run_case(make(), version)
    assert sent.skipped == 0
    assert sent.difference is not None
    # A difference that comes back on every re-run stands (long runs re-check).
    assert diffrun.differs(diffrun.confirm(sent, version, 2))

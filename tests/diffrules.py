"""What the differential test must not send, and why: input on which beanpole and
beanstalkd differ for reasons that are not beanpole's to fix. ``allowed`` is asked by
the generator for every step it makes, and by the runner again for every step it
sends (it skips steps to a connection waiting in reserve, which changes what later
steps meet, and it knows which connections wait with commands queued).
"""

from __future__ import annotations

import copy
import re

from diffmodel import ConnModel, classify

PRIVATE_NOTE = "private waiter"  # the step that makes a connection private

INT_MAX = (1 << 31) - 1
LONG_MAX = (1 << 63) - 1
TIMEOUT_DIGITS = re.compile(rb" *([0-9]+)")


def versions_agree(line: bytes) -> bool:
    """False for a reserve-with-timeout whose argument beanstalkd 1.12 (strtol into an
    int) and 1.13 (read_u32, at most 2^31-1) read differently: a sign, a tab, no
    digits, or a value between 2^31 and 2^63."""
    if not line.startswith(b"reserve-with-timeout ") or b"\0" in line:
        return True
    m = TIMEOUT_DIGITS.match(line, 21)
    return m is not None and not INT_MAX < int(m.group(1)) <= LONG_MAX


def agreeable(partial: bytes) -> bool:
    """False for the start of a line that can no longer end as a reserve-with-timeout
    both versions read alike (see ``versions_agree``)."""
    if not partial.startswith(b"reserve-with-timeout ") or b"\0" in partial:
        return True
    return re.fullmatch(rb" *[0-9]*", partial[21:]) is not None


def waits(conn: int, model: ConnModel) -> bool:
    """Whether ``conn`` may wait in reserve: connection 0, or a private waiter."""
    return conn == 0 or model.private


def queues_behind_wait(model: ConnModel, data: bytes) -> bool:
    """Whether ``data`` holds a reserve that may wait with more input after it."""
    model = copy.deepcopy(model)
    framed = len(model.lines)
    if not model.feed(data).uncertain:
        return False
    lines = model.lines[framed:]
    kinds = [classify(line, model.max_job_size).kind for line in lines]
    if "wait" not in kinds:
        return False  # the reserve was already framed before; nothing new behind it
    first = kinds.index("wait")
    return first < len(lines) - 1 or not model.at_boundary()


def allowed(
    conn: int,
    data: bytes,
    models: dict[int, ConnModel],
    loose_timeouts: bool,
    final: bool = False,
    loaded: frozenset[int] = frozenset(),
) -> bool:
    """Whether ``data`` may be sent on ``conn`` now (``final``: as the last bytes of the
    case, after which nothing can be queued; ``loaded``: the other connections that
    may be waiting in reserve with commands queued behind it). The rules keep out what
    would make the two servers differ for reasons that are not beanpole's to fix:

    * only connection 0 and private waiters (each alone on a tube of its own) may wait
      in reserve: which of several connections waiting on one tube gets a job is not
      first-come in beanstalkd;
    * commands may be queued behind a waiting reserve, on one connection at a time,
      and while they are, other connections send one command per step: beanstalkd
      applies one command per connection per turn of its event loop, so the commands
      of the connection that gives the job and those queued behind the reserve it
      answers would run interleaved (beanpole runs each connection's batch at once);
    * a private waiter sends no watch or ignore;
    * with a 1.12 oracle, no reserve-with-timeout argument that 1.12 and 1.13 read
      differently (``loose_timeouts`` off);
    * no peek or stats-job while another connection is in the middle of a put body
      (nor queued behind a reserve, which runs it at a moment no rule sees):
      beanstalkd shows that unfinished job (its body padded with whatever its memory
      held, state "invalid"); beanpole does not (README, differences).
    """
    model = copy.deepcopy(models[conn])
    framed = len(model.lines)
    outcome = model.feed(data)
    lines = model.lines[framed:]
    if outcome.uncertain and not final:
        if not waits(conn, models[conn]):
            return False
        if loaded and queues_behind_wait(models[conn], data):
            return False
    if loaded and len(lines) > 1:
        return False
    if model.private and any(line.startswith((b"watch", b"ignore")) for line in lines):
        return False
    if not loose_timeouts:
        partial = bytes(model.buf) if model.mode == "command" else b""
        if not (all(map(versions_agree, lines)) and agreeable(partial)):
            return False
    looks = [line.startswith((b"peek ", b"stats-job ")) for line in lines]
    if any(looks) and outcome.uncertain and queues_behind_wait(models[conn], data):
        # Queued behind a reserve, it runs at a moment no rule can see: maybe while
        # another connection is in the middle of a put body.
        kinds = [classify(line, model.max_job_size).kind for line in lines]
        if any(looks[kinds.index("wait") :]):
            return False
    body_pending = any(m.mode == "body" for c, m in models.items() if c != conn)
    return not (body_pending and any(looks))

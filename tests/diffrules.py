"""What the differential test must not send, and why: input on which beanpole and
beanstalkd differ for reasons that are not beanpole's to fix. ``allowed`` is asked by
the generator for every step it makes, and by the runner again for every step it
sends (it skips steps to a connection waiting in reserve, which changes what later
steps meet).
"""

from __future__ import annotations

import copy
import re

from diffmodel import ConnModel, classify

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


def allowed(
    conn: int, data: bytes, models: dict[int, ConnModel], loose_timeouts: bool, final: bool = False
) -> bool:
    """Whether ``data`` may be sent on ``conn`` now (``final``: as the last bytes of the
    case, after which nothing can be queued). The rules keep out what would make the
    two servers differ for reasons that are not beanpole's to fix:

    * only connection 0 may wait in reserve, and only with nothing sent after the
      reserve: commands queued behind it would run, once a job comes, at the same time
      as the commands of the connection that gave the job, in either order;
    * with a 1.12 oracle, no reserve-with-timeout argument that 1.12 and 1.13 read
      differently (``loose_timeouts`` off);
    * no peek or stats-job while another connection is in the middle of a put body:
      beanstalkd shows that unfinished job (its body padded with whatever its memory
      held, state "invalid"); beanpole does not (README, differences).
    """
    model = copy.deepcopy(models[conn])
    framed = len(model.lines)
    outcome = model.feed(data)
    lines = model.lines[framed:]
    if outcome.uncertain and not final:
        waits = [line for line in lines if classify(line, model.max_job_size).kind == "wait"]
        if conn != 0 or waits != lines[-1:] or not model.at_boundary():
            return False
    if not loose_timeouts:
        partial = bytes(model.buf) if model.mode == "command" else b""
        if not (all(map(versions_agree, lines)) and agreeable(partial)):
            return False
    body_pending = any(m.mode == "body" for c, m in models.items() if c != conn)
    return not (body_pending and any(line.startswith((b"peek ", b"stats-job ")) for line in lines))

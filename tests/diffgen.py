"""Random command sequences for the differential test (``test_differential.py``).

A case is a list of steps, each the bytes one connection sends at once (a command,
a pipelined burst, part of a command, a garbled command, a reserve that may wait
with commands queued behind it), a hang-up (shutdown of the client's sending side),
a close of the client's socket, or drain mode. Some connections are private waiters
(each watches a tube of its own), so that several connections can wait at once.
Valid commands, with priorities, delays, TTRs and body sizes up to and past ``-z``,
are mixed with malformed input: numbers that are negative, signed, hexadecimal, too
large or followed by junk; extra, missing and trailing spaces; unknown commands and
command names with a suffix; lines just under and over 224 bytes; put bodies longer
or shorter than announced or without their CRLF; lone CR and LF; NUL bytes.

Nothing generated depends on the wall clock: delays, pauses and reserve timeouts are
0 or at least an hour; a TTR is either at least a minute or 0/1, whose safety margin
starts at once (the runner retries such a case if it ran too long to prove anything).
``diffrules.allowed`` lists what else is kept out, and why.

Every case comes from its seed alone.
"""

from __future__ import annotations

import copy
import dataclasses
import random
from collections.abc import Callable

from diffmodel import U32_MAX, ConnModel
from diffrules import PRIVATE_NOTE, allowed, queues_behind_wait, waits

U64_MAX = (1 << 64) - 1
PROBE = b"list-tube-used\r\n"  # the last step on every open connection
DEFAULT_MAX_JOB_SIZE = 65535
MAX_CONNS = 4

VALID_TUBES = (
    [b"default"] * 6
    + [b"a"] * 4
    + [b"b"] * 3
    + [
        b"x" * 200,
        b"Az09-+/;.$_()",
        b"t(1)",
        b"0",
    ]
)
INVALID_TUBES = [
    b"",
    b"-a",
    b"x" * 201,
    b"a b",
    b"a\tb",
    b"a*b",
    b"\xc3\xa9",
    b"a:b",
    b" a",
    b"a ",
    b"a\x7f",
]
# Body bytes spell no command: a body read as a command line (after a size
# mismatch) is an unknown command, unless one of the command-like bodies is chosen.
BODY_ALPHABET = b"abcdfghjklmnowxyz0123456789 -_.\t"
COMMAND_BODIES = [b"stats", b"list-tube-used", b"quit", b"use a", b"peek-ready", b"kick 1"]
BAD_NUMBERS = [
    b"-1",
    b"+1",
    b"1x",
    b"x",
    b"",
    b"0x10",
    b"1.5",
    b"4294967296",
    b"18446744073709551616",
    b"99999999999999999999999",
    b"1\t",
    b"\t1",
    b"- 1",
]
NAMELESS = [
    b"peek-ready",
    b"peek-delayed",
    b"peek-buried",
    b"stats",
    b"list-tubes",
    b"list-tube-used",
    b"list-tubes-watched",
]
ODD_COMMANDS = [  # unknown, suffixed, incomplete or oddly spaced
    b"",
    b"PUT 0 0 1 1",
    b"hello",
    b"puts",
    b"put",
    b"peekx 1",
    b"peek",
    b"delete",
    b"deletex 1",
    b"kickx",
    b"kick",
    b"kick-job",
    b"kick-jobx 1",
    b"touch",
    b"stats-jobx 1",
    b"stats-tubex default",
    b"stats-tube",
    b"statsx",
    b"stats ",
    b"use",
    b"usex a",
    b"watch",
    b"ignore",
    b"list-tubesx",
    b"list-tubes-watchedx",
    b"list-tube-usedx",
    b"list-tube",
    b"pause-tube",
    b"pause-tubex 0",
    b"pause-tubedefault 0",
    b"pause-tube  default  0",
    b"pause-tube default",
    b"pause-tube default 0 ",
    b"pause-tube -a 0",
    b"release",
    b"release 1",
    b"release 1 0",
    b"bury",
    b"bury 1",
    b"reserve-job",
    b"reserve-jobx 1",
    b"reserved",
    b"reserve ",
    b"reserve-with-timeout",
    b" stats",
    b"\tstats",
    b"q",
    b"qui",
    b"ignorex default",
    b"watchx a",
]


@dataclasses.dataclass(frozen=True)
class Step:
    conn: int
    data: bytes  # sent at once
    hangup: bool = False  # shut the connection's sending side, then read until it closes
    close: bool = False  # close the connection's socket (after reading what arrived)
    drain: bool = False  # put the server in drain mode (beanstalkd: SIGUSR1); sends nothing
    note: str = ""


@dataclasses.dataclass(frozen=True)
class Case:
    seed: int
    max_job_size: int | None  # None: the servers' default
    steps: tuple[Step, ...]
    short_ttr: bool  # a job with TTR 0/1 may be reserved: finish well within a second
    loose_timeouts: bool  # see Generator

    def beanstalkd_args(self) -> list[str]:
        return [] if self.max_job_size is None else ["-z", str(self.max_job_size)]

    def beanpole_config(self) -> dict[str, object]:
        return {} if self.max_job_size is None else {"max_job_size": self.max_job_size}


#: The most steps of a case with TTR-1 jobs: it must finish well within that second.
SHORT_TTR_STEPS = 14


class Generator:
    def __init__(self, seed: int, loose_timeouts: bool, steps: int | None = None) -> None:
        """``loose_timeouts``: send reserve-with-timeout arguments that beanstalkd
        1.12 (strtol) and 1.13 (read_u32) read differently; only for a 1.13 oracle.
        ``steps``: make that many steps (at most ``SHORT_TTR_STEPS`` in a case with
        TTR-1 jobs) instead of a random number up to 40."""
        self.seed = seed
        self.want_steps = steps
        self.rng = random.Random(seed)
        self.loose_timeouts = loose_timeouts
        self.max_job_size = self.rng.choice([None, None, None, 0, 10, 10, 300, 300, 300])
        self.limit = DEFAULT_MAX_JOB_SIZE if self.max_job_size is None else self.max_job_size
        self.short_ttr = self.rng.random() < 0.3
        # Each case leans its own way: more or less mess, some commands more often.
        self.mess = self.rng.choice([0.15, 0.3, 0.5])  # steps that are not one command
        self.bias = [self.rng.choice([0.3, 1, 1, 3]) for _ in range(16)]
        self.models: dict[int, ConnModel] = {}
        self.ids = 0  # job ids handed out so far, as far as the model knows
        self.conn = 0  # the connection a step is being made for
        self.held: dict[int, list[int]] = {}  # ids each connection asked reserve-job for
        self.private_tubes: list[bytes] = []  # tubes of the private waiters
        # The connection that may be waiting with commands queued behind its reserve,
        # as far as the generator can tell (the runner knows for sure).
        self.loaded: int | None = None
        self.steps: list[Step] = []

    # ------------------------------------------------------------------ values

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def number(self, value: int, bad: float = 0.1) -> bytes:
        """``value`` as text, now and then in an odd form or replaced by junk."""
        r = self.rng.random()
        if r < bad:
            return self.rng.choice(BAD_NUMBERS)
        if r < bad + 0.04:
            return b"0" * self.rng.randint(1, 3) + str(value).encode()
        return str(value).encode()

    def sep(self) -> bytes:
        """A separator: one space, sometimes several, rarely a tab or none."""
        r = self.rng.random()
        if r < 0.9:
            return b" "
        if r < 0.97:
            return b" " * self.rng.randint(2, 4)
        return self.rng.choice([b"\t", b""])

    def job_id(self, held: float = 0.0) -> bytes:
        """An id; with probability ``held`` one this connection has asked reserve-job
        for (release, bury, touch and delete need a job the connection holds)."""
        r = self.rng.random()
        mine = self.held.get(self.conn, [])
        if mine and self.chance(held):
            return str(self.rng.choice(mine)).encode()
        if r < 0.85:
            return self.number(self.rng.randint(1, self.ids + 1), bad=0.05)
        return self.rng.choice(
            [b"0", str(U64_MAX).encode(), str(U64_MAX + 1).encode(), *BAD_NUMBERS]
        )

    def pri(self) -> int:
        return self.rng.choice(
            [0, 0, 1, 100, 1023, 1024, 1025, 65535, 1 << 31, U32_MAX, self.rng.randint(0, 2000)]
        )

    def delay(self) -> int:
        return 0 if self.chance(0.8) else self.rng.choice([3600, 86400, U32_MAX])

    def ttr(self) -> int:
        if self.short_ttr and self.chance(0.5):
            return self.rng.choice([0, 1])
        return self.rng.choice([60, 120, 3600, 86400, U32_MAX])

    def tube(self, valid: float = 0.9) -> bytes:
        if self.chance(valid):
            return self.rng.choice(VALID_TUBES)
        return self.rng.choice(INVALID_TUBES)

    def body(self, size: int) -> bytes:
        if self.chance(0.1):
            word = self.rng.choice(COMMAND_BODIES)
            if len(word) <= size:
                return word + b"x" * (size - len(word))
        alphabet = BODY_ALPHABET
        if self.chance(0.2):
            alphabet += b"\r\n\0\xff"
        return bytes(self.rng.choice(alphabet) for _ in range(size))

    def body_size(self) -> int:
        lim = self.limit
        if lim != DEFAULT_MAX_JOB_SIZE:
            return self.rng.choice([0, 1, 2, 5, lim, lim + 1, self.rng.randint(0, min(lim, 400))])
        if self.chance(0.85):
            return self.rng.choice([0, 1, 2, 5, self.rng.randint(0, 400)])
        # Large bodies, around the 4 KiB where beanpole reads a body into a buffer of
        # its own, and at the limit.
        big = self.rng.randint(4096, 20000)
        return self.rng.choice([4094, 4095, 4096, 4097, big, lim, lim + 1])

    # ------------------------------------------------------------------ commands

    def put(self) -> bytes:
        size = self.body_size()
        fields = [self.pri(), self.delay(), self.ttr(), size]
        bad = 0.03
        header = b"put" + b"".join(b" " + self.number(f, bad) for f in fields[:1])
        header += b"".join(self.sep() + self.number(f, bad) for f in fields[1:])
        if self.chance(0.03):
            header += self.rng.choice([b" ", b"x", b" 1", b"\t"])
        body = self.body(size)
        end = b"\r\n"
        r = self.rng.random()
        if r < 0.04:
            body = body[: max(0, size - self.rng.randint(1, 3))]
        elif r < 0.08:
            body += self.body(self.rng.randint(1, 3))
        elif r < 0.12:
            end = self.rng.choice([b"", b"\n", b"\r", b"xx", b"\r\r\n", b"\n\r"])
        return header + b"\r\n" + body + end

    def with_id(self) -> bytes:
        word = self.rng.choice(
            [b"delete", b"touch", b"peek", b"kick-job", b"stats-job", b"reserve-job"]
        )
        if word == b"reserve-job" and self.ids and self.chance(0.8):
            picked = self.rng.randint(1, self.ids)
            self.held.setdefault(self.conn, []).append(picked)
            return word + b" " + str(picked).encode()
        return word + self.sep() + self.job_id(0.5 if word in (b"delete", b"touch") else 0.2)

    def lifecycle(self) -> bytes:
        """reserve-job and then what a worker does with the job, in one burst."""
        picked = str(self.rng.randint(1, max(self.ids, 1))).encode()
        self.held.setdefault(self.conn, []).append(int(picked))
        lines = [b"reserve-job " + picked]
        if self.chance(0.3):
            lines.append(self.rng.choice([b"touch ", b"stats-job "]) + picked)
        if self.chance(0.2):
            lines.append(b"reserve-with-timeout 0")
        last = self.rng.choice([b"release", b"release", b"bury", b"delete", b"touch"])
        if last == b"release":
            lines.append(b"release %s %d %d" % (picked, self.pri(), self.delay()))
        elif last == b"bury":
            lines.append(b"bury %s %d" % (picked, self.pri()))
        else:
            lines.append(last + b" " + picked)
        if self.chance(0.3):
            lines.append(b"kick " + self.rng.choice([b"1", b"2", b"10"]))
        return b"\r\n".join(lines) + b"\r\n"

    def release(self) -> bytes:
        return (
            b"release"
            + self.sep()
            + self.job_id(0.6)
            + self.sep()
            + self.number(self.pri(), 0.05)
            + self.sep()
            + self.number(self.delay(), 0.05)
        )

    def bury(self) -> bytes:
        return b"bury" + self.sep() + self.job_id(0.6) + self.sep() + self.number(self.pri(), 0.05)

    def kick(self) -> bytes:
        if self.chance(0.2):
            bound = self.rng.choice(
                [b"-1", b"+2", b" 3", b"\t2", b"2 junk", b"2x", b"x", b"", b"0", b"4294967297"]
            )
        else:
            bound = str(self.rng.choice([0, 1, 2, 3, 10, 1000, U32_MAX])).encode()
        return b"kick " + bound

    def tube_command(self) -> bytes:
        word = self.rng.choice([b"use", b"use", b"watch", b"watch", b"ignore", b"stats-tube"])
        if word != b"watch" and self.private_tubes and self.chance(0.5):
            # Jobs for the private waiters (nobody else may watch their tubes).
            return word + b" " + self.rng.choice(self.private_tubes)
        return word + b" " + self.tube()

    def pause(self) -> bytes:
        delay = self.number(self.rng.choice([0, 0, 3600, U32_MAX]), 0.05)
        return b"pause-tube" + self.sep() + self.tube(0.95) + self.sep() + delay

    def reserve_now(self) -> bytes:
        return b"reserve-with-timeout" + self.sep() + self.rng.choice([b"0", b"0", b"00", b"0x"])

    def reserve_wait(self) -> bytes:
        """A reserve that waits when no job is ready (connection 0 only)."""
        r = self.rng.random()
        if r < 0.5:
            return b"reserve"
        if r < 0.8 or not self.loose_timeouts:
            return b"reserve-with-timeout " + self.rng.choice([b"3600", b" 86400", b"2147483647"])
        return b"reserve-with-timeout " + self.rng.choice(
            [b"-1", b"abc", b"", b"2147483648", b"4294967296", b"+5", b"\t5"]
        )

    def quit(self) -> bytes:
        return self.rng.choice([b"quit", b"quit", b"quitx", b"quit now"])

    def padded(self) -> bytes:
        """A command padded to a line of 222 to 226 bytes (CRLF included) or longer."""
        total = self.rng.choice([222, 223, 224, 224, 225, 226, 300, 448, 449])
        body = self.rng.choice(
            [b"put%s0 0 60 1", b"delete%s1", b"use %s", b"peek%s1", b"reserve-with-timeout%s0"]
        )
        fill = total - 2 - (len(body) - 2)
        line = body % ((b"x" if body == b"use %s" else b" ") * fill)
        return line + b"\r\n" + (b"a\r\n" if body.startswith(b"put") else b"")

    def command(self, conn: int) -> bytes:
        """One command line (and body) as the client would send it."""
        self.conn = conn
        makers: list[tuple[float, Callable[[], bytes]]] = [
            (18, self.put),
            (12, self.with_id),
            (8, self.lifecycle),
            (5, self.release),
            (5, self.bury),
            (4, self.kick),
            (10, self.tube_command),
            (8, lambda: self.rng.choice(NAMELESS)),
            (6, self.reserve_now),
            (3, self.pause),
            (4, lambda: self.rng.choice(ODD_COMMANDS)),
            (1, self.quit),
            (2, self.padded),
        ]
        if waits(conn, self.models[conn]):
            makers.append((4, self.reserve_wait))
        weights = [w * bias for (w, _), bias in zip(makers, self.bias, strict=False)]
        make = self.rng.choices([m for _, m in makers], weights)[0]
        data = make()
        if not data.endswith(b"\n"):
            data += b"\r\n"
        return data

    def mutate(self, data: bytes) -> bytes:
        """Garble a command: a byte inserted, dropped or replaced, or the CRLF lost."""
        if not data:
            return data
        pos = self.rng.randrange(len(data))
        r = self.rng.random()
        if r < 0.3:
            return data[:pos] + self.rng.choice([b"\r", b"\n", b"\0", b" ", b"\xff"]) + data[pos:]
        if r < 0.5:
            return data[:pos] + data[pos + 1 :]
        if r < 0.7:
            return data.removesuffix(b"\r\n")
        return data[:pos] + bytes([self.rng.randrange(256)]) + data[pos + 1 :]

    # ------------------------------------------------------------------ steps

    def live_conns(self) -> list[int]:
        return [c for c, m in self.models.items() if not m.closed]

    def pick_conn(self) -> int:
        live = self.live_conns()
        if len(self.models) < MAX_CONNS and (not live or self.chance(0.08)):
            conn = len(self.models)
            self.models[conn] = ConnModel(self.limit)
            if conn and self.chance(0.4):
                # A private waiter: it watches a tube of its own only.
                tube = b"p%d" % conn
                setup = b"watch " + tube + b"\r\nignore default\r\n"
                self.models[conn].feed(setup)
                self.models[conn].private = True
                self.private_tubes.append(tube)
                self.steps.append(Step(conn, setup, note=PRIVATE_NOTE))
            return conn
        if not live:
            return -1
        return self.rng.choice(live + live[:1])

    def payload(self, conn: int) -> tuple[list[bytes], str]:
        """What one connection sends next, in one or more sends."""
        r = self.rng.random() / self.mess
        if r >= 1:
            return [self.command(conn)], "command"
        if waits(conn, self.models[conn]) and self.chance(0.15):
            # A reserve that may wait, and commands queued behind it.
            n = self.rng.randint(1, 4)
            queued = b"".join(self.command(conn) for _ in range(n))
            return [self.reserve_wait() + b"\r\n" + queued], "queued behind reserve"
        if r < 0.3:
            n = self.rng.randint(2, 6)
            return [b"".join(self.command(conn) for _ in range(n))], "burst"
        if r < 0.4:
            # The same command many times over: with a large job, peeks fill megabytes.
            return [self.command(conn) * self.rng.randint(5, 40)], "repeated"
        if r < 0.7:
            return [self.mutate(self.command(conn))], "garbled"
        data = self.command(conn)
        if r < 0.85:
            # Only the start: whatever comes next on the connection continues the line.
            return [data[: self.rng.randint(0, len(data))]], "part"
        cuts = sorted(self.rng.randint(0, len(data)) for _ in range(self.rng.randint(1, 4)))
        return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)], "pieces"

    def add_step(self) -> bool:
        conn = self.pick_conn()
        if conn < 0:
            return False
        was_loaded = self.loaded == conn
        if was_loaded:
            # A step for it is sent only once its reserve was answered (the runner
            # skips it otherwise, but not a hang-up): assume it was.
            self.loaded = None
        if self.chance(0.25 if was_loaded else 0.02):
            close = self.chance(0.5)
            self.models[conn].closed = True
            note = "close" if close else "hang-up"
            self.steps.append(Step(conn, b"", hangup=not close, close=close, note=note))
            return True
        if self.chance(0.003):
            self.steps.append(Step(conn, b"", drain=True, note="drain mode"))
            return True
        loaded = frozenset() if self.loaded is None else frozenset({self.loaded})
        for _ in range(20):
            sends, note = self.payload(conn)
            models = {**self.models, conn: copy.deepcopy(self.models[conn])}
            puts = 0
            queued = False
            for data in sends:
                if not allowed(conn, data, models, self.loose_timeouts, loaded=loaded):
                    break
                queued |= queues_behind_wait(models[conn], data)
                puts += models[conn].feed(data).puts
            else:
                self.models = models
                self.ids += puts
                self.steps.extend(Step(conn, data, note=note) for data in sends)
                if queued:
                    self.loaded = conn
                return True
        return True

    def complete_timeouts(self) -> None:
        """The runner ends every open connection with PROBE. Where that would finish a
        reserve-with-timeout line the two versions read differently, send a 0 first."""
        for conn in self.live_conns():
            if not allowed(conn, PROBE, self.models, self.loose_timeouts, final=True):
                self.models[conn].feed(b"0")
                self.steps.append(Step(conn, b"0", note="timeout digit"))

    def probe(self) -> None:
        """End every open connection with PROBE: still usable, or not, alike."""
        for conn in self.live_conns():
            self.models[conn].feed(PROBE)
            self.steps.append(Step(conn, PROBE, note="probe"))

    def case(self) -> Case:
        n = self.rng.randint(3, SHORT_TTR_STEPS) if self.short_ttr else self.rng.randint(5, 40)
        if self.want_steps is not None:
            n = min(self.want_steps, SHORT_TTR_STEPS) if self.short_ttr else self.want_steps
        while len(self.steps) < n and self.add_step():
            pass
        self.complete_timeouts()
        self.probe()
        return Case(
            self.seed, self.max_job_size, tuple(self.steps), self.short_ttr, self.loose_timeouts
        )


def valid(case: Case) -> bool:
    """Whether every step keeps the rules of ``allowed`` (a shrunk case may not), with
    queued commands tracked as the generator does."""
    limit = DEFAULT_MAX_JOB_SIZE if case.max_job_size is None else case.max_job_size
    models: dict[int, ConnModel] = {}
    loaded: int | None = None
    for step in case.steps:
        model = models.setdefault(step.conn, ConnModel(limit))
        if loaded == step.conn:
            loaded = None
        if step.hangup or step.close:
            model.closed = True
        elif step.note == PRIVATE_NOTE:
            model.feed(step.data)
            model.private = True
        elif not step.drain:
            final = step.note == "probe"
            others = frozenset() if loaded is None else frozenset({loaded})
            if not allowed(step.conn, step.data, models, case.loose_timeouts, final, others):
                return False
            if queues_behind_wait(model, step.data):
                loaded = step.conn
            model.feed(step.data)
    return True


def generate(seed: int, loose_timeouts: bool = False, steps: int | None = None) -> Case:
    return Generator(seed, loose_timeouts, steps).case()

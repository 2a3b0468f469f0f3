"""Start-up time: from exec to the first accepted connection, beanpole beside beanstalkd.

A client test harness that starts a server and connects after a fixed pause (greenstalk's
waits 0.1 s) fails with ``ConnectionRefused`` if the server is slower than that. This
script measures what such a harness meets. One free port is found beforehand and used
by every run. The bench process execs the server and then calls ``connect()`` on that
port in a tight loop (no sleeps; it yields the CPU between attempts) until the kernel
accepts; the time from just before the exec to that moment is the figure. It then also
sends ``list-tube-used`` and times the reply (the server's own accept loop at work),
stops the server with SIGTERM and waits for it to exit. Contenders alternate run by
run, so both meet the same load.

Also timed, from exec to exit: ``beanpole --help`` and ``beanpole stats`` (against a
running beanstalkd), and the interpreter alone (``python -c pass``: what any Python
command pays before its first import, including the ``site`` module's ``.pth`` files).

    python bench/startup.py [--runs 20] [--beanpole CMD] [--label NAME] ...

``--beanpole`` is the command that runs beanpole (default: the ``beanpole`` script beside
this Python); give it several times, with as many ``--label``, to compare two installs
(for example the build before a change and after it). Medians of ``--runs`` runs, after
one run of each command that is not counted.

An installed package has its modules compiled to bytecode (pip does it), but an editable
install under ``PYTHONDONTWRITEBYTECODE`` compiles every module from source at every
start. So the Python commands run with ``PYTHONPYCACHEPREFIX`` set to a directory of this
run's own (bytecode written there on the uncounted run and read after it; the source
trees are not touched), unless ``--no-bytecode-cache``.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

BEANSTALKD = "/usr/bin/beanstalkd"
#: The longest a server may take to accept before a run counts as failed.
PATIENCE = 10.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.connect(("127.0.0.1", port))
        except ConnectionRefusedError:
            return True
    return False


#: The environment of every command run (set by main).
ENV: dict[str, str] = dict(os.environ)


def time_to_accept(argv: Sequence[str], port: int) -> tuple[float, float]:
    """Exec ``argv`` and connect to ``port`` until the kernel accepts: (seconds to the
    accepted connect, seconds to the reply to the first command), both from the exec."""
    if not port_is_free(port):
        raise RuntimeError(f"something already listens on port {port}")
    started = time.perf_counter()
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env=ENV,
    )
    try:
        deadline = started + PATIENCE
        while True:
            s = socket.socket()
            if s.connect_ex(("127.0.0.1", port)) == 0:
                accepted = time.perf_counter()
                break
            s.close()
            # No sleep, but give the core away: on a machine with few cores a loop that
            # never yields takes CPU time from the very start it is timing.
            os.sched_yield()
            if proc.poll() is not None or time.perf_counter() > deadline:
                err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                raise RuntimeError(f"{argv[0]} did not accept on port {port}: {err.strip()}")
        with s:
            s.sendall(b"list-tube-used\r\n")
            reply = b""
            while not reply.endswith(b"\r\n"):
                chunk = s.recv(64)
                if not chunk:
                    raise RuntimeError(f"{argv[0]} closed the connection: {reply!r}")
                reply += chunk
            answered = time.perf_counter()
        return accepted - started, answered - started
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(PATIENCE)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()


def time_to_exit(argv: Sequence[str]) -> float:
    """Seconds from exec to exit of ``argv``, which must succeed."""
    started = time.perf_counter()
    done = subprocess.run(
        argv, stdin=subprocess.DEVNULL, capture_output=True, check=False, env=ENV
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{shlex.join(argv)} failed: {done.stderr.decode().strip()}")
    return elapsed


def default_beanpole() -> str:
    beside = Path(sys.executable).with_name("beanpole")
    if beside.exists():
        return str(beside)
    found = shutil.which("beanpole")
    return found if found is not None else f"{sys.executable} -m beanpole"


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:8.1f}"


def spread(values: list[float]) -> str:
    return f"{min(values) * 1000:6.1f} .. {max(values) * 1000:6.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--beanpole", action="append", metavar="CMD", help="how to run beanpole")
    parser.add_argument("--label", action="append", metavar="NAME", help="a name per --beanpole")
    parser.add_argument("--beanstalkd", default=BEANSTALKD)
    parser.add_argument("--python", default=sys.executable, help="the interpreter timed alone")
    parser.add_argument(
        "--no-bytecode-cache",
        action="store_true",
        help="run with the environment as it is (see above)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="startup-pyc-") as cache:
        if not args.no_bytecode_cache:
            ENV.pop("PYTHONDONTWRITEBYTECODE", None)
            ENV["PYTHONPYCACHEPREFIX"] = cache
        return run(args, parser)


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    commands = [shlex.split(c) for c in (args.beanpole or [default_beanpole()])]
    labels = args.label or []
    if len(labels) not in (0, len(commands)):
        parser.error("give one --label per --beanpole")
    labels = labels or (["beanpole"] if len(commands) == 1 else [c[0] for c in commands])
    port = free_port()

    # Servers: exec -> accepted connect, and -> first reply.
    servers: list[tuple[str, list[str]]] = [
        ("beanstalkd", [args.beanstalkd, "-l", "127.0.0.1", "-p", str(port)])
    ]
    servers += [
        (f"{label} serve", [*cmd, "serve", "-l", "127.0.0.1", "-p", str(port)])
        for label, cmd in zip(labels, commands, strict=True)
    ]
    accepted: dict[str, list[float]] = {name: [] for name, _ in servers}
    answered: dict[str, list[float]] = {name: [] for name, _ in servers}
    for _, argv in servers:
        time_to_accept(argv, port)  # not counted: bytecode written, caches warm
    for _ in range(args.runs):
        for name, argv in servers:
            a, b = time_to_accept(argv, port)
            accepted[name].append(a)
            answered[name].append(b)

    # Commands that exit: --help, stats (against a beanstalkd), the bare interpreter.
    exits: list[tuple[str, Callable[[], list[str]]]] = [
        ("python -c pass", lambda: [args.python, "-c", "pass"])
    ]
    for label, cmd in zip(labels, commands, strict=True):
        exits.append((f"{label} --help", lambda cmd=cmd: [*cmd, "--help"]))
        exits.append(
            (f"{label} stats", lambda cmd=cmd: [*cmd, "stats", "-H", f"127.0.0.1:{port}"])
        )
    exited: dict[str, list[float]] = {name: [] for name, _ in exits}
    helper = subprocess.Popen(
        [args.beanstalkd, "-l", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + PATIENCE
        while port_is_free(port) and time.monotonic() < deadline:
            pass
        for _, make in exits:
            time_to_exit(make())  # not counted
        for _ in range(args.runs):
            for name, make in exits:
                exited[name].append(time_to_exit(make()))
    finally:
        helper.terminate()
        helper.wait()

    load = os.getloadavg()
    cached = "no bytecode cache" if args.no_bytecode_cache else "bytecode cached"
    print(
        f"start-up, median of {args.runs} runs (ms; min .. max beside), port {port}, "
        f"{os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, "
        f"{cached}"
    )
    print(f"{'command':<34} {'accepts':>8} {'range':>16} {'answers':>8}")
    for name, _ in servers:
        print(f"{name:<34} {ms(accepted[name])} {spread(accepted[name]):>16} {ms(answered[name])}")
    base = statistics.median(accepted["beanstalkd"])
    interpreter = statistics.median(exited["python -c pass"])
    for name, _ in servers[1:]:
        median = statistics.median(accepted[name])
        print(
            f"  {name} / beanstalkd: {median / base:.1f}x; beyond the interpreter's own "
            f"start (python -c pass): {(median - interpreter) * 1000:.1f} ms"
        )
    print(f"{'command (exec to exit)':<34} {'median':>8} {'range':>16}")
    for name, _ in exits:
        print(f"{name:<34} {ms(exited[name])} {spread(exited[name]):>16}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

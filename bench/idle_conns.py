"""Memory per idle connection: beanpole and beanstalkd side by side.

For each server: start it, read its resident memory, open N connections that each
make one request (``list-tube-used``) and then stay idle, read its resident memory
again, and report the growth per connection. The kernel's own memory for the sockets
(``TCP mem`` in /proc/net/sockstat, client and server ends together) is shown beside
it: it is the same for both servers and not part of the server's resident size.

    python bench/idle_conns.py [--conns 10000] [--rounds 1] [--beanpole-args "..."]
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import socket
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from launch import Server, nofile_limit, start_beanpole, start_beanstalkd
from scenarios import A, B

PAGE = os.sysconf("SC_PAGE_SIZE")


def tcp_kernel_bytes() -> int:
    """The kernel's memory for TCP sockets (all of them), from /proc/net/sockstat."""
    text = Path("/proc/net/sockstat").read_text()
    m = re.search(r"^TCP:.* mem (\d+)", text, re.M)
    return int(m.group(1)) * PAGE if m else 0


def open_idle(port: int, n: int) -> list[socket.socket]:
    """``n`` connections, each after one request and its reply."""
    conns = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        s.sendall(b"list-tube-used\r\n")
        reply = b""
        while not reply.endswith(b"\r\n"):
            chunk = s.recv(64)
            if not chunk:
                raise RuntimeError(f"connection {len(conns)} closed: {reply!r}")
            reply += chunk
        conns.append(s)
    return conns


def measure(server: Server, n: int) -> tuple[float, float, float]:
    """(server bytes per connection, kernel bytes per connection, seconds to open)."""
    server.ping()
    time.sleep(0.2)  # let the start settle before the first reading
    rss0, kernel0 = server.rss_bytes(), tcp_kernel_bytes()
    started = time.monotonic()
    conns = open_idle(server.port, n)
    opened = time.monotonic() - started
    time.sleep(0.5)  # idle: whatever a connection gives back after its request, it has
    rss1, kernel1 = server.rss_bytes(), tcp_kernel_bytes()
    for s in conns:
        s.close()
    return (rss1 - rss0) / n, (kernel1 - kernel0) / n, opened


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conns", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--beanpole-args", default="", help="extra flags for beanpole serve")
    args = parser.parse_args()
    nofile = nofile_limit()
    if args.conns + 100 > nofile:
        print(f"--conns {args.conns} needs an open files limit of {args.conns + 100}")
        return 2
    rows = []
    for _ in range(args.rounds):
        for kind in (A, B):
            if kind == A:
                server = start_beanpole(shlex.split(args.beanpole_args))
            else:
                server = start_beanstalkd([], nofile)
            try:
                rows.append((kind, *measure(server, args.conns)))
            finally:
                server.stop()
    print(f"{args.conns} idle connections (each after one request)")
    print(f"{'server':<12}{'server B/conn':>16}{'kernel B/conn':>16}{'open s':>10}")
    for kind, per_conn, kernel, opened in rows:
        print(f"{kind:<12}{per_conn:>16.0f}{kernel:>16.0f}{opened:>10.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Start a fresh server of either kind for a test: beanpole in-process, or Debian's beanstalkd.

beanstalkd gets its listening socket already bound to port 0 and listening (systemd
socket activation, which Debian's build supports), so a test can connect the moment
the process exists: there is no readiness to wait for and no port race.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

KINDS = ("beanpole", "beanstalkd")
#: A three-node beanpole cluster, reached through a follower (which relays to the
#: leader): the differential runner's ``--cluster`` subject.
CLUSTER = "beanpole-cluster"


@dataclass(frozen=True)
class Running:
    kind: str
    host: str
    port: int
    pid: int | None = None  # beanstalkd's process id; None for the in-process server
    server: object | None = None  # the beanpole.Server, when kind == "beanpole"

    @property
    def address(self) -> tuple[str, int]:
        return (self.host, self.port)


def beanstalkd_path() -> str | None:
    return shutil.which("beanstalkd")


@contextlib.contextmanager
def start(kind: str, *args: str, **config: object) -> Iterator[Running]:
    """A fresh server of ``kind`` on 127.0.0.1 and a free port.

    ``args`` are extra beanstalkd flags (e.g. ``"-z", "100"``); ``config`` are the
    matching ``beanpole.Config`` fields (e.g. ``max_job_size=100``).
    """
    if kind == "beanpole":
        import beanpole

        with beanpole.Server(listen="127.0.0.1", port=0, **config) as srv:  # type: ignore[arg-type]
            address = srv.address
            assert isinstance(address, tuple)
            host, port = address
            yield Running(kind, host, port, None, srv)
        return
    if kind == CLUSTER:
        yield from _cluster(**config)
        return
    if kind != "beanstalkd":
        raise ValueError(kind)
    exe = beanstalkd_path()
    if exe is None:
        import pytest

        pytest.skip("beanstalkd is not installed (apt-get install beanstalkd)")
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # beanstalkd sets these on a socket it makes itself but not on one it is handed;
    # without TCP_NODELAY its replies to pipelined clients stall behind Nagle's rule.
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    lsock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    lsock.setblocking(False)
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(1024)
    port = lsock.getsockname()[1]
    # The listening socket goes in as standard input; the shell moves it to fd 3,
    # where socket activation expects it, and execs beanstalkd with its own pid.
    script = 'exec 3<&0 0</dev/null; LISTEN_PID=$$ LISTEN_FDS=1 exec "$@"'
    proc = subprocess.Popen(
        ["sh", "-c", script, "sh", exe, *args],
        stdin=lsock.fileno(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    lsock.close()
    try:
        yield Running(kind, "127.0.0.1", port, proc.pid, None)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


class _LeaderStats:
    """``stats()`` of a cluster's leader and ``drain()``, as ``Running.server`` offers
    a Server's."""

    def __init__(self, cluster: object) -> None:
        self.cluster = cluster

    def stats(self) -> dict[str, object]:
        return self.cluster.stats()  # type: ignore[attr-defined,no-any-return]

    def drain(self) -> None:
        self.cluster.drain()  # type: ignore[attr-defined]


def _cluster(**config: object) -> Iterator[Running]:
    import beanpole

    max_job_size = int(config.pop("max_job_size", 65535))  # type: ignore[call-overload]
    if config:
        raise ValueError(f"a cluster does not take {sorted(config)}")
    with beanpole.Cluster(nodes=3, max_job_size=max_job_size) as cluster:
        follower = cluster.followers()[0]
        host, port = cluster.address(follower)
        yield Running(CLUSTER, host, port, None, _LeaderStats(cluster))

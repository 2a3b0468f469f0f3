"""Servers on a log directory for the restart tests: embedded, or a child ended by SIGKILL."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import beanpole
from logserver import Child, Client


class Running:
    """A server on a log directory, however it runs; ``stop()`` ends it the chosen way."""

    address: tuple[str, int]

    def stop(self) -> None:
        raise NotImplementedError


class InProcess(Running):
    def __init__(self, log_dir: Path, **config: object) -> None:
        self.server = beanpole.Server(
            listen="127.0.0.1",
            port=0,
            binlog_dir=str(log_dir),
            **config,  # type: ignore[arg-type]
        ).start()
        address = self.server.address
        assert isinstance(address, tuple)
        self.address = address

    def stop(self) -> None:
        self.server.stop()


class Killed(Running):
    """``python -m beanpole serve -b DIR -f 0 -p 0``, ended by SIGKILL."""

    def __init__(self, log_dir: Path, *extra: str) -> None:
        self.child = Child("-p", "0", "-b", str(log_dir), "-f", "0", *extra)
        try:
            self.address = self.child.listening()
        except BaseException:
            self.child.kill()
            raise

    def stop(self) -> None:
        self.child.kill()
        assert self.child.proc.returncode == -9


Starter = Callable[[Path], Running]


MODES: dict[str, Starter] = {
    "stop": lambda d: InProcess(d),
    "stop-no-fsync": lambda d: InProcess(d, no_fsync=True),
    "stop-small-segments": lambda d: InProcess(d, segment_size=4096, fsync_ms=0),
    "sigkill": lambda d: Killed(d),
}


@contextlib.contextmanager
def client_on(log_dir: Path, **config: object) -> Iterator[Client]:
    """An embedded server on ``log_dir`` and a connection to it, both closed at the end."""
    with beanpole.Server(
        listen="127.0.0.1",
        port=0,
        binlog_dir=str(log_dir),
        **config,  # type: ignore[arg-type]
    ) as server:
        address = server.address
        assert isinstance(address, tuple)
        with Client(address) as c:
            yield c

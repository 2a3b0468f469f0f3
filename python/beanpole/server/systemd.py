"""Running under systemd: socket activation and readiness notification.

Both follow systemd's documented protocols and need no systemd library:

- :func:`listen_fds` reads ``LISTEN_PID``/``LISTEN_FDS`` as ``sd_listen_fds(3)`` does:
  the inherited sockets are descriptors 3, 4, ... and count only if ``LISTEN_PID`` is
  this process; the variables are removed so that no child inherits them.
- :func:`notify` sends a state (``READY=1``, ``STOPPING=1``, ``STATUS=...``) as one
  datagram to the Unix socket named by ``NOTIFY_SOCKET``, as ``sd_notify(3)`` does; a
  name starting with ``@`` is in the abstract namespace.
- :class:`Notifier` sends ``READY=1`` once and ``STOPPING=1`` once, for ``beanpole serve``.

Server layer: imports the clients' modules, the settings and the native module at most;
nothing of ``beanpole.ops``, ``.cli`` or ``.spark``.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, MutableMapping
from typing import Final

__all__ = ["LISTEN_FDS_START", "Notifier", "SystemdError", "listen_fds", "notify"]

#: The first inherited descriptor (``SD_LISTEN_FDS_START``).
LISTEN_FDS_START: Final = 3
_ACTIVATION_VARS: Final = ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES")


class SystemdError(ValueError):
    """The socket activation variables are malformed."""


def listen_fds(environ: MutableMapping[str, str] | None = None) -> list[int]:
    """The listening sockets passed by socket activation, or ``[]`` if there are none.

    ``environ`` defaults to :data:`os.environ`; the activation variables are removed from
    it whatever they say. Each descriptor returned is marked close-on-exec. Raises
    :class:`SystemdError` if ``LISTEN_PID`` or ``LISTEN_FDS`` is not a number.
    """
    environ = os.environ if environ is None else environ
    pid_text = environ.get("LISTEN_PID", "")
    count_text = environ.get("LISTEN_FDS", "")
    for name in _ACTIVATION_VARS:
        environ.pop(name, None)
    if not pid_text or not count_text:
        return []
    try:
        pid = int(pid_text, 10)
        count = int(count_text, 10)
    except ValueError:
        raise SystemdError(
            f"LISTEN_PID={pid_text!r} LISTEN_FDS={count_text!r}: not numbers"
        ) from None
    if pid != os.getpid() or count <= 0:
        return []  # meant for another process (e.g. the parent)
    fds = list(range(LISTEN_FDS_START, LISTEN_FDS_START + count))
    for fd in fds:
        try:
            flags = fcntl.fcntl(fd, fcntl.F_GETFD)
            fcntl.fcntl(fd, fcntl.F_SETFD, flags | fcntl.FD_CLOEXEC)
        except OSError as err:
            raise SystemdError(
                f"LISTEN_FDS={count}, but descriptor {fd} is not open: {err.strerror}"
            ) from None
    return fds


def notify(state: str, environ: MutableMapping[str, str] | None = None) -> bool:
    """Send ``state`` (newline-separated ``KEY=VALUE`` lines) to the service manager.

    Returns False, sending nothing, when ``NOTIFY_SOCKET`` is unset or is not a Unix
    socket name. Raises :class:`OSError` if the datagram cannot be sent.
    """
    environ = os.environ if environ is None else environ
    where = environ.get("NOTIFY_SOCKET", "")
    if where.startswith("@"):
        address = "\0" + where[1:]
    elif where.startswith("/"):
        address = where
    else:
        return False
    import socket  # only under systemd: kept off the way to the first connection

    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
        sock.connect(address)
        sock.sendall(state.encode())
    return True


class Notifier:
    """Tells systemd (when ``NOTIFY_SOCKET`` is set) that the server is ready, then that
    it is stopping; each at most once, and stopping only after ready.

    A datagram that cannot be sent is passed to ``on_error`` (by default the
    :class:`OSError` is raised).
    """

    def __init__(
        self,
        environ: MutableMapping[str, str] | None = None,
        on_error: Callable[[OSError], None] | None = None,
    ) -> None:
        self._environ = os.environ if environ is None else environ
        self._on_error = on_error
        self._ready = False
        self._stopping = False

    def ready(self, status: str) -> None:
        """``READY=1`` with a status line."""
        if not self._ready:
            self._ready = True
            self._send(f"READY=1\nSTATUS={status}")

    def status(self, status: str) -> None:
        """A status line alone (e.g. when drain mode begins)."""
        if self._ready and not self._stopping:
            self._send(f"STATUS={status}")

    def stopping(self) -> None:
        """``STOPPING=1``, once, if ready was sent."""
        if self._ready and not self._stopping:
            self._stopping = True
            self._send("STOPPING=1\nSTATUS=stopping")

    def _send(self, state: str) -> None:
        try:
            notify(state, self._environ)
        except OSError as err:
            if self._on_error is None:
                raise
            self._on_error(err)

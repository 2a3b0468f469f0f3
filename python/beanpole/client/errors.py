"""The exceptions of :mod:`beanpole.client`, in their own module so the native code can
raise them without importing the client (this module imports nothing of beanpole).

``ClientError`` is the root. Server error replies are ``BeanstalkdError`` subclasses named
as in greenstalk; a failed, lost or timed-out connection is a ``ClientConnectionError``,
which is also Python's built-in ``ConnectionError``.

Client layer: imports the settings, ``beanpole.addr`` and the native module at most;
nothing of ``beanpole.server``, ``.ops``, ``.cli`` or ``.spark``.
"""

from __future__ import annotations

import builtins

__all__ = [
    "BadFormatError",
    "BatchError",
    "BeanstalkdError",
    "BuriedError",
    "ClientConnectionError",
    "ClientError",
    "ConnectFailedError",
    "ConnectionLostError",
    "ConnectionTimeoutError",
    "DeadlineSoonError",
    "DrainingError",
    "ExpectedCrlfError",
    "InternalError",
    "JobTooBigError",
    "NotConnectedError",
    "NotFoundError",
    "NotIgnoredError",
    "OutOfMemoryError",
    "ServerDownError",
    "TLSConfigError",
    "TLSError",
    "TimedOutError",
    "UnknownCommandError",
    "UnknownResponseError",
]


class ClientError(Exception):
    """Root of every error raised by beanpole's clients."""


class BeanstalkdError(ClientError):
    """The server answered with an error reply; the connection is still usable."""

    reply = ""


class BadFormatError(BeanstalkdError):
    """BAD_FORMAT: the server could not parse the command."""

    reply = "BAD_FORMAT"


class BuriedError(BeanstalkdError):
    """BURIED: the server ran out of memory for its priority queue and buried the job
    (after put or release). ``id`` is the job's id when the reply carried one."""

    reply = "BURIED"

    def __init__(self, message: str = "BURIED", id: int | None = None) -> None:
        super().__init__(message)
        self.id = id


class DeadlineSoonError(BeanstalkdError):
    """DEADLINE_SOON: a job this connection reserved is about to time out."""

    reply = "DEADLINE_SOON"


class DrainingError(BeanstalkdError):
    """DRAINING: the server is in drain mode and takes no new jobs."""

    reply = "DRAINING"


class ExpectedCrlfError(BeanstalkdError):
    """EXPECTED_CRLF: a job body did not end with CRLF."""

    reply = "EXPECTED_CRLF"


class InternalError(BeanstalkdError):
    """INTERNAL_ERROR: the server found a bug in itself."""

    reply = "INTERNAL_ERROR"


class JobTooBigError(BeanstalkdError):
    """JOB_TOO_BIG: the body is larger than the server's max job size."""

    reply = "JOB_TOO_BIG"


class NotFoundError(BeanstalkdError):
    """NOT_FOUND: no such job (or not reserved by this connection), or nothing to peek."""

    reply = "NOT_FOUND"


class NotIgnoredError(BeanstalkdError):
    """NOT_IGNORED: the last watched tube cannot be ignored."""

    reply = "NOT_IGNORED"


class OutOfMemoryError(BeanstalkdError):
    """OUT_OF_MEMORY: the server could not allocate the job."""

    reply = "OUT_OF_MEMORY"


class TimedOutError(BeanstalkdError):
    """TIMED_OUT: no job could be reserved within the timeout."""

    reply = "TIMED_OUT"


class UnknownCommandError(BeanstalkdError):
    """UNKNOWN_COMMAND: the server does not know the command."""

    reply = "UNKNOWN_COMMAND"


class ClientConnectionError(ClientError, builtins.ConnectionError):
    """The connection failed; it is closed and every later call raises
    ``NotConnectedError``."""


class ConnectFailedError(ClientConnectionError):
    """The server could not be reached."""


class TLSError(ConnectFailedError):
    """The TLS handshake failed (the server's certificate is not signed by the trusted
    CA or does not name the server, or the other end does not speak TLS), or the server
    ended the session with an alert, as it does when it refuses this client's
    certificate (that alert arrives with the reply to the first command)."""


class TLSConfigError(ClientError, ValueError):
    """The TLS files cannot be used: missing, unreadable, not PEM, or a key that does
    not go with its certificate. Nothing was connected."""


class ConnectionLostError(ClientConnectionError):
    """The server closed the connection, or reading or writing failed."""


class ConnectionTimeoutError(ClientConnectionError):
    """No reply came within the client's ``timeout``."""


class UnknownResponseError(ClientConnectionError):
    """The server sent something that is not a beanstalkd reply."""


class NotConnectedError(ClientConnectionError):
    """The client was closed, or its connection failed earlier."""


class ServerDownError(ClientConnectionError):
    """A server of a ``ShardedClient`` cannot be used; ``server`` names it."""

    def __init__(self, message: str, server: str = "") -> None:
        super().__init__(message)
        self.server = server


class BatchError(ClientError):
    """A batch stopped at item ``index`` because of ``reason`` (the error that item
    got). ``ids`` were acknowledged before it, in order (job ids, or for
    ``reserve_many`` the jobs reserved). ``after`` lists ``(index, id)`` of items that
    were already in flight and succeeded after the failure, so no acknowledged work
    goes unreported."""

    def __init__(
        self,
        message: str,
        index: int,
        reason: BaseException,
        ids: list[object],
        after: list[tuple[int, object]],
    ) -> None:
        super().__init__(message)
        self.index = index
        self.reason = reason
        self.ids = ids
        self.after = after

"""Type stubs for the native module built from rust/python."""

from typing import final

__all__ = ["ServerHandle", "__version__"]

__version__: str

_StatValue = int | float | str | bool

@final
class ServerHandle:
    """A running server: tokio runtime, listener and queue state, owned by Rust.

    Every blocking method releases the GIL while it waits.
    """

    @staticmethod
    def start(
        listen: str,
        port: int,
        max_job_size: int,
        verbose: int = 0,
        threads: int = 0,
    ) -> ServerHandle:
        """Bind the listener and start serving; return once the socket is bound.

        ``listen`` is an IPv4 or IPv6 address or ``unix:/path``. ``port`` 0 picks a
        free port. Raises ``OSError`` when the address cannot be bound and
        ``ValueError`` for an address or setting that makes no sense.
        """

    @property
    def address(self) -> tuple[str, int] | str:
        """``(host, port)`` actually bound, or the socket path for ``unix:``."""

    @property
    def running(self) -> bool: ...
    @property
    def draining(self) -> bool: ...
    def drain(self) -> None:
        """Enter drain mode: puts are answered DRAINING from now on."""

    def stop(self, timeout: float = 5.0) -> None:
        """Stop accepting, close connections and wait up to ``timeout`` seconds."""

    def wait(self, timeout: float | None = None) -> bool:
        """Block (without the GIL) until the server stops; True if it has stopped."""

    def stats(self) -> dict[str, _StatValue]:
        """The values of the ``stats`` command, keyed as on the wire."""

"""``--tls``, ``--tls-ca``, ``--tls-cert`` and ``--tls-key`` for the commands that connect
to a server as a client (``put``, ``peek``, ..., ``tail``, ``stats``, ``top``).

The decorated command receives one ``tls`` argument instead: the checked
:class:`beanpole.client.tls.TLSOptions`, or None for a plain connection. Any of the file
options turns TLS on by itself. The options have no environment variables: the
``BEANPOLE_TLS_*`` names belong to ``beanpole serve``'s own certificate settings.

The command, the top layer: imports any layer but ``beanpole.spark``; only the front
door (``beanpole.__main__``, the console script) and the command's own modules
import it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import click

__all__ = ["tls_client_options"]

F = TypeVar("F", bound=Callable[..., Any])

_FILE = click.Path(dir_okay=False)


def tls_client_options(fn: F) -> F:
    """Add the client TLS options to a click command (put it below ``@click.command``)."""

    @functools.wraps(fn)
    def wrapper(
        *args: Any,
        tls: bool,
        tls_ca: str | None,
        tls_cert: str | None,
        tls_key: str | None,
        **kwargs: Any,
    ) -> Any:
        on = tls or any(v is not None for v in (tls_ca, tls_cert, tls_key))
        if not on:
            return fn(*args, tls=None, **kwargs)  # plain: no ssl to import
        from beanpole.client.errors import TLSConfigError
        from beanpole.client.tls import tls_options

        try:
            options = tls_options(on, tls_ca, tls_cert, tls_key)
        except TLSConfigError as err:
            raise click.ClickException(str(err)) from None
        except ValueError as err:
            message = str(err).replace("cert= and key=", "--tls-cert and --tls-key")
            raise click.UsageError(message) from None
        return fn(*args, tls=options, **kwargs)

    decorated: Any = wrapper
    for option in reversed(
        [
            click.option(
                "--tls",
                is_flag=True,
                help="Connect with TLS, trusting the system's CA bundle unless --tls-ca.",
            ),
            click.option(
                "--tls-ca", type=_FILE, metavar="FILE", help="CA certificates (PEM) to trust."
            ),
            click.option(
                "--tls-cert",
                type=_FILE,
                metavar="FILE",
                help="Client certificate (PEM), for servers that require one.",
            ),
            click.option("--tls-key", type=_FILE, metavar="FILE", help="Key of --tls-cert (PEM)."),
        ]
    ):
        decorated = option(decorated)
    return decorated  # type: ignore[no-any-return]

"""The fast path of ``beanpole serve``: its options parsed without importing click.

A start is mostly Python imports, and click is the largest of them. A service manager
or a test harness runs ``beanpole serve`` with a few well-formed options, so
:func:`parse` reads exactly those, from the same table as the click command
(:mod:`beanpole.cli.serve_options`) and with the same result click would give
(``tests/test_serve_fast.py`` compares the two on generated command lines). Anything
else — ``--help``, ``--version``, an unknown option or one without its value, a value
click would refuse or convert in its own way, ``-f`` with ``-F``, an argument — is
left to click: :func:`serve` returns, and the click command parses the command line
and reports what it finds, exactly as before.

The command, the top layer: imports any layer but ``beanpole.spark``; only the front
door (``beanpole.__main__``, the console script) and the command's own modules
import it.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Sequence
from typing import Any, Final, NoReturn

from beanpole.cli.serve_options import CONFIG_OPTION, OPTIONS, Option
from beanpole.defaults import LISTEN, PORT

__all__ = ["bind_ahead", "parse", "serve"]

_BY_NAME: Final = {decl: option for option in OPTIONS for decl in option.decls}
#: Environment variable of click's shell completion for ``beanpole``.
_COMPLETION_ENV: Final = "_BEANPOLE_COMPLETE"


def parse(args: Sequence[str]) -> tuple[str | None, dict[str, Any]] | None:
    """``(config_file, flags)`` for the options ``args`` of ``serve`` (``flags``: the
    Config fields given, with their values as click converts them), or None when click
    must parse them."""
    values: dict[str, Any] = {}
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg.startswith("--"):
            name, eq, attached = arg.partition("=")
            option = _BY_NAME.get(name)
            if option is None:
                return None
            if option.kind in ("flag", "count"):
                if eq:
                    return None
                value: str | None = None
            elif eq:
                value = attached
            elif rest:
                value = rest.pop(0)
            else:
                return None
            if not _take(values, option, value):
                return None
        elif arg.startswith("-") and len(arg) > 1:
            option = _BY_NAME.get(arg[:2])
            if option is None:
                return None
            if option.kind in ("flag", "count"):
                # -V, -VV, -FV ...: every letter a flag.
                for letter in arg[1:]:
                    flag = _BY_NAME.get("-" + letter)
                    if flag is None or flag.kind not in ("flag", "count"):
                        return None
                    _take(values, flag, None)
                continue
            if len(arg) > 2:
                value = arg[2:]
            elif rest:
                value = rest.pop(0)
            else:
                return None
            if not _take(values, option, value):
                return None
        else:
            return None  # serve takes no arguments: click says so
    if "fsync_ms" in values and values.get("no_fsync"):
        return None  # a usage error click reports
    config_file = values.pop(CONFIG_OPTION.name, None)
    return config_file, values


def _take(values: dict[str, Any], option: Option, value: str | None) -> bool:
    """Record ``value`` for ``option`` as click would; False where click must decide."""
    name = option.name
    match option.kind:
        case "flag":
            values[name] = True
            return True
        case "count":
            values[name] = values.get(name, 0) + 1
            return True
    assert value is not None
    converted: Any = value
    if option.kind == "int":
        if not (value.isascii() and value.isdigit()):
            return False  # signs, spaces, underscores: click's int() and its messages
        converted = int(value)
    elif option.kind == "choice":
        if value not in option.choices:
            return False
    elif option.kind in ("file", "dir") and not _plain_path(value, option.kind):
        return False
    if option.multiple:
        values[name] = (*values.get(name, ()), converted)
    else:
        values[name] = converted
    return True


def _plain_path(path: str, kind: str) -> bool:
    """Whether click's Path type takes ``path`` unchanged without a word: it does not
    exist yet, or it is of the right kind and readable."""
    try:
        st = os.stat(path)
    except OSError:
        return True
    wrong = stat.S_ISDIR(st.st_mode) if kind == "file" else stat.S_ISREG(st.st_mode)
    return not wrong and os.access(path, os.R_OK)


def serve(args: Sequence[str]) -> None:
    """Run ``serve`` with ``args`` and exit, as the click command would; return without
    doing anything when the click command must take them (see :func:`parse`)."""
    if _COMPLETION_ENV in os.environ:
        return
    parsed = parse(args)
    if parsed is None:
        return
    config_file, flags = parsed
    ahead = bind_ahead(config_file, flags)
    from beanpole.cli.serve_run import FlagError, ServeError, run

    try:
        run(config_file, flags, ahead)
    except FlagError:
        return  # click reports a refused flag value as the usage error it is
    except ServeError as err:
        _fail(str(err))
    except KeyboardInterrupt:
        _abort()
    sys.exit(0)


def bind_ahead(config_file: str | None, flags: dict[str, Any]) -> tuple[int, ...]:
    """Listen now, before the settings and the server load, where the command line
    alone decides where; the listening sockets (see ``_core.bind_ahead``).

    Most of a start is Python importing; a client that connects meanwhile (a test
    harness that waits a fixed 0.1 s, say) then waits in the backlog until the server
    answers, instead of being refused, as with a service manager's sockets. Nothing is
    bound ahead where a config file, a ``BEANPOLE_*`` variable or a service manager
    may decide where to listen, for a cluster node (its file decides), for a Unix or
    TLS address, or when binding fails: the
    start then binds, and reports a failure, as it always has."""
    if config_file is not None or "LISTEN_FDS" in os.environ or "cluster" in flags:
        return ()
    if any(name.startswith("BEANPOLE_") for name in os.environ):
        return ()
    listen = tuple(flags.get("listen") or LISTEN)
    if any(address.startswith(("unix:", "tls:")) for address in listen):
        return ()
    from beanpole import _core

    try:
        return tuple(_core.bind_ahead(list(listen), flags.get("port", PORT)))
    except (OSError, ValueError, OverflowError):
        return ()


def _fail(message: str) -> NoReturn:
    import click

    click.ClickException(message).show()
    sys.exit(1)


def _abort() -> NoReturn:
    import click

    click.echo("Aborted!", err=True)
    sys.exit(1)

"""The import graph of ``beanpole serve`` stays small, so a start stays quick.

A server's start is mostly Python imports; whatever the serve path imports, every start
pays for (``bench/startup.py`` measures it). These tests run real interpreters and look
at ``sys.modules``: ``import beanpole.cli`` and a start must not load the terminal UI
(rich), the metrics (prometheus_client), Python's TLS (ssl: the server's TLS is rustls),
asyncio or pyarrow, nor any other command's module; a start with well-formed options
does not load click either (``beanpole.cli.serve_fast``). ``beanpole --help`` lists the
commands without importing them. The checker is tested on imports that do pull those
modules in, so it can fail.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterable

import click
import pytest
from click.utils import make_default_short_help

from beanpole.cli.group import COMMANDS, cli

#: Top-level packages neither ``import beanpole.cli`` nor a start may import.
FORBIDDEN = ("rich", "prometheus_client", "ssl", "asyncio", "pyarrow")
#: ... and a start with well-formed options not click either.
FORBIDDEN_IN_A_START = (*FORBIDDEN, "click")
#: The only beanpole modules a start needs.
SERVE_MODULES = {
    "beanpole",
    "beanpole._core",
    "beanpole.cli",
    "beanpole.defaults",
    "beanpole.config",
    "beanpole.config.checks",
    "beanpole.config.problems",
    "beanpole.config.settings",
    "beanpole.config.sources",
    "beanpole.server.hooks",
    "beanpole.logs",
    "beanpole.ops",
    "beanpole.ops.served",
    "beanpole.server.privileges",
    "beanpole.cli.serve_fast",
    "beanpole.cli.serve_options",
    "beanpole.cli.serve_run",
    "beanpole.cli.serve_errors",
    "beanpole.server",
    "beanpole.server.embedded",
    "beanpole.server.systemd",
}
TIMEOUT = 60


def modules_after(code: str) -> set[str]:
    """Every module loaded once ``code`` has run in a fresh interpreter."""
    script = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=TIMEOUT, check=True
    )
    return set(json.loads(out.stdout.splitlines()[-1]))


def forbidden_in(modules: Iterable[str], forbidden: Iterable[str] = FORBIDDEN) -> set[str]:
    names = set(forbidden)
    return {m for m in modules if m.split(".")[0] in names}


def beanpole_modules(modules: Iterable[str]) -> set[str]:
    return {m for m in modules if m == "beanpole" or m.startswith("beanpole.")}


def test_import_beanpole_cli_loads_none_of_the_heavy_modules() -> None:
    loaded = modules_after("import beanpole.cli")
    assert forbidden_in(loaded, FORBIDDEN_IN_A_START) == set()
    # Nor any command, nor the click group.
    assert beanpole_modules(loaded) == {"beanpole", "beanpole.cli"}


def test_a_start_loads_only_what_it_needs() -> None:
    loaded = modules_after("import beanpole.cli, beanpole.cli.serve_fast, beanpole.cli.serve_run")
    assert forbidden_in(loaded, FORBIDDEN_IN_A_START) == set()
    assert beanpole_modules(loaded) <= SERVE_MODULES


def test_the_click_command_of_serve_loads_none_of_the_heavy_modules() -> None:
    """Where click does parse a start (help, errors, odd options)."""
    loaded = modules_after("import beanpole.cli.serve")
    assert forbidden_in(loaded) == set()
    assert beanpole_modules(loaded) <= SERVE_MODULES | {"beanpole.cli.serve", "beanpole.cli.group"}


def test_the_checker_catches_a_heavy_import() -> None:
    """What the tests above would say if the serve path imported the clients' TLS, the
    stats tables or the metrics: ssl, rich and prometheus_client."""
    assert "ssl" in forbidden_in(modules_after("import beanpole.client.tls"))
    assert "rich" in forbidden_in(modules_after("import beanpole.ops.stats"))
    assert "click" in forbidden_in(
        modules_after("import beanpole.cli.serve"), FORBIDDEN_IN_A_START
    )
    assert "prometheus_client" in forbidden_in(modules_after("import beanpole.ops.metrics"))
    assert beanpole_modules(modules_after("import beanpole.cli.admin")) - SERVE_MODULES


def test_a_real_start_imports_none_of_them() -> None:
    """``beanpole serve`` as a process, its imports listed by ``-X importtime`` up to the
    start line (printed once the sockets are bound) and through the clean stop."""
    proc = subprocess.Popen(
        [sys.executable, "-X", "importtime", "-m", "beanpole", "serve", "-l", "127.0.0.1",
         "-p", "0"],
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    lines: list[str] = []
    try:
        for line in proc.stderr:
            lines.append(line)
            if " listening on " in line:
                break
        else:
            pytest.fail("no start line:\n" + "".join(lines))
        proc.send_signal(signal.SIGTERM)
        lines.extend(proc.stderr)
        assert proc.wait(TIMEOUT) == 0, "".join(lines)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    imported = {
        line.split("|")[-1].strip() for line in lines if line.startswith("import time:")
    }
    assert "beanpole.cli.serve_run" in imported  # the listing is read right
    assert forbidden_in(imported, FORBIDDEN_IN_A_START) == set()
    assert beanpole_modules(imported) <= SERVE_MODULES


def test_help_lists_the_commands_without_importing_them() -> None:
    code = (
        "from beanpole.cli import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass"
    )
    loaded = modules_after(code)
    assert beanpole_modules(loaded) == {"beanpole", "beanpole.cli", "beanpole.cli.group"}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_table_names_each_command_with_its_own_help(name: str) -> None:
    """``beanpole --help`` shows the table's line for a command not loaded yet: it must
    be what the command itself would show."""
    ctx = click.Context(cli)
    command = cli.get_command(ctx, name)
    assert command is not None and command.name == name
    table_help = COMMANDS[name][2]
    for limit in (45, 1000):
        assert make_default_short_help(table_help, limit) == command.get_short_help_str(limit)
    assert sorted(cli.list_commands(ctx)) == sorted(COMMANDS)

"""The fast path of ``beanpole serve`` reads options exactly as the click command does.

``beanpole.cli.serve_fast.parse`` takes the well-formed command lines of a start without
click and leaves every other to click. Here both parse the same generated command lines
(valid and odd values, every option's spellings): wherever the fast path accepts, its
result must be click's, and it must never accept what click refuses. Then real
processes: a start through the fast path, and errors that surface after parsing, which
read as the click command's own.
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
from typing import Any

import click
import pytest
from click.core import ParameterSource
from click.testing import CliRunner

from beanpole.cli.group import cli
from beanpole.cli.serve import serve
from beanpole.cli.serve_fast import bind_ahead, parse
from beanpole.cli.serve_options import OPTIONS, SETTINGS, Option

TIMEOUT = 60
VALUES = {
    "int": ["0", "1", "11300", "007", "-1", "+5", " 5", "1_000", "x", "", "99999999999"],
    "text": ["127.0.0.1", "::1", "unix:/tmp/x.sock", "", "-p", "--port", "a b"],
    "choice": ["text", "json", "JSON", "xml", ""],
}


def by_click(args: list[str]) -> tuple[str | None, dict[str, Any]] | None:
    """What the click command would serve with, or None where it reports an error."""
    try:
        ctx = serve.make_context("serve", list(args))
    except (click.exceptions.Exit, click.ClickException):
        return None
    flags = {
        name: ctx.params[name]
        for name in SETTINGS
        if ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE
    }
    if "fsync_ms" in flags and flags.get("no_fsync"):
        return None  # the command's own usage error
    if not flags.get("hooks", True):
        del flags["hooks"]
    return ctx.params["config_file"], flags


def spellings(option: Option, value: str | None, rng: random.Random) -> list[list[str]]:
    """The ways to give ``option`` on a command line."""
    forms: list[list[str]] = []
    for decl in option.decls:
        if value is None:
            forms.append([decl])
            if decl.startswith("--"):
                forms.append([decl + "=1"])
        elif decl.startswith("--"):
            forms += [[decl, value], [decl + "=" + value]]
        else:
            forms += [[decl, value], [decl + value]]
    return [rng.choice(forms)]


def value_for(option: Option, rng: random.Random, tmp: str) -> str | None:
    if option.kind in ("flag", "count"):
        return None
    if option.kind in ("file", "dir"):
        return rng.choice([tmp, tmp + "/missing", tmp + "/file", ""])
    return rng.choice(VALUES.get(option.kind, VALUES["text"]))


def test_the_fast_path_agrees_with_click(tmp_path: Any) -> None:
    rng = random.Random(25)
    (tmp_path / "file").write_text("[beanpole]\n")
    tmp = str(tmp_path)
    accepted = 0
    for _ in range(3000):
        args: list[str] = []
        for _ in range(rng.randint(0, 5)):
            option = rng.choice(OPTIONS)
            for form in spellings(option, value_for(option, rng, tmp), rng):
                args += form
        if rng.random() < 0.05:
            args.insert(rng.randint(0, len(args)), rng.choice(["-h", "-v", "--", "-", "x", "-x"]))
        if rng.random() < 0.05:
            args.append("-VFp")
        fast = parse(args)
        if fast is None:
            continue
        accepted += 1
        assert fast == by_click(args), args
    assert accepted > 1000  # the fast path takes most of them


@pytest.mark.parametrize(
    "args",
    [
        ["-l", "127.0.0.1", "-p", "0"],
        ["-p0", "-VV", "-F"],
        ["--listen=::1", "--listen", "unix:/tmp/x.sock", "--port", "11300"],
        ["-b", "/var/lib/beanpole", "-f", "0", "-s", "1048576", "-z", "1024"],
        ["--hooks", "audit:install", "--log-format", "json", "--http", "9464"],
        ["-c", "/etc/beanpole.toml", "--threads", "2", "--skip-corrupt", "-V", "-u", "nobody"],
    ],
)
def test_common_starts_take_the_fast_path(args: list[str]) -> None:
    fast = parse(args)
    assert fast is not None
    assert fast == by_click(args)


@pytest.mark.parametrize(
    "args",
    [["-h"], ["--help"], ["-v"], ["--version"], ["-p"], ["-p", "x"], ["-f", "0", "-F"], ["x"]],
)
def test_help_version_and_errors_are_left_to_click(args: list[str]) -> None:
    assert parse(args) is None


def run_serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "beanpole", "serve", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def test_an_error_after_parsing_reads_as_the_click_commands() -> None:
    """Address in use: found by the start itself, reported the same way on both paths."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        fast = run_serve("-l", "127.0.0.1", "-p", port)
        through_click = CliRunner().invoke(cli, ["serve", "-l", "127.0.0.1", "-p", port])
    assert fast.returncode == through_click.exit_code == 1
    assert fast.stderr.startswith(f"Error: cannot listen on 127.0.0.1:{port}")
    assert fast.stderr.strip() == through_click.output.strip()


def test_a_refused_value_is_clicks_usage_error() -> None:
    """-p 70000 parses as a number, so the fast path takes it; the setting refuses it,
    and click reports it as the usage error of -p."""
    assert parse(["-p", "70000"]) is not None
    result = run_serve("-p", "70000")
    assert result.returncode == 2
    assert "Invalid value for '-p' / '--port'" in result.stderr


#: In a fresh interpreter: bind ahead, connect a client to that socket before anything
#: heavy is imported, then start a server on the same socket and serve that client.
EARLY_CLIENT = """
import os, socket, sys
from beanpole.cli.serve_fast import bind_ahead
fds = bind_ahead(None, {"listen": ("127.0.0.1",), "port": 0})
assert len(fds) == 1, fds
loaded = [m for m in ("beanpole.config", "dataclasses", "logging") if m in sys.modules]
assert not loaded, loaded
probe = socket.socket(fileno=os.dup(fds[0]))
port = probe.getsockname()[1]
probe.close()
early = socket.create_connection(("127.0.0.1", port), timeout=30)  # waits in the backlog
early.sendall(b"list-tube-used\\r\\n")
import beanpole
with beanpole.Server(listen_fds=fds) as srv:
    assert srv.address == ("127.0.0.1", port), (srv.address, port)
    print(early.recv(100).decode().strip())
"""


def test_the_address_is_bound_before_the_settings_load() -> None:
    """The fast path listens on the command line's address before it imports the
    settings (the dataclass, logging: most of a start), so a client that connects
    during the start waits and is served by the server that then adopts the socket."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BEANPOLE_", "LISTEN_"))}
    result = subprocess.run(
        [sys.executable, "-c", EARLY_CLIENT],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "USING default"


@pytest.mark.parametrize(
    "config_file, flags, environ",
    [
        ("beanpole.toml", {}, {}),
        (None, {}, {"BEANPOLE_PORT": "11400"}),
        (None, {}, {"LISTEN_FDS": "1"}),
        (None, {"listen": ("unix:/tmp/beanpole-ahead.sock",)}, {}),
        (None, {"listen": ("tls:127.0.0.1",), "port": 0}, {}),
        (None, {"listen": ("127.0.0.1",), "port": 70000}, {}),
        (None, {"listen": ("not an address",), "port": 0}, {}),
    ],
)
def test_nothing_is_bound_ahead_where_more_than_the_command_line_decides(
    config_file: str | None,
    flags: dict[str, Any],
    environ: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A config file, BEANPOLE_* variables or a service manager may say where to listen;
    Unix and TLS addresses are the start's own; a value the settings will refuse is left
    to them (and its error): then the start binds as it always has."""
    for name in list(os.environ):
        if name.startswith(("BEANPOLE_", "LISTEN_")):
            monkeypatch.delenv(name)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    assert bind_ahead(config_file, flags) == ()


def test_an_address_in_use_is_not_bound_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("BEANPOLE_", "LISTEN_")):
            monkeypatch.delenv(name)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert bind_ahead(None, {"listen": ("127.0.0.1",), "port": port}) == ()
        fds = bind_ahead(None, {"listen": ("127.0.0.1",), "port": 0})
        assert len(fds) == 1
        os.close(fds[0])

"""Every name users reach today resolves where they reach it.

The package's modules live in subpackages (``client/``, ``server/``, ``ops/``, ``cli/``);
what users write does not change: every name of ``beanpole.__all__``, the module paths the
README and docs show (``beanpole.spark``, ``beanpole.pytest_plugin``, ``beanpole.systemd``,
``beanpole.sharded`` ...), the ``beanpole`` command's entry point and the pytest plugin's.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import subprocess
import sys

import pytest

import beanpole

#: Where each top-level name is defined.
HOMES = {
    "Client": "beanpole.client.blocking",
    "Job": "beanpole.client.blocking",
    "AsyncClient": "beanpole.client.async_client",
    "ShardedClient": "beanpole.client.sharded",
    "Config": "beanpole.config",
    "ConfigError": "beanpole.config",
    "ConfigWarning": "beanpole.config",
    "Event": "beanpole.server.hooks",
    "HookError": "beanpole.server.hooks",
    "ServerError": "beanpole.server.embedded",
    "Cluster": "beanpole.server.cluster",
    "ClusterError": "beanpole.server.cluster",
}

#: ``module:attribute`` paths the README and docs show.
DOCUMENTED = [
    "beanpole.spark:register",
    "beanpole.spark:ack",
    "beanpole.spark.writer:JobsWritten",
    "beanpole.pytest_plugin:beanpole_server",
    "beanpole._core:ServerHandle",
    "beanpole.cli:main",
    "beanpole.cli:cli",
    "beanpole.client:Client",
    "beanpole.client:NotFoundError",
    "beanpole.client:DEFAULT_PRIORITY",
    "beanpole.server:Server",
    "beanpole.server:ServerError",
]


@pytest.mark.parametrize("name", sorted(set(beanpole.__all__) - {"__version__"}))
def test_every_exported_name_resolves(name: str) -> None:
    value = getattr(beanpole, name)
    assert getattr(value, "__name__", name) == name
    if name.endswith("Error") and name not in HOMES:
        # The ClientError family, one class each, the same the clients raise.
        assert value is getattr(importlib.import_module("beanpole.client.errors"), name)
    elif name in HOMES:
        assert value is getattr(importlib.import_module(HOMES[name]), name)


def test_the_version_resolves() -> None:
    assert beanpole.__version__ == importlib.import_module("beanpole._core").__version__


def test_server_is_the_one_with_the_http_endpoint() -> None:
    assert issubclass(beanpole.Server, importlib.import_module("beanpole.server").Server)
    assert hasattr(beanpole.Server, "http_address")


@pytest.mark.parametrize("path", DOCUMENTED)
def test_documented_paths_resolve(path: str) -> None:
    module, _, attribute = path.partition(":")
    assert getattr(importlib.import_module(module), attribute) is not None


def test_moved_modules_stay_reachable_from_the_package() -> None:
    """``beanpole.systemd.listen_fds()`` (README) and ``beanpole.sharded.rendezvous``
    (docs/spark.md), now in ``beanpole.server`` and ``beanpole.client``."""
    systemd = importlib.import_module("beanpole.server.systemd")
    sharded = importlib.import_module("beanpole.client.sharded")
    assert beanpole.systemd is systemd
    assert beanpole.systemd.listen_fds is systemd.listen_fds
    assert beanpole.sharded.rendezvous is sharded.rendezvous
    from beanpole import sharded as imported

    assert imported is sharded


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError):
        beanpole.NoSuchThing  # noqa: B018
    with pytest.raises(AttributeError):
        importlib.import_module("beanpole.client").NoSuchThing  # noqa: B018


def test_the_entry_points_name_the_same_places() -> None:
    entry_points = importlib.metadata.entry_points()
    (script,) = [e for e in entry_points.select(group="console_scripts") if e.name == "beanpole"]
    assert script.value == "beanpole.cli:main"
    assert script.load() is importlib.import_module("beanpole.cli").main
    (plugin,) = [e for e in entry_points.select(group="pytest11") if e.name == "beanpole"]
    assert plugin.load() is importlib.import_module("beanpole.pytest_plugin")


def test_python_dash_m_beanpole_runs_the_command() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "beanpole", "--version"], capture_output=True, text=True,
        timeout=60, check=True,
    )
    assert out.stdout == f"beanpole {beanpole.__version__}\n"


def test_the_protocol_only_server_refuses_http_instead_of_ignoring_it() -> None:
    """``beanpole.server.Server`` knows nothing of the HTTP endpoint; asked for one it says
    so, and ``beanpole.Server`` serves it."""
    protocol_only = importlib.import_module("beanpole.server").Server
    server = protocol_only(port=0, listen="127.0.0.1", http="127.0.0.1:0")
    with pytest.raises(beanpole.ServerError, match=r"http is served by beanpole\.Server"):
        server.start()
    assert not server.running
    with beanpole.Server(port=0, listen="127.0.0.1", http="127.0.0.1:0") as served:
        assert served.http_address is not None

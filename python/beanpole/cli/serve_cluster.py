"""``beanpole serve --cluster FILE --node N -b DIR``: run one node of a replicated
cluster (``beanpole._core.ClusterNode``) until SIGTERM or SIGINT.

The node's client and peer addresses come from the cluster file; it serves clients
while it leads, and relays them to the leader while it does not (a client's connection
ends when the leader it reaches goes; keeping it through a change of leader comes
later). Settings a node does not take yet are refused with one line:
its addresses are the file's, the Raft log is synced before a reply (``-F``: never,
a weaker setting: a majority's acknowledgement then means written to their operating
systems, which a crash of those machines can lose), and the
HTTP endpoint, TLS, hooks and switching user are for single servers for now. With
``--admin-token-file`` the node takes membership changes (``beanpole cluster add``,
``promote``, ``remove``) that carry that token.

The command, the top layer: imports any layer but ``beanpole.spark``; only
:mod:`beanpole.cli.serve_run` imports it.
"""

from __future__ import annotations

import logging
import signal
from typing import Any, Final

from beanpole import logs
from beanpole.cli.serve_errors import ServeError
from beanpole.config import Config, flag
from beanpole.server import systemd

__all__ = ["run_node"]

_LOG = logging.getLogger(logs.LOGGER)
_DEFAULTS: Final = Config()
#: Settings a cluster node refuses when they differ from their defaults, and why.
_NOT_FOR_NODES: Final = {
    "listen": "a node listens on its client address in the cluster file",
    "port": "a node listens on its client address in the cluster file",
    "unix_mode": "a node listens on its client address in the cluster file",
    "fsync_ms": "a node syncs its Raft log before every reply (or never, with -F)",
    "segment_size": "a node's log is its Raft log",
    "skip_corrupt": "a node's log is its Raft log",
    "http": "not available on cluster nodes yet",
    "tls_cert": "not available on cluster nodes yet",
    "tls_key": "not available on cluster nodes yet",
    "tls_client_ca": "not available on cluster nodes yet",
    "hooks": "not available on cluster nodes yet",
    "user": "not available on cluster nodes yet",
}
_STOP: Final = {signal.SIGTERM, signal.SIGINT}
#: Seconds between looks at the node's health while waiting for a signal.
_CHECK_EVERY: Final = 0.5


def run_node(config: Config, flags: dict[str, Any]) -> None:
    """Serve as node ``config.node`` of ``config.cluster`` until SIGTERM or SIGINT."""
    for name, why in _NOT_FOR_NODES.items():
        if name in flags or getattr(config, name) != getattr(_DEFAULTS, name):
            raise ServeError(f"{flag(name)} cannot be used with --cluster: {why}")
    from beanpole import _core

    token = None
    if config.admin_token_file is not None:
        from beanpole.ops.dashboard.actions import TokenError, load_token

        try:
            token = load_token(config.admin_token_file).decode("ascii")
        except TokenError as err:
            raise ServeError(str(err)) from None
    # Config has checked that a cluster comes with a node and a data directory.
    assert config.cluster is not None
    assert config.node is not None and config.binlog_dir is not None
    # The signals are blocked before the node's threads start (they inherit the mask),
    # so that only the wait below takes them.
    signal.pthread_sigmask(signal.SIG_BLOCK, _STOP)
    try:
        node = _core.ClusterNode.start(
            config.cluster,
            config.node,
            config.binlog_dir,
            max_job_size=config.max_job_size,
            verbose=config.verbose,
            threads=config.threads,
            max_connections=config.max_connections,
            max_memory=config.max_memory,
            commit_timeout_ms=config.commit_timeout_ms,
            admin_token=token,
            fsync=not config.no_fsync,
        )
    except (OSError, ValueError) as err:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP)
        raise ServeError(str(err)) from None
    notifier = systemd.Notifier(on_error=lambda err: None)
    host, port = node.address
    shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    _LOG.info(
        "beanpole node %d of cluster %s: clients on %s; data in %s, %s",
        config.node,
        config.cluster,
        shown,
        config.binlog_dir,
        "never synced (-F)" if config.no_fsync else "synced before every reply",
        extra={"bare": True},
    )
    notifier.ready(f"cluster node {config.node}, clients on {shown}")
    try:
        failure = _wait(node)
        notifier.stopping()
    finally:
        node.stop()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP)
    if failure is not None:
        raise ServeError(f"node {config.node}: raft stopped: {failure}")


def _wait(node: Any) -> str | None:
    """Until SIGTERM or SIGINT (None), or until the node's Raft stops on a fatal
    error (why): a node that can no longer take part ends its process, with status 1,
    rather than go on listening and answer nothing."""
    while True:
        got = signal.sigtimedwait(_STOP, _CHECK_EVERY)
        if got is not None:
            _LOG.info("%s: stopping", signal.Signals(got.si_signo).name)
            return None
        failure: str | None = node.failure()
        if failure is not None:
            return failure

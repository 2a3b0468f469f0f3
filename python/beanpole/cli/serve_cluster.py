"""``beanpole serve --cluster FILE --node N -b DIR``: run one node of a replicated
cluster (``beanpole._core.ClusterNode``) until SIGTERM or SIGINT.

The node's client and peer addresses come from the cluster file; it serves clients
while it leads, and relays them to the leader while it does not (a client's connection
ends when the leader it reaches goes; keeping it through a change of leader comes
later). ``--http`` serves the node's metrics, health, readiness and dashboard
(:class:`beanpole.ops.served_node.ServedNode`; ``tls:`` with ``--tls-cert`` and
``--tls-key``), and ``--hooks`` modules get the node's events (``leader-elected``,
``node-down``, ``shutdown``). On SIGTERM or SIGINT a leader first hands its lead to the
most up-to-date other voter, then stops. Settings a node does not take yet are refused with one
line: its addresses are the file's, the Raft log is synced before a reply (``-F``:
never, a weaker setting: a majority's acknowledgement then means written to their
operating systems, which a crash of those machines can lose), its client address has
no TLS, and switching user is for single servers for now. With
``--admin-token-file`` the node takes membership changes (``beanpole cluster add``,
``promote``, ``remove``) that carry that token, and the dashboard's actions.

The command, the top layer: imports any layer but ``beanpole.spark``; only
:mod:`beanpole.cli.serve_run` imports it.
"""

from __future__ import annotations

import logging
import signal
from typing import Any, Final

from beanpole import logs
from beanpole.addr import is_tls_http
from beanpole.cli.serve_errors import ServeError
from beanpole.config import Config, flag
from beanpole.ops.served_node import ServedNode
from beanpole.server import systemd
from beanpole.server.embedded import ServerError
from beanpole.server.hooks import HookError, load_hook

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
    "user": "not available on cluster nodes yet",
}
#: TLS settings: on a node they serve only ``--http tls:HOST:PORT``.
_TLS: Final = ("tls_cert", "tls_key", "tls_client_ca")
_STOP: Final = {signal.SIGTERM, signal.SIGINT}
_NAMES: Final = {int(s): s.name for s in _STOP}
#: Seconds between looks at the node's health while waiting for a signal.
_CHECK_EVERY: Final = 0.5
#: Seconds a stopping leader may spend handing its lead over.
_HAND_OVER: Final = 5.0


def run_node(config: Config, flags: dict[str, Any]) -> None:
    """Serve as node ``config.node`` of ``config.cluster`` until SIGTERM or SIGINT."""
    for name, why in _NOT_FOR_NODES.items():
        if name in flags or getattr(config, name) != getattr(_DEFAULTS, name):
            raise ServeError(f"{flag(name)} cannot be used with --cluster: {why}")
    if not is_tls_http(config.http or ""):
        for name in _TLS:
            if getattr(config, name) is not None:
                raise ServeError(
                    f"{flag(name)} cannot be used with --cluster except for --http "
                    "tls:HOST:PORT: a node's client address has no TLS yet"
                )
    from beanpole import _core

    # Config has checked that a cluster comes with a node and a data directory.
    assert config.cluster is not None
    assert config.node is not None and config.binlog_dir is not None
    token = None
    if config.admin_token_file is not None:
        from beanpole.ops.dashboard.actions import TokenError, load_token

        try:
            token = load_token(config.admin_token_file).decode("ascii")
        except TokenError as err:
            raise ServeError(str(err)) from None
    # The signals are blocked before any thread starts (threads inherit the mask: the
    # HTTP endpoint's, the node's, a hook module's), so that only the wait below takes
    # them.
    signal.pthread_sigmask(signal.SIG_BLOCK, _STOP)
    # Hooks and the HTTP endpoint first: what they refuse stops the start before the
    # node runs.
    node = ServedNode(config.cluster, config.node, config)
    try:
        for spec in config.hooks:
            load_hook(spec)(node)
        node.listen()
    except (HookError, ServerError, OSError) as err:
        node.close()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP)
        raise ServeError(str(err)) from None
    except BaseException:
        node.close()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP)
        raise
    try:
        native = _core.ClusterNode.start(
            config.cluster,
            config.node,
            config.binlog_dir,
            max_job_size=config.max_job_size,
            verbose=config.verbose,
            threads=config.threads,
            max_connections=config.max_connections,
            max_memory=config.max_memory,
            commit_timeout_ms=config.commit_timeout_ms,
            session_grace_ms=config.session_grace_ms,
            log_cache_bytes=config.log_cache_bytes,
            snapshot_bytes=config.snapshot_bytes,
            admin_token=token,
            fsync=not config.no_fsync,
        )
    except (OSError, ValueError) as err:
        node.close()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP)
        raise ServeError(str(err)) from None
    node.start(native)
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
    if node.http_address is not None:
        scheme = "https" if is_tls_http(config.http or "") else "http"
        http_host, http_port = node.http_address
        at = f"[{http_host}]:{http_port}" if ":" in http_host else f"{http_host}:{http_port}"
        _LOG.info("metrics on %s://%s/metrics", scheme, at)
        _LOG.info("dashboard on %s://%s/", scheme, at)
    notifier.ready(f"cluster node {config.node}, clients on {shown}")
    try:
        failure = _wait(native)
        notifier.stopping()
        if failure is None:
            # A planned stop: a leader hands its lead to another voter first, so the
            # others serve again within a round trip or two rather than after an
            # election timeout (docs/cluster.md, "A planned stop").
            handed = native.hand_over(_HAND_OVER)
            if handed["outcome"] != "not-leader":
                _LOG.info("node %d: %s", config.node, handed["message"])
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
            name = _NAMES.get(got.si_signo)
            if name is None:
                # Woken without one of ours (seen after SIGSTOP and SIGCONT, with a
                # number that is no signal's): wait on.
                continue
            _LOG.info("%s: stopping", name)
            return None
        failure: str | None = node.failure()
        if failure is not None:
            return failure

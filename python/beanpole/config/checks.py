"""The checks of every setting's value: numbers in range, addresses, paths, modes, the
TLS pairs. Each raises :class:`~beanpole.config.problems.Invalid` naming the field;
:class:`beanpole.config.Config` turns it into a ``ConfigError``.

Imports only the standard library, :mod:`beanpole.addr`, :mod:`beanpole.config.problems`
and the octal parser of :mod:`beanpole.config.sources`; never the settings themselves
(they import this).
"""

from __future__ import annotations

import ipaddress
import os
from typing import Final, Protocol

from beanpole.config.problems import Invalid
from beanpole.config.sources import parse_octal

__all__ = [
    "INT64_MAX",
    "UNIX_PATH_MAX",
    "TLSSettings",
    "check_address",
    "check_binlog_dir",
    "check_bool",
    "check_cluster",
    "check_file",
    "check_hooks",
    "check_hosts",
    "check_http",
    "check_int",
    "check_listen",
    "check_tls",
    "check_unix_mode",
]

#: Longest ``sun_path`` Linux accepts for a unix socket, in bytes (108 minus the NUL).
UNIX_PATH_MAX: Final = 107
#: The largest value the native layer takes for an integer setting (a signed 64-bit one).
INT64_MAX: Final = (1 << 63) - 1


class ClusterSettings(Protocol):
    """The settings :func:`check_cluster` reads (a :class:`beanpole.config.Config`)."""

    @property
    def cluster(self) -> str | None: ...
    @property
    def node(self) -> int | None: ...
    @property
    def binlog_dir(self) -> str | None: ...
    @property
    def commit_timeout_ms(self) -> int: ...
    @property
    def session_grace_ms(self) -> int: ...
    @property
    def log_cache_bytes(self) -> int: ...
    @property
    def snapshot_bytes(self) -> int: ...


class TLSSettings(Protocol):
    """The settings :func:`check_tls` reads (a :class:`beanpole.config.Config`)."""

    @property
    def listen(self) -> tuple[str, ...]: ...
    @property
    def http(self) -> str | None: ...
    @property
    def tls_cert(self) -> str | None: ...
    @property
    def tls_key(self) -> str | None: ...
    @property
    def tls_client_ca(self) -> str | None: ...


def check_int(
    name: str, value: object, *, low: int, high: int | None = None, hint: str = ""
) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise Invalid(f"must be an integer, got {value!r}", field=name)
    if value < low or (high is not None and value > high):
        if high is None or (high == INT64_MAX and value < low):
            bound = f"at least {low}"
        elif high == INT64_MAX:
            bound = f"at most {high}"
        else:
            bound = f"between {low} and {high}"
        raise Invalid(f"must be {bound}{hint}, got {value}", field=name)


def check_bool(name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise Invalid(f"must be true or false, got {value!r}", field=name)


def check_binlog_dir(value: object) -> None:
    if value is None:
        return
    if not isinstance(value, str):
        raise Invalid(f"must be a directory path or None, got {value!r}", field="binlog_dir")
    if not value:
        raise Invalid("must be a directory path, got an empty string", field="binlog_dir")
    if "\0" in value:
        raise Invalid("directory path contains a NUL byte", field="binlog_dir")


def check_file(name: str, value: object) -> None:
    if value is None:
        return
    if not isinstance(value, str) or not value or "\0" in value:
        raise Invalid(f"must be a file path or None, got {value!r}", field=name)


#: Settings of cluster nodes only, with their defaults (a single server refuses
#: any other value).
CLUSTER_ONLY: Final = {
    "commit_timeout_ms": 5000,
    "session_grace_ms": 5000,
    "log_cache_bytes": 16 << 20,
    "snapshot_bytes": 64 << 20,
}


def check_cluster(config: ClusterSettings) -> None:
    """--cluster names a file and needs --node (an id of 1 or more) and -b; --node
    and a cluster node's setting (CLUSTER_ONLY) other than its default need
    --cluster."""
    check_file("cluster", config.cluster)
    node = config.node
    if node is not None and (isinstance(node, bool) or not isinstance(node, int) or node < 1):
        raise Invalid(f"must be a node id of 1 or more, got {node!r}", field="node")
    if config.cluster is None:
        if node is not None:
            raise Invalid("needs --cluster as well (the file that lists the nodes)", field="node")
        for name, default in CLUSTER_ONLY.items():
            if getattr(config, name) != default:
                raise Invalid("applies to cluster nodes only (needs --cluster)", field=name)
        return
    if node is None:
        raise Invalid("needs --node as well (this node's id in the file)", field="cluster")
    if config.binlog_dir is None:
        raise Invalid(
            "needs -b/--binlog-dir as well (the node's data directory)", field="cluster"
        )


def check_tls(config: TLSSettings) -> None:
    """A tls: listener needs a certificate and a key; one of the pair needs the other."""
    tls_listeners = [a for a in config.listen if a.startswith("tls:")]
    if config.tls_cert is None and config.tls_key is not None:
        raise Invalid("needs --tls-cert as well", field="tls_key")
    if config.tls_key is None and config.tls_cert is not None:
        raise Invalid("needs --tls-key as well", field="tls_cert")
    if tls_listeners and config.tls_cert is None:
        raise Invalid(
            f"{tls_listeners[0]} needs a certificate and a key (--tls-cert, --tls-key)",
            field="listen",
        )
    if config.http is not None and config.http.strip().startswith("tls:") and (
        config.tls_cert is None
    ):
        raise Invalid(
            f"{config.http} needs a certificate and a key (--tls-cert, --tls-key)",
            field="http",
        )
    if config.tls_client_ca is not None and config.tls_cert is None:
        raise Invalid("needs --tls-cert and --tls-key as well", field="tls_client_ca")


def check_listen(value: object) -> tuple[str, ...]:
    """The addresses of ``listen`` as a tuple (one string is one address), each checked."""
    if isinstance(value, str):
        items: tuple[object, ...] = (value,)
    elif isinstance(value, (list, tuple)):
        items = tuple(value)
    else:
        raise Invalid(
            f"must be an address or a list of addresses, got {value!r}", field="listen"
        )
    if not items:
        raise Invalid("needs at least one address", field="listen")
    for item in items:
        check_address(item)
    return tuple(str(item) for item in items)


def check_address(value: object) -> None:
    if not isinstance(value, str):
        raise Invalid(f"must be a string, got {value!r}", field="listen")
    if value.startswith("tls:"):
        if not _is_ip_address(value.removeprefix("tls:")):
            raise Invalid(
                f"tls: takes an IPv4 or IPv6 address, with an optional port "
                f"(tls:0.0.0.0:11443, tls:[::1]:11443), got {value!r}",
                field="listen",
            )
        return
    if value.startswith("unix:"):
        path = value.removeprefix("unix:")
        if not path:
            raise Invalid(
                "unix: needs a socket path, e.g. unix:/run/beanpole.sock", field="listen"
            )
        if "\0" in path:
            raise Invalid("socket path contains a NUL byte", field="listen")
        if len(os.fsencode(path)) > UNIX_PATH_MAX:
            raise Invalid(
                f"socket path is longer than {UNIX_PATH_MAX} bytes: {path!r}", field="listen"
            )
        return
    if not _is_ip_address(value):
        hint = ""
        if value.count(":") > 1 and not value.startswith("["):
            hint = " (an IPv6 address takes a port only in brackets: [::1]:11301)"
        raise Invalid(
            f"must be an IPv4 address (e.g. 127.0.0.1 or 0.0.0.0), an IPv6 address (e.g. ::1, "
            f"::, [::1]), either with a port (127.0.0.1:11301, [::1]:11301), or unix:/path, "
            f"got {value!r}{hint}",
            field="listen",
        )


def _is_ip_address(value: str) -> bool:
    """Whether ``value`` is ``IPv4``, ``IPv6``, ``[IPv6]``, ``IPv4:PORT`` or ``[IPv6]:PORT``."""
    if value.startswith("["):
        inside, bracket, after = value[1:].partition("]")
        if not bracket or not _is_ip(inside, version=6):
            return False
        return after == "" or (after.startswith(":") and _is_port(after[1:]))
    if _is_ip(value):
        return True
    host, colon, port = value.partition(":")
    return bool(colon) and _is_ip(host, version=4) and _is_port(port)


def _is_ip(text: str, version: int | None = None) -> bool:
    if "%" in text:
        return False  # an IPv6 scope (fe80::1%eth0) is not supported
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return False
    return version is None or address.version == version


def _is_port(text: str) -> bool:
    return text.isascii() and text.isdigit() and int(text) <= 65535


def check_unix_mode(value: object) -> int | None:
    """``unix_mode`` as an int: an int as is, a string read as octal (``"0660"``)."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = parse_octal(value)
        except ValueError as err:
            raise Invalid(str(err), field="unix_mode") from None
    if not isinstance(value, int) or isinstance(value, bool):
        raise Invalid(f"must be an octal mode such as 0660, got {value!r}", field="unix_mode")
    if not 0 <= value <= 0o777:
        raise Invalid(f"must be between 0 and 0777, got {value:#o}", field="unix_mode")
    return value


def check_hooks(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        value = (value,)
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise Invalid(f"must be a list of MODULE:FUNCTION, got {value!r}", field="hooks")
    for spec in value:
        module, sep, function = spec.partition(":")
        if not sep or not module.strip() or not function.strip():
            raise Invalid(f"must be MODULE:FUNCTION, got {spec!r}", field="hooks")
    return tuple(value)
def check_hosts(value: object) -> tuple[str, ...]:
    """``http_allowed_host`` as a tuple of lower-case names (one string is one name)."""
    if isinstance(value, str):
        value = (value,)
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise Invalid(f"must be a list of host names, got {value!r}", field="http_allowed_host")
    names = []
    for name in value:
        host = name.strip().lower().rstrip(".")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        if not host or not host.isascii() or any(c in host for c in " /\\?#@\t\r\n"):
            raise Invalid(f"must be a host name or address, got {name!r}",
                              field="http_allowed_host")
        names.append(host)
    return tuple(names)


def check_http(value: object) -> None:
    if value is None:
        return
    if not isinstance(value, str):
        raise Invalid(f"must be [HOST:]PORT or None, got {value!r}", field="http")
    from beanpole.addr import parse_http

    try:
        parse_http(value)
    except ValueError as err:
        raise Invalid(f"must be [HOST:]PORT: {err}", field="http") from None

"""Running as another user (``-u USER``): the account, whether it can write the log
directory, and the switch itself, made once the sockets are bound and the log is open.

Server layer: imports the clients' modules, the settings and the native module at most;
nothing of ``beanpole.ops``, ``.cli`` or ``.spark``.
"""

from __future__ import annotations

import os
import pwd

__all__ = ["PrivilegeError", "become", "check_log_dir_for", "lookup_user"]


class PrivilegeError(RuntimeError):
    """The process cannot run as the user it was asked to become."""


def lookup_user(name: str) -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        raise PrivilegeError(f"cannot become user {name!r}: no such user") from None


def check_log_dir_for(account: pwd.struct_passwd, binlog_dir: str) -> None:
    """The log is opened before the switch of user, but its later files are made after
    it: refuse to start when ``account`` could not make them. Checked with the user's
    ids as the effective ones (root only; otherwise the switch itself fails later)."""
    if os.geteuid() != 0 or account.pw_uid == 0:
        return
    path = os.path.abspath(binlog_dir)
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    os.setegid(account.pw_gid)
    os.seteuid(account.pw_uid)
    try:
        allowed = os.access(path, os.W_OK | os.X_OK, effective_ids=True)
    finally:
        os.seteuid(0)
        os.setegid(0)
    if not allowed:
        raise PrivilegeError(
            f"user {account.pw_name!r} cannot write the log directory {binlog_dir} "
            "(or a directory on its path)"
        )


def become(account: pwd.struct_passwd) -> None:
    """Switch the whole process to ``account``'s user and group, dropping other groups."""
    if os.geteuid() == account.pw_uid and os.getegid() == account.pw_gid:
        return
    os.setgroups([])
    os.setgid(account.pw_gid)
    os.setuid(account.pw_uid)

"""``-u USER``: the server becomes USER once its socket is bound, for real: a system
user made for the test (when the tests run as root), every thread of the process
checked, and a write-ahead log kept in a directory of that user across a restart.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import beanpole
from servechild import ServeChild, command, serving


@pytest.fixture
def system_user() -> Iterator[pwd.struct_passwd]:
    """A system user (with a group of its own) made for this test and removed after."""
    if os.geteuid() != 0:
        pytest.skip("making a user and switching to it needs root")
    if shutil.which("useradd") is None or shutil.which("userdel") is None:
        pytest.skip("useradd and userdel are not installed")
    name = f"bptest{os.getpid()}"
    made = subprocess.run(
        ["useradd", "--system", "--user-group", "--no-create-home", "--shell", "/bin/false", name],
        capture_output=True,
        text=True,
        check=False,
    )
    if made.returncode != 0:
        pytest.skip(f"useradd failed: {made.stderr.strip()}")
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", name], capture_output=True, check=False)


def ids(status: str, key: str) -> list[int]:
    match = re.search(rf"^{key}:[ \t]*(.*)$", status, re.MULTILINE)
    assert match, status
    return [int(v) for v in match.group(1).split()]


def assert_runs_as(child: ServeChild, account: pwd.struct_passwd) -> None:
    """Every thread: real, effective, saved and filesystem ids are the user's, and no
    supplementary group is left."""
    tasks = list(Path(f"/proc/{child.proc.pid}/task").iterdir())
    assert len(tasks) > 1, "the server runs threads of its own"
    for task in tasks:
        status = (task / "status").read_text()
        assert ids(status, "Uid") == [account.pw_uid] * 4, (task.name, status)
        assert ids(status, "Gid") == [account.pw_gid] * 4, (task.name, status)
        assert ids(status, "Groups") == [], (task.name, status)


def test_the_server_becomes_the_user(system_user: pwd.struct_passwd) -> None:
    with serving("-u", system_user.pw_name) as child:
        assert_runs_as(child, system_user)
        c = child.connect()
        assert command(c, b"put 0 0 60 2\r\nhi\r\n") == b"INSERTED 1\r\n"
        assert command(c, b"reserve\r\n") == b"RESERVED 1 2\r\nhi\r\n"
        c.close()
        child.proc.send_signal(signal.SIGTERM)
        assert child.proc.wait(timeout=10) == 0


@pytest.fixture
def user_dir(system_user: pwd.struct_passwd) -> Iterator[Path]:
    """An empty directory of the user's, on a path the user can reach (pytest's own
    temporary directories are root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="beanpole-user-"))
    path.chmod(0o755)
    logdir = path / "log"
    logdir.mkdir()
    os.chown(logdir, system_user.pw_uid, system_user.pw_gid)
    try:
        yield logdir
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_a_log_kept_as_the_user_survives_a_restart(
    system_user: pwd.struct_passwd, user_dir: Path
) -> None:
    logdir = user_dir
    args = ("-u", system_user.pw_name, "-b", str(logdir), "-s", "65536", "-f", "0")
    body = b"j" * 10000
    with serving(*args) as child:
        assert_runs_as(child, system_user)
        c = child.connect()
        # Enough for several segments: files made after the switch belong to the user.
        for i in range(1, 21):
            assert command(c, b"put 5 0 60 10000\r\n" + body + b"\r\n") == b"INSERTED %d\r\n" % i
        assert command(c, b"delete 3\r\n") == b"DELETED\r\n"
        c.close()
        child.proc.send_signal(signal.SIGTERM)
        assert child.proc.wait(timeout=10) == 0
    owners = {p.stat().st_uid for p in logdir.iterdir() if p.is_file()}
    assert system_user.pw_uid in owners
    with serving(*args) as child:
        assert_runs_as(child, system_user)
        c = child.connect()
        assert command(c, b"peek 3\r\n") == b"NOT_FOUND\r\n"
        for i in (1, 2, 4, 20):
            assert command(c, b"peek %d\r\n" % i) == b"FOUND %d 10000\r\n" % i + body + b"\r\n"
        assert command(c, b"put 0 0 60 1\r\nz\r\n") == b"INSERTED 21\r\n"
        c.close()


def test_a_log_directory_the_user_cannot_write_stops_the_start(
    system_user: pwd.struct_passwd, tmp_path: Path
) -> None:
    # pytest's temporary directories are root's alone: the user cannot reach it.
    logdir = tmp_path / "log"
    logdir.mkdir()
    os.chown(logdir, system_user.pw_uid, system_user.pw_gid)
    package_root = str(Path(beanpole.__file__).resolve().parent.parent)
    env = {k: v for k, v in os.environ.items() if not k.startswith("BEANPOLE_")}
    env["PYTHONPATH"] = package_root
    serve = ["serve", "-p", "0", "-u", system_user.pw_name, "-b", str(logdir)]
    done = subprocess.run(
        [sys.executable, "-m", "beanpole", *serve],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 1, done
    lines = done.stderr.strip().splitlines()
    assert lines[-1] == (
        f"Error: user {system_user.pw_name!r} cannot write the log directory {logdir} "
        "(or a directory on its path)"
    ), done.stderr

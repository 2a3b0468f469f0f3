"""The ``beanpole`` command: help, version and usage errors through click's CliRunner, and
real ``python -m beanpole serve`` processes driven over a socket and with signals."""

from __future__ import annotations

import importlib.util
import os
import pwd
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import beanpole
from beanpole.cli import cli
from beanpole.config import Config

HAVE_CORE = importlib.util.find_spec("beanpole._core") is not None
needs_core = pytest.mark.skipif(
    not HAVE_CORE, reason="native module beanpole._core is not built (run `maturin develop`)"
)
TIMEOUT = 10.0  # seconds; generous upper bound for anything that should take milliseconds
LISTENING = re.compile(r"^beanpole (\S+) listening on (\S+):(\d+)(?:[;,\s]|$)")


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No BEANPOLE_* variable of the outer environment leaks into these tests."""
    for name in list(os.environ):
        if name.startswith("BEANPOLE_"):
            monkeypatch.delenv(name)


def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), env=env, prog_name="beanpole")


def one_line_error(result: Result) -> str:
    """The single line a failed command printed (no traceback, no usage text)."""
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert "Traceback" not in result.output
    return lines[0]


# -- help, version and usage errors (no server needed) ------------------------------------


@pytest.mark.parametrize("option", ["-h", "--help"])
def test_group_help(option: str) -> None:
    result = invoke(option)
    assert result.exit_code == 0
    assert "Usage: beanpole" in result.output
    assert "serve" in result.output
    assert "--version" in result.output


@pytest.mark.parametrize("option", ["-h", "--help"])
def test_serve_help(option: str) -> None:
    result = invoke("serve", option)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())  # undo click's line wrapping
    for short, long in [
        ("-l", "--listen"),
        ("-p", "--port"),
        ("-z", "--max-job-size"),
        ("-u", "--user"),
        ("-V", "--verbose"),
        ("-v", "--version"),
        ("-c", "--config"),
        ("-b", "--binlog-dir"),
        ("-f", "--fsync-ms"),
        ("-F", "--no-fsync"),
        ("-s", "--segment-size"),
    ]:
        assert f"{short}, {long}" in text
    assert "--threads" in text
    assert "--skip-corrupt" in text
    # The loopback-only default, and how to listen everywhere.
    assert "default: 127.0.0.1 (loopback only)" in text
    assert "-l 0.0.0.0" in text
    # Defaults come from Config, and every setting names its variable.
    defaults = Config()
    assert f"default: {defaults.port};" in text
    assert f"default: {defaults.max_job_size};" in text
    assert f"default: {defaults.fsync_ms};" in text
    assert f"default: {defaults.segment_size};" in text
    for variable in [
        "BEANPOLE_LISTEN",
        "BEANPOLE_PORT",
        "BEANPOLE_MAX_JOB_SIZE",
        "BEANPOLE_USER",
        "BEANPOLE_VERBOSE",
        "BEANPOLE_THREADS",
        "BEANPOLE_BINLOG_DIR",
        "BEANPOLE_FSYNC_MS",
        "BEANPOLE_NO_FSYNC",
        "BEANPOLE_SEGMENT_SIZE",
        "BEANPOLE_SKIP_CORRUPT",
        "BEANPOLE_CONFIG",
    ]:
        assert variable in text


def test_no_arguments_shows_usage() -> None:
    result = invoke()
    assert "Usage: beanpole" in result.output
    assert "serve" in result.output


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["-b", "/var/lib/beanpole"], {"binlog_dir": "/var/lib/beanpole"}),
        (["--binlog-dir", "rel/dir"], {"binlog_dir": "rel/dir"}),
        (["-f", "0"], {"fsync_ms": 0, "no_fsync": False}),
        (["--fsync-ms", "200"], {"fsync_ms": 200}),
        (["-F"], {"no_fsync": True, "fsync_ms": 50}),
        (["--no-fsync"], {"no_fsync": True}),
        (["-s", "65536"], {"segment_size": 65536}),
        (["--segment-size", "1"], {"segment_size": 1}),
        (["--skip-corrupt"], {"skip_corrupt": True}),
        (["-b", "d", "-f", "10", "-s", "4096"], {"binlog_dir": "d", "fsync_ms": 10}),
    ],
)
def test_write_ahead_log_flags_are_accepted(
    monkeypatch: pytest.MonkeyPatch, args: list[str], expected: dict[str, object]
) -> None:
    # beanstalkd's -b -f -F -s, and --skip-corrupt: they reach the Config the server gets.
    seen: list[Config] = []

    def fake_serve_forever(self: beanpole.Server, **_: object) -> None:
        seen.append(self.config)

    monkeypatch.setattr(beanpole.Server, "serve_forever", fake_serve_forever)
    result = invoke("serve", *args)
    assert result.exit_code == 0, result.output
    (config,) = seen
    for name, value in expected.items():
        assert getattr(config, name) == value, name


def test_fsync_flag_beats_no_fsync_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Config] = []
    monkeypatch.setattr(
        beanpole.Server, "serve_forever", lambda self, **_: seen.append(self.config)
    )
    result = invoke("serve", "-f", "5", env={"BEANPOLE_NO_FSYNC": "1"})
    assert result.exit_code == 0, result.output
    assert (seen[0].fsync_ms, seen[0].no_fsync) == (5, False)
    result = invoke("serve", "-F", env={"BEANPOLE_FSYNC_MS": "5"})
    assert result.exit_code == 0, result.output
    assert seen[1].no_fsync is True


@pytest.mark.parametrize("args", [["-f", "0", "-F"], ["-F", "--fsync-ms", "10"]])
def test_fsync_and_no_fsync_together_is_a_usage_error(args: list[str]) -> None:
    result = invoke("serve", *args)
    assert result.exit_code == 2, result.output
    assert "-f/--fsync-ms and -F/--no-fsync cannot be used together" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["-p", "abc"], "'abc' is not a valid integer"),
        (["-p", "70000"], "must be between 0 and 65535"),
        (["-z", "-1"], "must be at least 0"),
        (["-l", "localhost"], "IPv4 address"),
        (["--threads", "-1"], "must be at least 0"),
        (["-f", "-1"], "must be at least 0"),
        (["-f", "1.5"], "'1.5' is not a valid integer"),
        (["-s", "0"], "must be at least 1"),
        (["-s", "10M"], "'10M' is not a valid integer"),
        (["-b"], "requires an argument"),
        (["-b", ""], "must be a directory path"),
        (["-p"], "requires an argument"),
        (["--bogus"], "No such option"),
    ],
)
def test_usage_errors_exit_2(args: list[str], fragment: str) -> None:
    result = invoke("serve", *args)
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert fragment in text
    assert "Traceback" not in result.output


def test_flag_error_names_the_flag() -> None:
    result = invoke("serve", "-p", "70000")
    assert "'-p' / '--port'" in result.output


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"BEANPOLE_PORT": "abc"}, "Error: invalid BEANPOLE_PORT: must be an integer, got 'abc'"),
        ({"BEANPOLE_MAX_JOB_SIZE": "-1"}, "Error: invalid BEANPOLE_MAX_JOB_SIZE: must be at least"),
        ({"BEANPOLE_LISTEN": "everywhere"}, "Error: invalid BEANPOLE_LISTEN: must be an IPv4"),
        ({"BEANPOLE_FSYNC_MS": "fast"}, "Error: invalid BEANPOLE_FSYNC_MS: must be an integer"),
        ({"BEANPOLE_NO_FSYNC": "maybe"}, "Error: invalid BEANPOLE_NO_FSYNC: must be true or"),
    ],
)
def test_bad_environment_exits_1_with_one_line(env: dict[str, str], fragment: str) -> None:
    result = invoke("serve", env=env)
    assert result.exit_code == 1
    assert one_line_error(result).startswith(fragment)


def test_bad_config_file_exits_1_with_one_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("prot = 11300\n")
    result = invoke("serve", "-c", str(path))
    assert result.exit_code == 1
    line = one_line_error(result)
    assert "unknown key 'prot'" in line
    assert str(path) in line


def test_bad_config_file_from_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("[beanpole]\nport = -3\n")
    result = invoke("serve", env={"BEANPOLE_CONFIG": str(path)})
    assert result.exit_code == 1
    assert one_line_error(result) == (
        f"Error: invalid port in {path}: must be between 0 and 65535 (0 picks a free port), got -3"
    )


def test_missing_config_file_exits_1(tmp_path: Path) -> None:
    result = invoke("serve", "--config", str(tmp_path / "missing.toml"))
    assert result.exit_code == 1
    assert "cannot read config file" in one_line_error(result)


def test_flag_beats_a_bad_environment_value() -> None:
    # BEANPOLE_PORT is wrong but -p overrides it; the error that remains is -z's.
    result = invoke("serve", "-p", "0", "-z", "-1", env={"BEANPOLE_PORT": "abc"})
    assert result.exit_code == 2
    assert "'-z' / '--max-job-size'" in result.output
    assert "BEANPOLE_PORT" not in result.output


@pytest.mark.parametrize(
    ("name", "variable"),
    [
        ("--commit-timeout-ms", "BEANPOLE_COMMIT_TIMEOUT_MS"),
        ("--session-grace-ms", "BEANPOLE_SESSION_GRACE_MS"),
    ],
)
def test_cluster_ms_flags_are_refused_without_cluster_and_checked(
    tmp_path: Path, name: str, variable: str
) -> None:
    help_text = " ".join(invoke("serve", "--help").output.split())
    assert f"{name} MS" in help_text
    assert variable in help_text
    # Without --cluster: a usage error from the flag, one line from elsewhere.
    result = invoke("serve", name, "300")
    assert result.exit_code == 2, result.output
    assert "applies to cluster nodes only (needs --cluster)" in result.output
    result = invoke("serve", env={variable: "300"})
    assert result.exit_code == 1
    assert "applies to cluster nodes only" in one_line_error(result)
    # Bad values: a usage error from the flag, one line and status 1 from the
    # environment or the file.
    for bad, fragment in [("0", "must be at least 1"), ("soon", "is not a valid integer")]:
        result = invoke("serve", name, bad)
        assert result.exit_code == 2, result.output
        assert fragment in " ".join(result.output.split())
        assert "Traceback" not in result.output
    node = {"BEANPOLE_CLUSTER": "c.toml", "BEANPOLE_NODE": "1", "BEANPOLE_BINLOG_DIR": "/d"}
    result = invoke("serve", env={**node, variable: "0"})
    assert result.exit_code == 1
    assert one_line_error(result).startswith(f"Error: invalid {variable}: must be at least 1")
    setting = name[2:].replace("-", "_")
    path = tmp_path / "node.toml"
    path.write_text(f"cluster = 'c.toml'\nnode = 1\nbinlog_dir = '/d'\n{setting} = -5\n")
    result = invoke("serve", "-c", str(path))
    assert result.exit_code == 1
    assert one_line_error(result).startswith(f"Error: invalid {setting} in {path}: must be at")


@pytest.mark.parametrize(
    ("flag", "env"),
    [
        ("--log-cache-bytes", "BEANPOLE_LOG_CACHE_BYTES"),
        ("--snapshot-bytes", "BEANPOLE_SNAPSHOT_BYTES"),
    ],
)
def test_cluster_byte_settings_are_refused_without_cluster_and_checked(flag: str, env: str) -> None:
    help_text = " ".join(invoke("serve", "--help").output.split())
    assert f"{flag} BYTES" in help_text
    assert env in help_text
    result = invoke("serve", flag, "1024")
    assert result.exit_code == 2, result.output
    assert "applies to cluster nodes only (needs --cluster)" in result.output
    result = invoke("serve", flag, "-1")
    assert result.exit_code == 2, result.output
    assert "must be at least 0" in " ".join(result.output.split())
    assert "Traceback" not in result.output
    result = invoke("serve", env={env: "lots"})
    assert result.exit_code == 1
    assert one_line_error(result).startswith(f"Error: invalid {env}")


def test_unknown_user_exits_1_before_binding() -> None:
    result = invoke("serve", "-p", "0", "-u", "no-such-user-beanpole")
    assert result.exit_code == 1
    assert one_line_error(result) == (
        "Error: cannot become user 'no-such-user-beanpole': no such user"
    )


@needs_core
@pytest.mark.parametrize("args", [["--version"], ["serve", "--version"], ["serve", "-v"]])
def test_version(args: list[str]) -> None:
    result = invoke(*args)
    assert result.exit_code == 0
    assert result.output == f"beanpole {beanpole.__version__}\n"


@needs_core
def test_version_wins_over_other_flags() -> None:
    # Like beanstalkd -v: print the version and exit without serving.
    result = invoke("serve", "-p", "0", "-v")
    assert result.exit_code == 0
    assert result.output == f"beanpole {beanpole.__version__}\n"


# -- real server processes -----------------------------------------------------------------


class Serving:
    """A ``python -m beanpole serve`` child process and its stderr, line by line."""

    def __init__(
        self, *args: str, env: dict[str, str] | None = None, prefix: Sequence[str] = ()
    ) -> None:
        package_root = str(Path(beanpole.__file__).resolve().parent.parent)
        child_env = {k: v for k, v in os.environ.items() if not k.startswith("BEANPOLE_")}
        child_env["PYTHONPATH"] = os.pathsep.join(
            p for p in [package_root, child_env.get("PYTHONPATH", "")] if p
        )
        child_env.update(env or {})
        self.proc = subprocess.Popen(
            [*prefix, sys.executable, "-m", "beanpole", "serve", *args],
            env=child_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.stderr: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def expect_line(self, pattern: str | re.Pattern[str]) -> re.Match[str]:
        """Wait (at most TIMEOUT) for the next stderr line, which must match ``pattern``."""
        try:
            line = self.lines.get(timeout=TIMEOUT)
        except queue.Empty:
            pytest.fail(f"no line on stderr within {TIMEOUT}s; so far: {self.stderr!r}")
        assert line is not None, f"stderr closed early; it said: {''.join(self.stderr)!r}"
        match = re.search(pattern, line)
        assert match, f"unexpected stderr line {line!r}"
        return match

    def listening(self) -> tuple[str, int]:
        """Wait for the 'listening on' line; the address it announces."""
        match = self.expect_line(LISTENING)
        assert match.group(1) == beanpole.__version__
        return match.group(2), int(match.group(3))

    def finish(self) -> int:
        """Wait for the process to exit; its exit status (stderr fully read)."""
        status = self.proc.wait(timeout=TIMEOUT)
        self._reader.join(timeout=TIMEOUT)
        return status

    def signal(self, sig: signal.Signals) -> None:
        self.proc.send_signal(sig)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def serving() -> Iterator[type[Serving]]:
    started: list[Serving] = []

    class Tracked(Serving):
        def __init__(
            self, *args: str, env: dict[str, str] | None = None, prefix: Sequence[str] = ()
        ) -> None:
            super().__init__(*args, env=env, prefix=prefix)
            started.append(self)

    yield Tracked
    for child in started:
        child.kill()


def request(address: tuple[str, int], data: bytes) -> bytes:
    """Send ``data`` on a fresh connection; return one reply (with its body, if any)."""
    with socket.create_connection(address, timeout=TIMEOUT) as conn:
        conn.sendall(data)
        return read_reply(conn)


def read_reply(conn: socket.socket) -> bytes:
    buf = b""
    while b"\r\n" not in buf:
        chunk = conn.recv(4096)
        assert chunk, f"connection closed; got {buf!r}"
        buf += chunk
    head = buf.split(b"\r\n", 1)[0]
    if head.startswith(b"OK "):
        total = len(head) + 2 + int(head.split()[1]) + 2
        while len(buf) < total:
            chunk = conn.recv(4096)
            assert chunk, f"connection closed; got {buf!r}"
            buf += chunk
    return buf


def stat(address: tuple[str, int], key: str) -> str:
    reply = request(address, b"stats\r\n").decode()
    match = re.search(rf"^{re.escape(key)}: (.*)\r?$", reply, re.MULTILINE)
    assert match, reply
    return match.group(1).strip()


@needs_core
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serve_answers_and_stops_cleanly(serving: type[Serving], sig: signal.Signals) -> None:
    child = serving("-p", "0")
    host, port = child.listening()
    assert host == "127.0.0.1"
    assert port > 0
    reply = request((host, port), b"stats\r\n")
    assert re.match(rb"OK \d+\r\n---\n", reply), reply
    child.signal(sig)
    assert child.finish() == 0
    assert "Traceback" not in "".join(child.stderr)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((host, port), timeout=TIMEOUT)


@needs_core
def test_sigusr1_drains(serving: type[Serving]) -> None:
    child = serving("-p", "0")
    address = child.listening()
    assert request(address, b"put 0 0 60 2\r\nhi\r\n") == b"INSERTED 1\r\n"
    child.signal(signal.SIGUSR1)
    child.expect_line(r"SIGUSR1: draining")
    assert request(address, b"put 0 0 60 2\r\nhi\r\n") == b"DRAINING\r\n"
    assert stat(address, "draining") == "true"
    # Draining keeps serving the jobs already queued.
    assert request(address, b"reserve-with-timeout 0\r\n") == b"RESERVED 1 2\r\nhi\r\n"
    child.signal(signal.SIGTERM)
    assert child.finish() == 0


@needs_core
def test_port_in_use_exits_1_with_one_line(serving: type[Serving]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        child = serving("-p", str(port))
        status = child.finish()
    assert status == 1
    stderr = "".join(child.stderr)
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("Error: ")
    assert f"127.0.0.1:{port}" in lines[0]
    assert "in use" in lines[0].lower()


@needs_core
def test_environment_is_honoured(serving: type[Serving]) -> None:
    child = serving("-p", "0", env={"BEANPOLE_MAX_JOB_SIZE": "1234"})
    address = child.listening()
    assert stat(address, "max-job-size") == "1234"
    child.signal(signal.SIGTERM)
    assert child.finish() == 0


@needs_core
def test_port_from_the_environment(serving: type[Serving]) -> None:
    child = serving(env={"BEANPOLE_PORT": "0", "BEANPOLE_LISTEN": "127.0.0.1"})
    _, port = child.listening()
    assert port not in (0, 11300)
    child.signal(signal.SIGTERM)
    assert child.finish() == 0


@needs_core
def test_flag_beats_environment_beats_file(serving: type[Serving], tmp_path: Path) -> None:
    config = tmp_path / "beanpole.toml"
    config.write_text("[beanpole]\nmax_job_size = 4321\nport = 0\n")
    child = serving("-c", str(config), env={"BEANPOLE_MAX_JOB_SIZE": "1234"})
    address = child.listening()
    assert stat(address, "max-job-size") == "1234"
    child.signal(signal.SIGTERM)
    assert child.finish() == 0

    child = serving("-c", str(config), "-z", "999", env={"BEANPOLE_MAX_JOB_SIZE": "1234"})
    address = child.listening()
    assert stat(address, "max-job-size") == "999"
    child.signal(signal.SIGTERM)
    assert child.finish() == 0

    child = serving("-c", str(config))
    address = child.listening()
    assert stat(address, "max-job-size") == "4321"
    child.signal(signal.SIGTERM)
    assert child.finish() == 0


@needs_core
def test_oversized_job_size_is_capped_with_a_warning(serving: type[Serving]) -> None:
    child = serving("-p", "0", "-z", str(1 << 31))
    child.expect_line(r"^beanpole: warning: .*maximum job size was set to 1073741824$")
    address = child.listening()
    assert stat(address, "max-job-size") == "1073741824"
    child.signal(signal.SIGTERM)
    assert child.finish() == 0


def _uid_of(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"^Uid:\s+(\d+)\s+(\d+)", status, re.MULTILINE)
    assert match, status
    return int(match.group(2))  # effective uid


@needs_core
@pytest.mark.skipif(os.geteuid() != 0, reason="switching user needs root")
def test_user_switch_as_root(serving: type[Serving]) -> None:
    nobody = pwd.getpwnam("nobody")
    child = serving("-p", "0", "-u", "nobody")
    address = child.listening()
    assert _uid_of(child.proc.pid) == nobody.pw_uid
    assert request(address, b"stats\r\n").startswith(b"OK ")
    child.signal(signal.SIGTERM)
    assert child.finish() == 0


@needs_core
def test_user_switch_failure_exits_1(serving: type[Serving]) -> None:
    if os.geteuid() != 0:
        prefix: list[str] = []
        target = next(p.pw_name for p in pwd.getpwall() if p.pw_uid != os.geteuid())
    elif shutil.which("setpriv"):
        # Still root, but without the capabilities needed to change uid and gid.
        prefix = ["setpriv", "--bounding-set=-setuid,-setgid", "--"]
        target = "nobody"
    else:
        pytest.skip("running as root and setpriv is not installed")
    child = serving("-p", "0", "-u", target, prefix=prefix)
    assert child.finish() == 1
    lines = "".join(child.stderr).splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"Error: cannot become user {target!r}: Operation not permitted")


@needs_core
def test_version_from_a_real_process() -> None:
    package_root = str(Path(beanpole.__file__).resolve().parent.parent)
    env = dict(os.environ, PYTHONPATH=package_root)
    out = subprocess.run(
        [sys.executable, "-m", "beanpole", "--version"],
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=True,
    )
    assert out.stdout == f"beanpole {beanpole.__version__}\n"


@needs_core
def test_binlog_dir_keeps_jobs_across_a_restart(serving: type[Serving], tmp_path: Path) -> None:
    log = tmp_path / "log"
    child = serving("-p", "0", "-b", str(log), "-f", "0")
    address = child.listening()
    assert request(address, b"put 5 0 60 3\r\nabc\r\n") == b"INSERTED 1\r\n"
    child.signal(signal.SIGTERM)
    assert child.finish() == 0

    child = serving("-p", "0", "--binlog-dir", str(log), "-F")
    address = child.listening()
    assert request(address, b"peek 1\r\n") == b"FOUND 1 3\r\nabc\r\n"
    assert request(address, b"put 0 0 60 1\r\nx\r\n") == b"INSERTED 2\r\n"
    child.signal(signal.SIGTERM)
    assert child.finish() == 0


@needs_core
def test_binlog_dir_held_by_another_server_exits_1(serving: type[Serving], tmp_path: Path) -> None:
    first = serving("-p", "0", "-b", str(tmp_path))
    first.listening()
    second = serving("-p", "0", "-b", str(tmp_path))
    assert second.finish() == 1
    lines = "".join(second.stderr).splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("Error: ")
    assert "lock" in lines[0]
    assert "cannot listen" not in lines[0]
    first.signal(signal.SIGTERM)
    assert first.finish() == 0


@needs_core
def test_beanstalkd_binlog_dir_exits_1_pointing_at_import(
    serving: type[Serving], tmp_path: Path
) -> None:
    (tmp_path / "binlog.1").write_bytes(b"\x07\x00\x00\x00")
    child = serving("-p", "0", "-b", str(tmp_path))
    assert child.finish() == 1
    lines = "".join(child.stderr).splitlines()
    assert len(lines) == 1, lines
    assert "beanpole binlog import" in lines[0]
    assert [p.name for p in tmp_path.iterdir()] == ["binlog.1"]  # nothing written

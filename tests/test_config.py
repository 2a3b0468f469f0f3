"""beanpole.Config: defaults, validation, environment, TOML and precedence."""

from __future__ import annotations

import dataclasses
import os
import typing
import warnings
from pathlib import Path

import pytest

from beanpole.config import (
    MAX_JOB_SIZE_LIMIT,
    Config,
    ConfigChanges,
    ConfigError,
    ConfigWarning,
    env_var,
    flag,
    help_text,
)

FIELDS = [f.name for f in dataclasses.fields(Config)]


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No BEANPOLE_* variable of the outer environment leaks into these tests."""
    for name in list(os.environ):
        if name.startswith("BEANPOLE_"):
            monkeypatch.delenv(name)


def write(tmp_path: Path, text: str, name: str = "beanpole.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# -- defaults and the dataclass itself ---------------------------------------------------


def test_defaults() -> None:
    config = Config()
    assert config.listen == ("127.0.0.1",)  # loopback only; beanstalkd's 0.0.0.0 is deliberate
    assert config.port == 11300
    assert config.unix_mode is None  # the umask decides
    assert config.max_job_size == 65535
    assert config.user is None
    assert config.verbose == 0
    assert config.threads == 0
    # No write-ahead log unless asked; beanstalkd's -f and -s defaults when there is one.
    assert config.binlog_dir is None
    assert config.fsync_ms == 50
    assert config.no_fsync is False
    assert config.segment_size == 10485760
    assert config.skip_corrupt is False
    assert config.hooks == ()
    assert config.hook_queue == 65536
    assert config.log_format == "text"
    assert config.admin_token_file is None  # the dashboard's actions are off
    assert config.http_read_token_file is None  # and job bodies are hidden
    assert config.http_allowed_host == ()  # localhost and the addresses served only
    assert config.http_max_connections == 64
    assert config.cluster is None  # a single server
    assert config.node is None


def test_fields_are_exactly_the_documented_settings() -> None:
    assert FIELDS == [
        "listen",
        "port",
        "unix_mode",
        "max_job_size",
        "user",
        "verbose",
        "threads",
        "binlog_dir",
        "fsync_ms",
        "no_fsync",
        "segment_size",
        "skip_corrupt",
        "hooks",
        "hook_queue",
        "log_format",
        "http",
        "metrics_max_tubes",
        "admin_token_file",
        "http_read_token_file",
        "http_allowed_host",
        "http_max_connections",
        "tls_cert",
        "tls_key",
        "tls_client_ca",
        "max_connections",
        "max_memory",
        "cluster",
        "node",
        "commit_timeout_ms",
        "session_grace_ms",
        "log_cache_bytes",
        "snapshot_bytes",
    ]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("binlog_dir", "-b/--binlog-dir"),
        ("fsync_ms", "-f/--fsync-ms"),
        ("no_fsync", "-F/--no-fsync"),
        ("segment_size", "-s/--segment-size"),
        ("skip_corrupt", "--skip-corrupt"),
        ("unix_mode", "--unix-mode"),
        ("max_connections", "--max-connections"),
        ("max_memory", "--max-memory"),
    ],
)
def test_log_settings_use_beanstalkds_flags(name: str, expected: str) -> None:
    assert flag(name) == expected


def test_config_changes_typeddict_matches_the_fields() -> None:
    assert set(typing.get_type_hints(ConfigChanges)) == set(FIELDS)


def test_frozen() -> None:
    config = Config()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.port = 1  # type: ignore[misc]


def test_equality_and_hash() -> None:
    assert Config(port=5) == Config(port=5)
    assert hash(Config(port=5)) == hash(Config(port=5))
    assert Config(port=5) != Config(port=6)


def test_replace_returns_a_new_validated_config() -> None:
    base = Config()
    changed = base.replace(port=0, max_job_size=10)
    assert (changed.port, changed.max_job_size) == (0, 10)
    assert base.port == 11300
    with pytest.raises(ConfigError, match="port"):
        base.replace(port=-1)


def test_replace_unknown_setting_suggests_the_right_one() -> None:
    with pytest.raises(TypeError, match=r"unknown setting 'prot' \(did you mean 'port'\?\)"):
        Config().replace(prot=1)  # type: ignore[call-arg]


def test_metadata_helpers() -> None:
    assert env_var("max_job_size") == "BEANPOLE_MAX_JOB_SIZE"
    assert flag("max_job_size") == "-z/--max-job-size"
    assert flag("port") == "-p/--port"
    assert "0 picks a free port" in help_text("port")
    for name in FIELDS:
        assert help_text(name)
        assert flag(name).split("/")[-1].startswith("--")


# -- validation ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "listen",
    [
        "0.0.0.0",
        "127.0.0.1",
        "10.1.2.3",
        "::",
        "::1",
        "fd00::2",
        "[::1]",
        "127.0.0.1:11301",
        "0.0.0.0:0",
        "[::1]:11301",
        "[::]:65535",
        "unix:/tmp/bp.sock",
    ],
)
def test_valid_listen_addresses(listen: str) -> None:
    # One string is one address.
    assert Config(listen=listen).listen == (listen,)


def test_listen_takes_several_addresses_as_a_tuple() -> None:
    addresses = ["127.0.0.1", "[::1]:11301", "unix:/tmp/bp.sock"]
    config = Config(listen=addresses)
    assert config.listen == tuple(addresses)
    assert config == Config(listen=tuple(addresses))
    assert config.replace(listen="::1").listen == ("::1",)


@pytest.mark.parametrize(
    ("listen", "fragment"),
    [
        ((), "needs at least one address"),
        (["127.0.0.1", "localhost"], "got 'localhost'"),
        (["127.0.0.1", 5], "must be a string"),
        ({"127.0.0.1"}, "list of addresses"),
        ("127.0.0.1:", "got '127.0.0.1:'"),
        ("127.0.0.1:65536", "got '127.0.0.1:65536'"),
        ("127.0.0.1:+1", "got '127.0.0.1:+1'"),
        ("[::1]:", "got '[::1]:'"),
        ("[::1]80", "got '[::1]80'"),
        ("[::1", "got '[::1'"),
        ("[127.0.0.1]:80", "got '[127.0.0.1]:80'"),
        ("::1:99999", "port only in brackets"),
        ("fe80::1%eth0", "got 'fe80::1%eth0'"),
    ],
)
def test_bad_listen_lists_and_ports(listen: object, fragment: str) -> None:
    with pytest.raises(ConfigError, match="invalid listen") as info:
        Config(listen=listen)  # type: ignore[arg-type]
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    ("mode", "expected"),
    [(0o660, 0o660), ("0660", 0o660), ("600", 0o600), ("0o755", 0o755), (0, 0), (None, None)],
)
def test_unix_mode_is_octal(mode: object, expected: int | None) -> None:
    assert Config(unix_mode=mode).unix_mode == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("mode", "fragment"),
    [
        ("0998", "octal mode"),
        ("", "octal mode"),
        (0o1777, "between 0 and 0777"),
        (-1, "between"),
        (True, "octal mode"),
        (6.5, "octal mode"),
    ],
)
def test_bad_unix_mode(mode: object, fragment: str) -> None:
    with pytest.raises(ConfigError, match="invalid unix_mode") as info:
        Config(unix_mode=mode)  # type: ignore[arg-type]
    assert fragment in str(info.value)


def test_listen_and_unix_mode_from_env_and_toml(tmp_path: Path) -> None:
    environ = {
        "BEANPOLE_LISTEN": "127.0.0.1:1, [::1]:2,unix:/tmp/a.sock",
        "BEANPOLE_UNIX_MODE": "0640",
    }
    config = Config.from_env(environ)
    assert config.listen == ("127.0.0.1:1", "[::1]:2", "unix:/tmp/a.sock")
    assert config.unix_mode == 0o640
    with pytest.raises(ConfigError, match="BEANPOLE_UNIX_MODE"):
        Config.from_env({"BEANPOLE_UNIX_MODE": "rw-rw----"})
    path = write(tmp_path, 'listen = ["127.0.0.1", "unix:/tmp/b.sock"]\nunix_mode = "0600"\n')
    config = Config.from_toml(path)
    assert config.listen == ("127.0.0.1", "unix:/tmp/b.sock")
    assert config.unix_mode == 0o600
    text = 'listen = "::1"\nunix_mode = 0o660\n'
    assert Config.from_toml(write(tmp_path, text)) == Config(listen="::1", unix_mode=0o660)


@pytest.mark.parametrize(
    ("changes", "field", "fragment"),
    [
        ({"listen": "localhost"}, "listen", "IPv4 address"),
        ({"listen": ""}, "listen", "IPv4 address"),
        ({"listen": "1.2.3.4.5"}, "listen", "IPv4 address"),
        ({"listen": "unix:"}, "listen", "needs a socket path"),
        ({"listen": "unix:/" + "x" * 200}, "listen", "longer than 107 bytes"),
        ({"listen": 127}, "listen", "must be an address or a list of addresses"),
        ({"port": -1}, "port", "between 0 and 65535"),
        ({"port": 65536}, "port", "between 0 and 65535"),
        ({"port": "11300"}, "port", "must be an integer"),
        ({"port": True}, "port", "must be an integer"),
        ({"port": 1.5}, "port", "must be an integer"),
        ({"max_job_size": -1}, "max_job_size", "at least 0"),
        ({"max_job_size": -5}, "max_job_size", "at least 0"),
        ({"user": ""}, "user", "user name"),
        ({"user": 0}, "user", "user name"),
        ({"verbose": -1}, "verbose", "at least 0"),
        ({"threads": -1}, "threads", "at least 0"),
        ({"binlog_dir": ""}, "binlog_dir", "must be a directory path"),
        ({"binlog_dir": 3}, "binlog_dir", "must be a directory path or None"),
        ({"binlog_dir": "/tmp/a\0b"}, "binlog_dir", "NUL byte"),
        ({"fsync_ms": -1}, "fsync_ms", "at least 0"),
        ({"fsync_ms": "50"}, "fsync_ms", "must be an integer"),
        ({"fsync_ms": 1 << 63}, "fsync_ms", "at most 9223372036854775807"),
        ({"no_fsync": 1}, "no_fsync", "must be true or false"),
        ({"no_fsync": "yes"}, "no_fsync", "must be true or false"),
        ({"segment_size": 0}, "segment_size", "at least 1"),
        ({"segment_size": -4096}, "segment_size", "at least 1"),
        ({"segment_size": 1.5}, "segment_size", "must be an integer"),
        ({"skip_corrupt": None}, "skip_corrupt", "must be true or false"),
    ],
)
def test_invalid_values(changes: dict[str, object], field: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        Config(**changes)  # type: ignore[arg-type]
    err = info.value
    assert isinstance(err, ValueError)
    assert err.field == field
    message = str(err)
    assert fragment in message
    # The message names the field, its flag and its environment variable.
    assert message.startswith(f"invalid {field} ")
    assert flag(field) in message
    assert env_var(field) in message
    assert "\n" not in message


def test_port_zero_and_extremes_are_valid() -> None:
    assert Config(port=0).port == 0
    assert Config(port=65535).port == 65535
    assert Config(max_job_size=1).max_job_size == 1


def test_log_settings_extremes_are_valid() -> None:
    config = Config(binlog_dir="relative/dir", fsync_ms=0, no_fsync=True, segment_size=1)
    assert (config.binlog_dir, config.fsync_ms, config.no_fsync) == ("relative/dir", 0, True)
    assert config.segment_size == 1  # the server rounds it up to what a job needs
    assert Config(skip_corrupt=True).skip_corrupt is True


def test_binlog_dir_accepts_a_path_and_keeps_a_string(tmp_path: Path) -> None:
    config = Config(binlog_dir=tmp_path)  # type: ignore[arg-type]
    assert config.binlog_dir == str(tmp_path)
    assert isinstance(config.binlog_dir, str)
    assert config == Config(binlog_dir=str(tmp_path))


def test_max_job_size_at_the_limit_is_kept_without_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert Config(max_job_size=MAX_JOB_SIZE_LIMIT).max_job_size == 1073741824


def test_max_job_size_above_one_gib_is_capped_with_a_warning() -> None:
    with pytest.warns(ConfigWarning, match="maximum job size was set to 1073741824") as record:
        config = Config(max_job_size=MAX_JOB_SIZE_LIMIT + 1)
    assert config.max_job_size == MAX_JOB_SIZE_LIMIT
    # The warning points at the code that built the Config, not at beanpole's internals.
    assert record[0].filename == __file__


def test_replace_with_an_oversized_job_size_caps_too() -> None:
    with pytest.warns(ConfigWarning):
        assert Config().replace(max_job_size=1 << 40).max_job_size == MAX_JOB_SIZE_LIMIT


# -- environment ---------------------------------------------------------------------------


def test_from_env_reads_every_variable() -> None:
    environ = {
        "BEANPOLE_LISTEN": "::1",
        "BEANPOLE_PORT": "0",
        "BEANPOLE_MAX_JOB_SIZE": "1234",
        "BEANPOLE_USER": "nobody",
        "BEANPOLE_VERBOSE": "2",
        "BEANPOLE_THREADS": " 4 ",
        "BEANPOLE_BINLOG_DIR": "/var/lib/beanpole",
        "BEANPOLE_FSYNC_MS": "0",
        "BEANPOLE_NO_FSYNC": "true",
        "BEANPOLE_SEGMENT_SIZE": "65536",
        "BEANPOLE_SKIP_CORRUPT": "1",
        "UNRELATED": "x",
    }
    assert Config.from_env(environ) == Config(
        listen="::1",
        port=0,
        max_job_size=1234,
        user="nobody",
        verbose=2,
        threads=4,
        binlog_dir="/var/lib/beanpole",
        fsync_ms=0,
        no_fsync=True,
        segment_size=65536,
        skip_corrupt=True,
    )


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("1", True),
        ("true", True),
        ("True", True),
        (" yes ", True),
        ("on", True),
        ("0", False),
        ("false", False),
        ("NO", False),
        ("off", False),
    ],
)
def test_from_env_boolean_spellings(raw: str, value: bool) -> None:
    config = Config.from_env({"BEANPOLE_NO_FSYNC": raw, "BEANPOLE_SKIP_CORRUPT": raw})
    assert config.no_fsync is value
    assert config.skip_corrupt is value


def test_from_env_with_nothing_set_gives_the_defaults() -> None:
    assert Config.from_env({}) == Config()


def test_from_env_treats_empty_variables_as_unset() -> None:
    assert Config.from_env({"BEANPOLE_PORT": "", "BEANPOLE_USER": ""}) == Config()


def test_from_env_defaults_to_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BEANPOLE_PORT", "4242")
    assert Config.from_env().port == 4242


@pytest.mark.parametrize(
    ("variable", "value", "fragment"),
    [
        ("BEANPOLE_PORT", "abc", "must be an integer, got 'abc'"),
        ("BEANPOLE_PORT", "11300.0", "must be an integer"),
        ("BEANPOLE_PORT", "70000", "between 0 and 65535"),
        ("BEANPOLE_MAX_JOB_SIZE", "-1", "at least 0"),
        ("BEANPOLE_MAX_JOB_SIZE", "64k", "must be an integer"),
        ("BEANPOLE_VERBOSE", "yes", "must be an integer"),
        ("BEANPOLE_THREADS", "-2", "at least 0"),
        ("BEANPOLE_LISTEN", "localhost", "IPv4 address"),
        ("BEANPOLE_FSYNC_MS", "50ms", "must be an integer, got '50ms'"),
        ("BEANPOLE_FSYNC_MS", "-1", "at least 0"),
        ("BEANPOLE_SEGMENT_SIZE", "10M", "must be an integer"),
        ("BEANPOLE_SEGMENT_SIZE", "0", "at least 1"),
        ("BEANPOLE_NO_FSYNC", "maybe", "must be true or false (1/0, yes/no, on/off), got 'maybe'"),
        ("BEANPOLE_SKIP_CORRUPT", "2", "must be true or false"),
    ],
)
def test_from_env_errors_name_the_variable(variable: str, value: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        Config.from_env({variable: value})
    message = str(info.value)
    assert message.startswith(f"invalid {variable}: ")
    assert fragment in message
    assert info.value.source == variable


def test_from_env_oversized_job_size_is_capped() -> None:
    with pytest.warns(ConfigWarning):
        config = Config.from_env({"BEANPOLE_MAX_JOB_SIZE": str(1 << 31)})
    assert config.max_job_size == MAX_JOB_SIZE_LIMIT


# -- TOML ----------------------------------------------------------------------------------


def test_from_toml_with_a_beanpole_table(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '[beanpole]\nlisten = "0.0.0.0"\nport = 11301\nmax_job_size = 100\n'
        'user = "nobody"\nverbose = 1\nthreads = 2\nbinlog_dir = "/srv/log"\nfsync_ms = 0\n'
        "no_fsync = false\nsegment_size = 1048576\nskip_corrupt = true\n",
    )
    assert Config.from_toml(path) == Config(
        listen="0.0.0.0",
        port=11301,
        max_job_size=100,
        user="nobody",
        verbose=1,
        threads=2,
        binlog_dir="/srv/log",
        fsync_ms=0,
        segment_size=1048576,
        skip_corrupt=True,
    )


def test_from_toml_with_top_level_keys(tmp_path: Path) -> None:
    path = write(tmp_path, "port = 0\nmax_job_size = 7\n")
    assert Config.from_toml(str(path)) == Config(port=0, max_job_size=7)


def test_from_toml_ignores_other_tables_next_to_beanpole(tmp_path: Path) -> None:
    path = write(tmp_path, "[beanpole]\nport = 1\n\n[other-tool]\nanything = true\n")
    assert Config.from_toml(path).port == 1


def test_from_toml_empty_file_gives_the_defaults(tmp_path: Path) -> None:
    assert Config.from_toml(write(tmp_path, "")) == Config()


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("prot = 1\n", "unknown key 'prot' at the top level (did you mean 'port'?)"),
        ("[beanpole]\nmax-job-size = 1\n", "unknown key 'max-job-size' in the [beanpole] table"),
        ("[beanpole]\nbinlog-dir = '/x'\n", "unknown key 'binlog-dir'"),
        ("binlog = '/x'\n", "unknown key 'binlog' at the top level (did you mean 'binlog_dir'?)"),
        ("port = 1\n[beanpole]\nlisten = '::1'\n", "port must go inside the [beanpole] table"),
        ("beanpole = 3\n", "'beanpole' must be a table"),
        ("port = \n", "not valid TOML"),
    ],
)
def test_from_toml_structure_errors(tmp_path: Path, text: str, fragment: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        Config.from_toml(path)
    message = str(info.value)
    assert fragment in message
    assert str(path) in message


def test_from_toml_unknown_key_lists_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="known keys: listen, port, unix_mode, max_job_size"):
        Config.from_toml(write(tmp_path, "colour = 'blue'\n"))


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("port = '11300'\n", "must be an integer, got '11300'"),
        ("port = true\n", "must be an integer, got True"),
        ("max_job_size = -1\n", "at least 0"),
        ("listen = 'localhost'\n", "IPv4 address"),
        ("no_fsync = 'yes'\n", "must be true or false, got 'yes'"),
        ("segment_size = 0\n", "at least 1"),
        ("binlog_dir = ''\n", "must be a directory path"),
    ],
)
def test_from_toml_value_errors_name_key_and_file(tmp_path: Path, text: str, fragment: str) -> None:
    path = write(tmp_path, text)
    key = text.split(" ")[0]
    with pytest.raises(ConfigError) as info:
        Config.from_toml(path)
    message = str(info.value)
    assert message.startswith(f"invalid {key} in {path}: ")
    assert fragment in message


def test_from_toml_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.toml"
    with pytest.raises(ConfigError, match="cannot read config file: No such file or directory"):
        Config.from_toml(path)


# -- cluster-only settings ------------------------------------------------------------------

#: A node's settings without the ones a test sets.
NODE = {"cluster": "cluster.toml", "node": 2, "binlog_dir": "/var/lib/beanpole"}
CLUSTER_MS = ["commit_timeout_ms", "session_grace_ms"]


@pytest.mark.parametrize("name", CLUSTER_MS)
def test_cluster_ms_settings_come_from_flags_environment_and_toml(
    tmp_path: Path, name: str
) -> None:
    assert getattr(Config(), name) == 5000
    assert flag(name) == "--" + name.replace("_", "-")
    variable = env_var(name)
    assert variable == "BEANPOLE_" + name.upper()
    path = write(
        tmp_path,
        f"[beanpole]\ncluster = 'cluster.toml'\nnode = 2\nbinlog_dir = '/d'\n{name} = 300\n",
    )
    assert getattr(Config.from_toml(path), name) == 300
    environ = {"BEANPOLE_CLUSTER": "c.toml", "BEANPOLE_NODE": "1", "BEANPOLE_BINLOG_DIR": "/d"}
    assert getattr(Config.from_env({**environ, variable: "7"}), name) == 7
    # A flag beats the environment, which beats the file.
    config = Config.load(config_file=path, environ={variable: "400"}, flags={name: 1})
    assert getattr(config, name) == 1
    assert getattr(Config.load(config_file=path, environ={variable: "400"}), name) == 400
    assert getattr(Config(**NODE, **{name: 1}), name) == 1  # type: ignore[arg-type]
    top = 9223372036854775807
    assert getattr(Config(**NODE, **{name: top}), name) == top  # type: ignore[arg-type]


@pytest.mark.parametrize("name", CLUSTER_MS)
def test_cluster_ms_settings_are_refused_without_cluster(tmp_path: Path, name: str) -> None:
    with pytest.raises(ConfigError) as info:
        Config(**{name: 300})  # type: ignore[arg-type]
    assert info.value.field == name
    assert "applies to cluster nodes only (needs --cluster)" in str(info.value)
    path = write(tmp_path, f"{name} = 300\n")
    with pytest.raises(ConfigError, match="needs --cluster"):
        Config.from_toml(path)
    with pytest.raises(ConfigError, match="needs --cluster"):
        Config.from_env({env_var(name): "300"})
    # The default is no change: a single server may state it.
    assert getattr(Config(**{name: 5000}), name) == 5000  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "default", "env"),
    [
        ("log_cache_bytes", 16 << 20, "BEANPOLE_LOG_CACHE_BYTES"),
        ("snapshot_bytes", 64 << 20, "BEANPOLE_SNAPSHOT_BYTES"),
    ],
)
def test_cluster_byte_settings_come_from_flags_environment_and_toml(
    tmp_path: Path, name: str, default: int, env: str
) -> None:
    assert getattr(Config(), name) == default
    assert flag(name) == "--" + name.replace("_", "-")
    assert env_var(name) == env
    path = write(
        tmp_path,
        f"[beanpole]\ncluster = 'c.toml'\nnode = 2\nbinlog_dir = '/d'\n{name} = 0\n",
    )
    assert getattr(Config.from_toml(path), name) == 0
    environ = {"BEANPOLE_CLUSTER": "c.toml", "BEANPOLE_NODE": "1", "BEANPOLE_BINLOG_DIR": "/d"}
    config = Config.from_env({**environ, env: "65536"})
    assert getattr(config, name) == 65536
    config = Config.load(config_file=path, environ={env: "7"}, flags={name: 9})
    assert getattr(config, name) == 9
    # A single server refuses another value than the default, and states it freely.
    with pytest.raises(ConfigError, match="applies to cluster nodes only") as info:
        Config(**{name: 1024})  # type: ignore[arg-type]
    assert info.value.field == name
    assert getattr(Config(**{name: default}), name) == default  # type: ignore[arg-type]
    for bad, fragment in [
        (-1, "at least 0"),
        (1 << 63, "at most 9223372036854775807"),
        ("1", "must be an integer"),
        (True, "must be an integer"),
    ]:
        with pytest.raises(ConfigError, match=fragment):
            Config(**NODE, **{name: bad})  # type: ignore[arg-type]


@pytest.mark.parametrize("name", CLUSTER_MS)
@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (0, "at least 1"),
        (-300, "at least 1"),
        (1 << 63, "at most 9223372036854775807"),
        ("300", "must be an integer"),
        (True, "must be an integer"),
        (1.5, "must be an integer"),
    ],
)
def test_bad_cluster_ms_values(name: str, value: object, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        Config(**NODE, **{name: value})  # type: ignore[arg-type]
    assert info.value.field == name
    message = str(info.value)
    assert message.startswith(f"invalid {name} ")
    assert fragment in message
    assert flag(name) in message and env_var(name) in message
    assert "\n" not in message


@pytest.mark.parametrize("name", CLUSTER_MS)
@pytest.mark.parametrize(("raw", "fragment"), [("5s", "must be an integer"), ("0", "at least 1")])
def test_bad_cluster_ms_values_from_environment_and_toml(
    tmp_path: Path, name: str, raw: str, fragment: str
) -> None:
    variable = env_var(name)
    environ = {"BEANPOLE_CLUSTER": "c.toml", "BEANPOLE_NODE": "1", "BEANPOLE_BINLOG_DIR": "/d"}
    with pytest.raises(ConfigError) as info:
        Config.from_env({**environ, variable: raw})
    assert str(info.value).startswith(f"invalid {variable}: ")
    assert fragment in str(info.value)
    toml_value = f"'{raw}'" if not raw.isdigit() else raw
    text = f"cluster = 'c.toml'\nnode = 1\nbinlog_dir = '/d'\n{name} = {toml_value}\n"
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        Config.from_toml(path)
    assert str(info.value).startswith(f"invalid {name} in {path}")
    assert fragment in str(info.value)


# -- precedence: flag > env > TOML > default -----------------------------------------------


def test_load_precedence(tmp_path: Path) -> None:
    path = write(tmp_path, "port = 1\nmax_job_size = 2\nthreads = 3\nverbose = 4\n")
    environ = {"BEANPOLE_MAX_JOB_SIZE": "20", "BEANPOLE_THREADS": "30", "BEANPOLE_PORT": "10"}
    config = Config.load(config_file=path, environ=environ, flags={"threads": 300})
    assert config.threads == 300  # flag beats env and file
    assert config.max_job_size == 20  # env beats file
    assert config.port == 10  # env beats file
    assert config.verbose == 4  # file beats default
    assert config.listen == ("127.0.0.1",)  # default


def test_load_with_nothing_gives_the_defaults() -> None:
    assert Config.load(environ={}) == Config()


def test_load_reads_the_file_named_by_beanpole_config(tmp_path: Path) -> None:
    path = write(tmp_path, "port = 7\n")
    assert Config.load(environ={"BEANPOLE_CONFIG": str(path)}).port == 7


def test_load_explicit_file_beats_beanpole_config(tmp_path: Path) -> None:
    env_file = write(tmp_path, "port = 7\n", "env.toml")
    flag_file = write(tmp_path, "port = 8\n", "flag.toml")
    config = Config.load(config_file=flag_file, environ={"BEANPOLE_CONFIG": str(env_file)})
    assert config.port == 8


def test_load_a_flag_hides_a_bad_variable() -> None:
    config = Config.load(environ={"BEANPOLE_PORT": "nonsense"}, flags={"port": 5})
    assert config.port == 5


def test_load_a_good_variable_hides_a_bad_file_value(tmp_path: Path) -> None:
    path = write(tmp_path, "max_job_size = 0\n")
    assert Config.load(config_file=path, environ={"BEANPOLE_MAX_JOB_SIZE": "9"}).max_job_size == 9


@pytest.mark.parametrize(
    ("environ", "flags", "text", "source"),
    [
        ({}, {"port": -1}, "", "-p/--port"),
        ({"BEANPOLE_PORT": "-1"}, {}, "", "BEANPOLE_PORT"),
        ({}, {}, "port = -1\n", "port in "),
    ],
)
def test_load_errors_name_the_source(
    tmp_path: Path, environ: dict[str, str], flags: dict[str, int], text: str, source: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        Config.load(config_file=path, environ=environ, flags=flags)
    assert str(info.value).startswith(f"invalid {source}")
    assert info.value.field == "port"


def test_load_log_settings_precedence(tmp_path: Path) -> None:
    path = write(tmp_path, "binlog_dir = '/from/file'\nfsync_ms = 10\nsegment_size = 4096\n")
    environ = {"BEANPOLE_BINLOG_DIR": "/from/env", "BEANPOLE_FSYNC_MS": "20"}
    config = Config.load(config_file=path, environ=environ, flags={"fsync_ms": 0})
    assert config.binlog_dir == "/from/env"
    assert config.fsync_ms == 0
    assert config.segment_size == 4096
    assert config.no_fsync is False


def test_load_unknown_flag_setting() -> None:
    with pytest.raises(TypeError, match="unknown flag setting 'colour'"):
        Config.load(environ={}, flags={"colour": 1})

"""The Spark sources' one option parser (``beanpole.spark.options``), without Spark:
the same booleans as the configuration, the protocol's tube names, one rule for a
repeated server, camelCase names with the old hyphenated ones as aliases."""

from __future__ import annotations

import pytest

from beanpole.spark.options import OptionError, Options, QueueOptions, is_tube_name
from beanpole.spark.stream_options import StreamSettings


@pytest.mark.parametrize(
    ("word", "value"),
    [("true", True), ("1", True), ("yes", True), ("on", True), ("ON", True),
     ("false", False), ("0", False), ("no", False), ("off", False)],
)
def test_booleans_are_spelled_as_in_the_configuration(word: str, value: bool) -> None:
    settings = StreamSettings.from_options({"servers": "h:1", "withPriority": word})
    assert settings.with_priority is value


def test_a_bad_boolean_names_the_option_and_the_spellings() -> None:
    with pytest.raises(OptionError, match=r"option withPriority must be true or false \(1/0"):
        StreamSettings.from_options({"servers": "h:1", "withPriority": "maybe"})


@pytest.mark.parametrize("name", ["a", "x" * 200, "A-Za-z0-9+/;.$_()", "(b)"])
def test_tube_names_the_protocol_takes(name: str) -> None:
    assert is_tube_name(name)
    assert QueueOptions.from_options({"servers": "h:1", "tube": name}).tubes == (name,)
    assert StreamSettings.from_options({"servers": "h:1", "tube": name}).tubes == (name,)


@pytest.mark.parametrize("name", ["-a", "x" * 201, "a b", "a,b", "é", "a*"])
def test_tube_names_the_protocol_refuses(name: str) -> None:
    assert not is_tube_name(name)
    for parse in (QueueOptions.from_options, StreamSettings.from_options):
        with pytest.raises(OptionError, match="must be a tube name"):
            parse({"servers": "h:1", "tube": name})  # type: ignore[operator]


def test_a_repeated_server_is_refused_by_every_source() -> None:
    for parse in (QueueOptions.from_options, StreamSettings.from_options):
        with pytest.raises(OptionError, match="names a server twice"):
            parse({"servers": "h:1, h:1"})  # type: ignore[operator]


def test_camel_case_names_and_their_aliases() -> None:
    """Names match without regard to case, as Spark passes them; the hyphenated
    spellings of earlier releases still work; giving both is refused."""
    a = QueueOptions.from_options({"servers": "h:1", "maxJobs": "7", "partitionsPerServer": "3"})
    b = QueueOptions.from_options({"servers": "h:1", "max-jobs": "7", "partitions-per-server": "3"})
    c = QueueOptions.from_options({"servers": "h:1", "maxjobs": "7", "PARTITIONSPERSERVER": "3"})
    assert a == b == c
    assert (a.max_jobs, a.partitions_per_server) == (7, 3)
    with pytest.raises(OptionError, match="option maxJobs is given twice"):
        QueueOptions.from_options({"servers": "h:1", "maxJobs": "7", "max-jobs": "8"})
    opts = Options("beanpole-binlog", {"max-partition-bytes": "4096"})
    assert opts.whole("maxPartitionBytes", 1, 1, 10**9, aliases=("max-partition-bytes",)) == 4096


def test_the_safe_ack_is_the_default() -> None:
    assert QueueOptions.from_options({"servers": "h:1"}).ack == "release"
    assert QueueOptions.from_options({"servers": "h:1", "ack": "DELETE"}).ack == "delete"


def test_timeout_zero_means_none_for_every_source() -> None:
    assert QueueOptions.from_options({"servers": "h:1", "timeout": "0"}).timeout is None
    assert StreamSettings.from_options({"servers": "h:1", "timeout": "0"}).timeout is None
    assert StreamSettings.from_options({"servers": "h:1", "timeout": "2.5"}).timeout == 2.5
    with pytest.raises(OptionError, match="option timeout must be a number of seconds"):
        QueueOptions.from_options({"servers": "h:1", "timeout": "-1"})


def test_checkpoint_location_is_a_local_directory(tmp_path: object) -> None:
    s = StreamSettings.from_options({"servers": "h:1", "checkpointLocation": "file:///tmp/cp"})
    assert s.checkpoint == "/tmp/cp"
    for remote in ("s3a://bucket/cp", "hdfs://nn/cp"):
        with pytest.raises(OptionError, match="must be a local directory"):
            StreamSettings.from_options({"servers": "h:1", "checkpointLocation": remote})

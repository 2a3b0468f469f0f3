"""Log lines of ``beanpole serve``: the start line, text and JSON formats, -V."""

from __future__ import annotations

import json
import re
from pathlib import Path

import beanpole
from logserver import Child, Client


def test_start_line_names_version_addresses_and_log(tmp_path: Path) -> None:
    log = tmp_path / "log"
    for flags, mode in (
        ([], "log: none (jobs live in memory only)"),
        (["-b", str(log)], f"log: {log}, synced every 50 ms"),
        (["-b", str(log), "-f", "0"], f"log: {log}, synced before every reply"),
        (["-b", str(log), "-F"], f"log: {log}, never synced"),
    ):
        child = Child("-p", "0", *flags)
        try:
            host, port = child.listening()
            assert child.stop() == 0
        finally:
            child.kill()
        first = child.stderr[0].rstrip("\n")
        assert first == f"beanpole {beanpole.__version__} listening on {host}:{port}; {mode}"


def test_json_log_lines(tmp_path: Path) -> None:
    child = Child("-p", "0", "--log-format", "json", "-V")
    try:
        # The start line is JSON too, so Child's text pattern does not match it: read it.
        line = child._lines.get(timeout=10)
        assert line is not None
        entry = json.loads(line)
        assert set(entry) == {"time", "level", "logger", "message"}
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", entry["time"])
        assert (entry["level"], entry["logger"]) == ("info", "beanpole")
        match = re.search(r"listening on (\S+):(\d+);", entry["message"])
        assert match is not None
        with Client((match.group(1), int(match.group(2)))) as c:
            c.expect("use t", "USING t")
        assert child.stop() == 0
    finally:
        child.kill()
    entries = [json.loads(line) for line in child.stderr]
    messages = [e["message"] for e in entries]
    assert any(re.fullmatch(r"connection \d+ opened", m) for m in messages), messages
    assert any(re.fullmatch(r"connection \d+ closed", m) for m in messages), messages
    assert "SIGTERM: stopping" in messages


def test_connection_lines_only_with_verbose() -> None:
    child = Child("-p", "0")
    try:
        with Client(child.listening()) as c:
            c.expect("use t", "USING t")
        assert child.stop() == 0
    finally:
        child.kill()
    text = "".join(child.stderr)
    assert "connection" not in text
    assert text.endswith("beanpole: SIGTERM: stopping\n")

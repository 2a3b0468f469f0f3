"""What the release build promises, checked from the repository: the licence notice
that ships in the wheel is current for Cargo.lock, and the release profile keeps the
settings the wheel relies on (unwinding panics above all: a connection task's panic
must not end the server; rust/engine/tests/panic.rs shows the unwinding side).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib

import pytest

from wheelbuild import ROOT


def test_the_third_party_notice_is_current() -> None:
    if shutil.which("cargo") is None:
        pytest.skip("cargo is not installed")
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts/third_party.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr


def test_the_release_profile() -> None:
    with (ROOT / "Cargo.toml").open("rb") as f:
        release = tomllib.load(f)["profile"]["release"]
    # "abort" would turn one connection's panic into the end of the process.
    assert release["panic"] == "unwind"
    assert release["lto"] == "fat"
    assert release["codegen-units"] == 1
    assert release["strip"] == "symbols"
    assert release["debug"] is False

"""``beanpole top`` in a real terminal: a tmux session runs it, the pane is read until the
expected text appears (with a deadline), and ``q`` ends it with status 0."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import greenstalk
import pytest

import beanpole

DEADLINE = 20.0
pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Callable[..., subprocess.CompletedProcess[str]]]:
    """Runs tmux commands on a server of this test's own (its socket in tmp_path)."""
    socket_path = str(tmp_path / "tmux.sock")

    def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["tmux", "-S", socket_path, *args],
            capture_output=True,
            text=True,
            timeout=DEADLINE,
            check=check,
        )

    yield run
    run("kill-server", check=False)


def wait_for(
    what: str, condition: Callable[[], str | None], screen: Callable[[], str] = str
) -> str:
    """Poll ``condition`` until it returns text, at most DEADLINE seconds; on failure
    show what ``screen`` returns."""
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        found = condition()
        if found is not None:
            return found
        time.sleep(0.02)
    pytest.fail(f"{what} did not happen within {DEADLINE}s; the pane shows:\n{screen()}")


def test_live_top_refreshes_and_quits_on_q(
    tmux: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    status_file = tmp_path / "status"
    with beanpole.Server(port=0) as srv, greenstalk.Client((srv.host, srv.port)) as c:
        c.use("emails")
        c.put("x")
        top = shlex.join(
            [sys.executable, "-m", "beanpole", "top", "-H", f"{srv.host}:{srv.port}",
             "--interval", "0.2"]
        )  # fmt: skip
        script = f"{top}; echo $? > {shlex.quote(str(status_file))}"
        env = [f"PYTHONPATH={os.pathsep.join(sys.path)}"]
        tmux("new-session", "-d", "-s", "top", "-x", "150", "-y", "30", "env", *env,
             "sh", "-c", script)  # fmt: skip

        def pane() -> str:
            return tmux("capture-pane", "-p", "-t", "top", check=False).stdout

        def row(tube: str, ready: str) -> str | None:
            text = pane()
            for line in text.splitlines():
                if line.split()[:2] == [tube, ready]:
                    return text
            return None

        screen = wait_for("the first frame", lambda: row("emails", "1"), pane)
        assert "TUBE" in screen and "READY" in screen and "puts/s" in screen
        for _ in range(4):
            c.put("y")
        wait_for("a refresh showing the new jobs", lambda: row("emails", "5"), pane)
        tmux("send-keys", "-t", "top", "q")
        status = wait_for(
            "top to exit",
            lambda: (status_file.read_text().strip() or None) if status_file.exists() else None,
            pane,
        )
    assert status == "0"

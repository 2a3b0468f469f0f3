"""Helpers for the ``beanpole.Client`` tests (tests/client_native)."""

from __future__ import annotations

import os
import signal

from servers import Running


def stop_server(running: Running) -> None:
    """Take the server away for good: beanstalkd is killed, beanpole is stopped."""
    if running.pid is not None:
        os.kill(running.pid, signal.SIGKILL)
    else:
        running.server.stop()  # type: ignore[attr-defined]

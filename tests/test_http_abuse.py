"""``beanpole serve --http`` under hostile clients: 1,000 slow clients (connected all
at once, each with a request head it never finishes, reconnected when closed) and
10 MB header floods, from a process of their own (bench/http_abuse.py's attack),
while a scraper keeps getting ``/metrics`` and a client keeps using the queue. Every
scrape and every queue command must succeed, the server's threads must stay as they
were and its memory bounded. Nothing here asserts a timing (bench/http_abuse.py
reports the figures)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import beanpole

ROOT = Path(__file__).resolve().parent.parent
MiB = 1 << 20
DEADLINE = 120.0  # seconds to reach the counts below; generous, never reached when working


@pytest.fixture
def abuse(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    import http_abuse

    http_abuse._nofile()
    return http_abuse


@pytest.fixture
def target(abuse: Any) -> Iterator[Any]:
    running = abuse.Target()
    yield running
    assert running.stop() == 0


class QueueUser(threading.Thread):
    """put, reserve, delete in a loop; counts round trips and errors."""

    def __init__(self, address: tuple[str, int]) -> None:
        super().__init__(daemon=True)
        self.address = address
        self.stopping = threading.Event()
        self.done = 0
        self.errors: list[str] = []

    def run(self) -> None:
        try:
            with beanpole.Client(self.address, timeout=30) as c:
                while not self.stopping.is_set():
                    job_id = c.put(b"work")
                    job = c.reserve(timeout=10)
                    if job.id != job_id:
                        self.errors.append(f"reserved {job.id}, put {job_id}")
                    c.delete(job)
                    self.done += 1
        except Exception as err:  # every failure is reported by the test
            self.errors.append(f"{type(err).__name__}: {err}")


def test_slow_clients_and_floods_neither_stop_scrapes_nor_the_queue(
    abuse: Any, target: Any
) -> None:
    threads_before = target.threads()
    rss_before = target.rss()
    sampler = abuse.Sampler(target)
    sampler.start()
    attack = abuse.Attack(target.http, 1000, 10)
    scraper = abuse.Scraper(target.http)
    user = QueueUser(target.queue)
    scraper.start()
    user.start()
    try:
        deadline = time.monotonic() + DEADLINE
        while (len(scraper.latencies) + len(scraper.failures) < 60 or user.done < 500) and (
            not user.errors
        ):
            assert time.monotonic() < deadline, (len(scraper.latencies), user.done)
            time.sleep(0.05)
        counters = target.http_counters()
    finally:
        done = attack.stop()
        user.stopping.set()
        scraper.stop()
        user.join(30)
        sampler.stop()
    assert scraper.failures == []
    assert user.errors == []
    # The attack was real: the server closed slow clients to make room, by the hundred.
    assert done["closed_by_server"] >= 1000 - 64
    assert done["floods"] >= 1
    closed = counters["beanpole_http_connections_evicted_total"] + counters[
        "beanpole_http_connections_refused_total"
    ]
    assert closed >= 1000 - 64
    assert counters["beanpole_http_connections"] <= 64
    # Bounded: no thread per connection, no memory per flooded byte.
    assert sampler.threads == threads_before
    assert sampler.rss - rss_before < 64 * MiB
    # Afterwards the endpoint is as it was.
    assert abuse.scrape(target.http)[0] == 200


def test_the_bench_runs_small(abuse: Any) -> None:
    """bench/http_abuse.py's report, end to end with tiny counts, so it cannot rot."""
    import subprocess
    import sys

    bench = ROOT / "target/release/beanpole-bench"
    if not bench.exists():
        pytest.skip("target/release/beanpole-bench is not built")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench/http_abuse.py"), "--rounds", "1", "--seconds",
         "0.5", "--clients", "50", "--flood-mb", "1"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    for fragment in ("| not scraped |", "| scraped |", "50 slow clients", "attack in all"):
        assert fragment in proc.stdout, proc.stdout

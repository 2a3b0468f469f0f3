"""Run every wire transcript (tests/transcripts/*.t) against each server kind.

Each transcript gets a fresh server, so they are independent; the selected ones of a
kind run concurrently in a thread pool (the slow, timing-bound ones first) and each
test waits for its own result, so the suite takes seconds, not minutes.
"""

from __future__ import annotations

import importlib.util
import shutil
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

import transcript

DIRECTORY = Path(__file__).parent / "transcripts"
NAMES = sorted(p.stem for p in DIRECTORY.glob("*.t"))
WORKERS = 24


def beanpole_missing() -> bool:
    try:
        return importlib.util.find_spec("beanpole._core") is None
    except ImportError:
        return True


class Batch:
    """Runs the selected transcripts of one kind in parallel, on first demand."""

    def __init__(self) -> None:
        self.pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="transcript")
        self.lock = threading.Lock()
        self.futures: dict[tuple[str, str], Future[None]] = {}

    def future(self, kind: str, name: str, selected: list[str]) -> Future[None]:
        with self.lock:
            if (kind, name) not in self.futures:
                version = transcript.protocol_version(kind)
                parsed = [transcript.parse(DIRECTORY / f"{n}.t", version) for n in selected]
                parsed.sort(key=lambda t: -t.estimated_seconds())
                for t in parsed:
                    if (kind, t.name) in self.futures:
                        continue
                    if transcript.skip_reason(t, kind) is None:
                        self.futures[kind, t.name] = self.pool.submit(transcript.run, t, kind)
            return self.futures[kind, name]

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


@pytest.fixture(scope="session")
def transcript_batch() -> Iterator[Batch]:
    batch = Batch()
    yield batch
    batch.close()


def selected_names(session: pytest.Session, kind: str) -> list[str]:
    names = []
    for item in session.items:
        callspec = getattr(item, "callspec", None)
        if getattr(item, "originalname", None) != "test_transcript" or callspec is None:
            continue
        if callspec.params.get("server_kind") == kind:
            names.append(str(callspec.params["name"]))
    return names


def test_transcripts_parse() -> None:
    """Every file follows the format (for both version views)."""
    assert len(NAMES) >= 170
    for version in ("1.12", "1.13"):
        transcript.load_all(DIRECTORY, version)


@pytest.mark.parametrize("name", NAMES)
def test_transcript(
    server_kind: str, name: str, transcript_batch: Batch, request: pytest.FixtureRequest
) -> None:
    if server_kind == "beanpole" and beanpole_missing():
        pytest.skip("beanpole's native module (beanpole._core) is not built")
    if server_kind == "beanstalkd" and shutil.which("beanstalkd") is None:
        pytest.skip("beanstalkd is not installed (apt-get install beanstalkd)")
    t = transcript.parse(DIRECTORY / f"{name}.t", transcript.protocol_version(server_kind))
    reason = transcript.skip_reason(t, server_kind)
    if reason is not None:
        pytest.skip(reason)
    selected = selected_names(request.session, server_kind) or [name]
    if name not in selected:
        selected.append(name)
    failure = transcript_batch.future(server_kind, name, selected).exception(timeout=120)
    if isinstance(failure, transcript.TranscriptFailure):
        pytest.fail(str(failure), pytrace=False)
    if failure is not None:
        raise failure


def test_every_transcript_through_a_cluster_follower() -> None:
    """The same transcripts against a fresh three-node cluster each, sent to a
    follower (which forwards them to the leader): the protocol is the leader's, byte for
    byte, those about a client's reset after a hang-up with commands queued behind
    a waiting reserve included."""
    if beanpole_missing():
        pytest.skip("beanpole's native module (beanpole._core) is not built")
    from servers import CLUSTER

    version = transcript.protocol_version(CLUSTER)
    parsed = [transcript.parse(DIRECTORY / f"{n}.t", version) for n in NAMES]
    chosen = [t for t in parsed if transcript.skip_reason(t, CLUSTER) is None]
    assert len(chosen) == len(parsed)
    chosen.sort(key=lambda t: -t.estimated_seconds())
    # Three nodes a transcript: fewer at once than for single servers.
    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="cluster-transcript") as pool:
        futures = {t.name: pool.submit(transcript.run, t, CLUSTER) for t in chosen}
        failures = [f"{name}: {f.exception()}" for name, f in futures.items() if f.exception()]
    assert not failures, "\n\n".join(failures)

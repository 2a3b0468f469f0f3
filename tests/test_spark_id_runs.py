"""The writer's commit messages name jobs as runs of consecutive ids: the runs must
give back exactly the ids put, in order, whatever their shape."""

from __future__ import annotations

import random

import pytest

pa = pytest.importorskip("pyarrow")

from beanpole.spark import id_runs  # noqa: E402


def _round_trip(ids: list[int]) -> bytes:
    packed = id_runs.pack(pa.array(ids, pa.uint64()))
    assert id_runs.expand(packed) == ids
    assert id_runs.count(packed) == len(ids)
    return packed


def test_empty_and_single() -> None:
    assert _round_trip([]) == b""
    assert len(_round_trip([7])) == 16


def test_consecutive_ids_are_one_run() -> None:
    assert len(_round_trip(list(range(1, 100_001)))) == 16


def test_interleaved_connections_make_a_run_per_stretch() -> None:
    # Two connections' puts interleaved by the server in stretches: this task got
    # every other stretch of 150 ids.
    ids = [i for k in range(0, 60, 2) for i in range(k * 150 + 1, (k + 1) * 150 + 1)]
    assert len(_round_trip(ids)) == 16 * 30


@pytest.mark.parametrize("seed", range(20))
def test_random_increasing_and_unordered_ids(seed: int) -> None:
    rng = random.Random(seed)
    ids: list[int] = []
    nxt = rng.randrange(1, 2**40)
    for _ in range(rng.randrange(1, 3000)):
        nxt += rng.choice((1, 1, 1, 2, 50))
        ids.append(nxt)
    if seed % 2:
        rng.shuffle(ids)  # a retried batch may put ids out of order: still exact
    _round_trip(ids)


def test_a_sliced_array_packs_its_own_ids() -> None:
    ids = pa.array(range(1, 1001), pa.uint64()).slice(10, 20)
    assert id_runs.expand(id_runs.pack(ids)) == list(range(11, 31))


def test_a_torn_message_is_refused() -> None:
    with pytest.raises(ValueError, match="pairs of uint64"):
        id_runs.expand(b"x" * 24)

"""``connectors/_spill.SortedRuns``: every key once, combined in run order, whatever the passes.

Pure. The combine here is string concatenation, associative and not commutative, so a
merge that combined two runs out of order, or lost or repeated one, shows in the value.
The HBase buffer's own tests (``tests/connectors/hbase/test_buffer_*.py``) run it under
the sink's netting, memory bound and open-file count.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkbarrier._exceptions import SinkError
from sparkbarrier.connectors._spill import MAX_FAN_IN, SortedRuns


def _runs(max_memory: int, chunk_bytes: int) -> SortedRuns[str]:
    return SortedRuns(max_memory=max_memory, chunk_bytes=chunk_bytes, cost=lambda k, v: len(k) + len(v),
                      combine=lambda a, b: a + b)


def _expected(runs: list[dict[bytes, str]]) -> list[tuple[bytes, str]]:
    out: dict[bytes, str] = {}
    for run in runs:
        for key, value in run.items():
            out[key] = out.get(key, "") + value
    return sorted(out.items())


@settings(max_examples=60, deadline=None)
@given(st.lists(st.dictionaries(st.binary(min_size=0, max_size=3), st.text("ab", min_size=1, max_size=3),
                                max_size=12), min_size=1, max_size=2 * MAX_FAN_IN + 5),
       st.sampled_from([(64, 1), (200, 16), (1 << 20, 4096)]))
def test_drain_gives_every_key_once_combined_in_run_order(runs: list[dict[bytes, str]],
                                                          budget: tuple[int, int]) -> None:
    spilled = _runs(*budget)
    try:
        for run in runs:
            spilled.spill(sorted(run.items()))
        drained = list(spilled.drain())
        assert drained == _expected(runs)
        assert list(spilled.replay()) == drained  # the copy the caller reads again
        if len(runs) > MAX_FAN_IN:
            assert spilled.passes >= 1
    finally:
        spilled.close()


def test_many_runs_take_several_passes_and_two_files() -> None:
    rnd = random.Random(7)
    runs = [{b"k%03d" % rnd.randrange(50): str(i)} for i in range(3 * MAX_FAN_IN)]
    spilled = _runs(1 << 20, 64)
    try:
        for run in runs:
            spilled.spill(sorted(run.items()))
        assert spilled.spilled == len(runs) and bool(spilled)
        assert list(spilled.drain()) == _expected(runs) and not spilled
        assert spilled.passes >= 1
    finally:
        spilled.close()


def test_replay_before_the_drain_ended_is_an_error() -> None:
    spilled = _runs(1 << 20, 64)
    spilled.spill([(b"a", "1")])
    with pytest.raises(SinkError, match="before drain"):
        spilled.replay()
    spilled.close()

"""Cell timestamps: wall-clock based, one block per task, rounds inside a block."""

from __future__ import annotations

import pytest

from sparkbarrier._exceptions import ConfigError, SinkError
from sparkbarrier.connectors.hbase.sink._timestamps import (
    BATCH_SPAN_MS, MAX_TASKS, ROUNDS, TASK_WIDTH_MS, TaskClock, batch_span_ms, check_block, next_base,
    task_block)


def test_base_follows_the_wall_clock_but_never_goes_below_what_was_written() -> None:
    assert next_base(1_000, 0) == 1_000
    assert next_base(1_000, 1_500) == 1_500


def test_tasks_own_disjoint_blocks_ordered_by_partition() -> None:
    blocks = [(TaskClock(10_000, p).delete_ts(0), TaskClock(10_000, p).end(ROUNDS - 1)) for p in range(3)]
    assert blocks == [(10_000 + p * TASK_WIDTH_MS, 10_000 + (p + 1) * TASK_WIDTH_MS) for p in range(3)]


def test_deletes_sort_below_puts_within_a_round_and_rounds_increase() -> None:
    clock = TaskClock(0, 0)
    seen = [t for r in range(ROUNDS) for t in (clock.delete_ts(r), clock.put_ts(r))]
    assert seen == sorted(set(seen))
    with pytest.raises(SinkError):
        clock.put_ts(ROUNDS)


def test_a_batch_spans_at_most_a_few_seconds_by_default_and_the_limit_names_its_option() -> None:
    assert BATCH_SPAN_MS == MAX_TASKS * TASK_WIDTH_MS <= 5_000
    with pytest.raises(ConfigError, match="sink.max-write-tasks") as err:
        check_block(MAX_TASKS, MAX_TASKS)
    assert err.value.option == "sink.max-write-tasks" and "coalesce" in str(err.value)
    check_block(1_999, 2_000)  # a wider batch, allowed by the option
    assert TaskClock(0, task_block(1_999, keyed=False)).block_end() == batch_span_ms(2_000)
    assert TaskClock(0, task_block(1_999, keyed=True)).block_end() == TASK_WIDTH_MS

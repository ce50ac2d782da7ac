"""Cell timestamps: wall-clock based, one block shared by keyed tasks and one per other task."""

from __future__ import annotations

import pytest

from sparkbarrier._exceptions import ConfigError, SinkError
from sparkbarrier.connectors.hbase.sink._timestamps import (
    BATCH_SPAN_MS,
    MAX_TASKS,
    TASK_WIDTH_MS,
    TRY_SLOTS,
    TaskClock,
    batch_span_ms,
    check_block,
    next_base,
    task_block,
)


def test_base_follows_the_wall_clock_but_never_goes_below_what_was_written() -> None:
    assert next_base(1_000, 0) == 1_000
    assert next_base(1_000, 1_500) == 1_500


def test_keyed_tasks_share_the_first_block_and_the_others_own_one_each_above_it() -> None:
    blocks = [(TaskClock(10_000, task_block(p)).delete_ts(),
               TaskClock(10_000, task_block(p)).block_end()) for p in range(3)]
    assert blocks == [(10_000 + (p + 1) * TASK_WIDTH_MS, 10_000 + (p + 2) * TASK_WIDTH_MS) for p in range(3)]
    shared = {TaskClock(10_000, task_block(p, keyed_at=0)).slot_put_ts(0) for p in range(3)}
    assert shared == {10_001}


def test_deletes_sort_below_every_try_slot_and_slots_stay_in_the_block() -> None:
    clock = TaskClock(0, 0)
    seen = [clock.delete_ts()] + [clock.slot_put_ts(s) for s in range(TRY_SLOTS)]
    assert seen == sorted(set(seen)) and seen[-1] < clock.block_end() == TASK_WIDTH_MS
    with pytest.raises(SinkError):
        clock.slot_put_ts(TRY_SLOTS)


def test_a_batch_spans_at_most_a_few_seconds_by_default_and_the_limit_names_its_option() -> None:
    assert BATCH_SPAN_MS == MAX_TASKS * TASK_WIDTH_MS <= 5_000
    with pytest.raises(ConfigError, match="sink.max-write-tasks") as err:
        check_block(MAX_TASKS, MAX_TASKS)
    assert err.value.option == "sink.max-write-tasks" and "coalesce" in str(err.value)
    check_block(1_999, 2_000)  # a wider batch, allowed by the option
    assert TaskClock(0, task_block(1_999)).block_end() == batch_span_ms(2_000)
    assert TaskClock(0, task_block(1_999, keyed_at=0)).block_end() == TASK_WIDTH_MS

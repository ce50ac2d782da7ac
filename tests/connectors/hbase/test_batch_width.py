"""A batch as wide as a real cluster's: over a thousand write tasks, against the real HBase.

Each write task owns 8 ms of cell timestamps per batch (``_timestamps``), so the number of
tasks a batch may have is an option (``sink.max-write-tasks``, default 512) that each task
checks before it records an attempt or writes a cell; an attempt records the span it may
use, so the replay after a driver restart starts above all of it.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pytest

from sparkbarrier._exceptions import ConfigError
from sparkbarrier.connectors.hbase.sink._timestamps import TASK_WIDTH_MS

pytestmark = [pytest.mark.hbase]

KV = pa.schema([("id", pa.string()), ("v", pa.int64())])
TASKS = 1_000


@pytest.mark.timeout(300)
def test_a_batch_of_a_thousand_write_tasks_commits_and_its_replay_starts_above_all_of_them(make_sink) -> None:
    """1,000 tasks at once (8 threads, as executors run them), keys shared by neighbouring
    tasks as ``minPartitions`` splits share them; the driver dies before the commit and a
    replay abandons the whole wide attempt: it starts above all of it and removes all of it."""
    sink = make_sink(KV, **{"sink.max-write-tasks": str(TASKS)})
    with ThreadPoolExecutor(8) as pool:
        first = list(pool.map(lambda p: sink.task([{"id": f"k{p // 2}", "v": p}], batch=0, partition=p, plan="p1"),
                              range(TASKS)))
    assert {m.base_ms for m in first} == {first[0].base_ms}
    assert max(m.ts_end for m in first) - first[0].base_ms == TASKS * TASK_WIDTH_MS
    replay = [sink.task([{"id": "k7", "v": 150}], batch=0, partition=15, plan="p2")]
    assert replay[0].base_ms >= first[0].base_ms + TASKS * TASK_WIDTH_MS
    record = sink.commit(replay, 0)
    assert record.gaps == []
    assert sink.read() == [{"id": "k7", "v": 150}]  # every abandoned task's puts removed
    assert sink.versions(b"k7", b"d:v") == [((150).to_bytes(8, "big", signed=True), replay[0].base_ms + 15 * 8 + 1)]


@pytest.mark.timeout(60)
def test_a_task_past_the_limit_fails_before_it_records_an_attempt_or_writes_a_cell(make_sink) -> None:
    sink = make_sink(KV, **{"sink.max-write-tasks": "4"})
    with pytest.raises(ConfigError, match="Set option 'sink.max-write-tasks' to at least") as err:
        sink.task([{"id": "a", "v": 1}], batch=0, partition=4, plan="p1")
    assert err.value.option == "sink.max-write-tasks"
    assert sink.plain() == {} and sink.notes() == {} and sink.history() == []
    from sparkbarrier.connectors.hbase.client._connection import HBaseConnection
    from sparkbarrier.connectors.hbase.sink._commit_table import read_state

    conn = HBaseConnection(sink.opts, 0)
    try:
        assert read_state(conn, sink.opts.commit_table, sink.opts.sink_id).attempt is None
    finally:
        conn.close()


def test_a_replay_starts_above_the_widest_attempt_it_abandons_even_under_a_narrower_limit() -> None:
    """Pure placement: a wide attempt (2,000 tasks) abandoned, then a replay under the default
    limit abandoned too: the third plan still starts above everything the first may have written."""
    from sparkbarrier.connectors.hbase.sink._attempts import place
    from sparkbarrier.connectors.hbase.sink._timestamps import BATCH_SPAN_MS, batch_span_ms

    common = {"query_id": "q", "batch_id": 0, "flush_rows": 10, "flush_bytes": 100, "now_ms": 1_000}
    wide = place(None, None, plan_id="e1", span_ms=batch_span_ms(2_000), **common).record
    assert wide is not None and wide.reach_ms == batch_span_ms(2_000)
    narrow = place(None, wide, plan_id="e2", span_ms=BATCH_SPAN_MS, **common).record
    assert narrow is not None and narrow.base_ms == wide.base_ms + batch_span_ms(2_000)
    assert narrow.reach_ms == batch_span_ms(2_000)  # it carries the wide one's reach
    third = place(None, narrow, plan_id="e3", span_ms=BATCH_SPAN_MS, **common)
    assert third.abandoned == [wide.base_ms, narrow.base_ms]
    assert third.base_ms >= narrow.base_ms + batch_span_ms(2_000)
    assert place(None, None, plan_id="e1", **common).record.to_bytes().find(b"span_ms") == -1  # default: unchanged

"""A batch as wide as a real cluster's: a thousand write tasks, against the real HBase.

A write task whose keys are not hash-partitioned by the row key owns 8 ms of cell
timestamps per batch (``_timestamps``), so the number of tasks a batch may have is an
option (``sink.max-write-tasks``, default 512) that each task checks before it records an
attempt or writes a cell; an attempt records the span it may use, so the replay after a
driver restart starts above all of it. Keyed tasks (every key hashes to the task under
the previous batch's task count, ``_keyed``) share one block: a keyed batch of a thousand
tasks spans 8 ms.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pytest

from sparkbarrier._exceptions import ConfigError
from sparkbarrier.connectors._partitioners import spark_hashes
from sparkbarrier.connectors.hbase.sink._timestamps import TASK_WIDTH_MS, batch_span_ms

pytestmark = [pytest.mark.hbase]

KV = pa.schema([("id", pa.string()), ("v", pa.int64())])
TASKS = 1_000


def keys_by_partition(tasks: int, per_task: int) -> dict[int, list[str]]:
    """Row keys that Spark's ``repartition(tasks, "id")`` sends to each partition."""
    names = [f"r{i}" for i in range(tasks * per_task * 12)]
    residues = np.mod(spark_hashes([n.encode() for n in names], "bytes").astype(np.int64), tasks)
    out: dict[int, list[str]] = {p: [] for p in range(tasks)}
    for name, p in zip(names, residues.tolist()):
        if len(out[p]) < per_task:
            out[p].append(name)
    assert all(len(v) == per_task for v in out.values())
    return out


@pytest.mark.timeout(400)
def test_a_thousand_write_tasks_commit_a_keyed_batch_spans_one_block_and_a_replay_starts_above_all(
        make_sink) -> None:
    """Two batches of 1,000 tasks at once (8 threads, as executors run them).

    Batch 0: keys shared by neighbouring tasks as ``minPartitions`` splits share them; no
    task is keyed (no batch before it), so each writes in a block of its own, the higher
    one winning. Batch 1: every task's keys hash to it (a ``repartition(1000, "id")``), but
    task 7 also holds a key of task 8's: all but task 7 share the first block, task 7 writes
    in its own above it. The driver dies before batch 1's commit, and a replay abandons the
    whole attempt: it starts above all of it and removes all of it.
    """
    sink = make_sink(KV, **{"sink.max-write-tasks": str(TASKS)})
    with ThreadPoolExecutor(8) as pool:
        first = list(pool.map(lambda p: sink.task([{"id": f"k{p // 2}", "v": p}], batch=0, partition=p, plan="p1"),
                              range(TASKS)))
    assert {m.base_ms for m in first} == {first[0].base_ms}
    assert max(m.ts_end for m in first) - first[0].base_ms == (TASKS + 1) * TASK_WIDTH_MS
    record = sink.commit(first, 0)
    assert record.tasks == TASKS
    assert sink.read()[:2] == [{"id": "k0", "v": 1}, {"id": "k1", "v": 3}]  # the higher task of each pair

    keys = keys_by_partition(TASKS, 2)
    keys[7].append(keys[8][0])  # a key of task 8's in task 7 too: task 7 is not keyed
    with ThreadPoolExecutor(8) as pool:
        second = list(pool.map(lambda p: sink.task([{"id": k, "v": 10_000 + p} for k in keys[p]], batch=1,
                                                   partition=p, plan="p2"), range(TASKS)))
    base = second[0].base_ms
    assert base >= record.read_bound
    ends = {m.partition_id: m.ts_end - base for m in second}
    assert ends.pop(7) == (1 + 7 + 1) * TASK_WIDTH_MS and set(ends.values()) == {TASK_WIDTH_MS}
    shared = keys[8][0].encode()
    assert [ts - base for _, ts in sink.versions(shared, b"d:v")][:2] == [8 * TASK_WIDTH_MS + 1, 1]

    replay = [sink.task([{"id": "k7", "v": 150}], batch=1, partition=15, plan="p3")]
    assert replay[0].base_ms >= base + 9 * TASK_WIDTH_MS  # above what its tries noted: task 7's block 8
    assert sink.commit(replay, 1).gaps == []
    committed = {r["id"]: r["v"] for r in sink.read()}
    assert committed["k7"] == 150 and not any(k.startswith("r") for k in committed)  # every try's puts removed
    assert sink.versions(b"k7", b"d:v")[0] == ((150).to_bytes(8, "big", signed=True),
                                               replay[0].base_ms + 16 * TASK_WIDTH_MS + 1)


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


def test_a_replay_starts_above_what_the_abandoned_tries_noted_not_their_whole_span() -> None:
    """Pure placement with the sink row's notes: a keyed attempt's tries noted block 0 and one
    try block 12, so a replay of it needs to start only above block 12 (its planning clock
    behind); an at-least-once attempt notes nothing, so a replay starts above its whole span."""
    from sparkbarrier.connectors.hbase.sink._attempts import place, written_end
    from sparkbarrier.connectors.hbase.sink._commit_table import TaskNote

    common = {"query_id": "q", "batch_id": 0, "flush_rows": 10, "flush_bytes": 100, "now_ms": 1_000}
    first = place(None, None, plan_id="e1", span_ms=batch_span_ms(2_000), **common).record
    assert first is not None
    notes = [TaskNote(first.base_ms, 3, "s0", chunks=1, block=0), TaskNote(first.base_ms, 11, "s1", chunks=2, block=12),
             TaskNote(first.base_ms, 40, "s0", chunks=None),  # still being written: it sends nothing
             TaskNote(first.base_ms - 50, 99, "s0", chunks=1, block=99)]  # another attempt's
    assert written_end(first, notes) == first.base_ms + 13 * TASK_WIDTH_MS
    replay = place(None, first, plan_id="e2", notes=notes, **common)
    assert replay.base_ms == first.base_ms + 13 * TASK_WIDTH_MS and replay.abandoned == [first.base_ms]
    assert place(None, first, plan_id="e2", notes=[], **common).base_ms == first.base_ms + TASK_WIDTH_MS
    assert place(None, first, plan_id="e2", **common).base_ms == first.base_ms + batch_span_ms(2_000)  # no notes read
    loose = place(None, None, plan_id="e1", noting=False, span_ms=batch_span_ms(2_000), **common).record
    assert place(None, loose, plan_id="e2", notes=notes, **common).base_ms == loose.base_ms + batch_span_ms(2_000)

"""Timestamp blocks follow the input, not Spark's task id (``_blocks``), against a real HBase.

Spark's JVM Kafka source may plan a replayed batch's offset ranges in another order
after a driver restart, so the same input comes back under another task id. These
tests drive the writer by hand with the ids swapped between a crashed first attempt
(plan "p1") and its replay (plan "p2").
"""

from __future__ import annotations

import happybase
import pyarrow as pa
import pytest

from sparkbarrier._exceptions import FlushError
from sparkbarrier.connectors.hbase._blocks import fingerprint
from sparkbarrier.connectors.hbase._buffer import FAULT_AFTER_PARTIAL_FLUSH
from sparkbarrier.connectors.hbase._timestamps import TASK_WIDTH_MS
from sparkbarrier.devstack.faults import FAULT_ENV, FAULT_STATE_DIR_ENV

pytestmark = [pytest.mark.hbase]

OPS = pa.schema([("id", pa.string()), ("v", pa.int64()), ("s", pa.string()), ("op", pa.string())])


def row(key: str, v: int | None, op: str | None = None) -> dict:
    return {"id": key, "v": v, "s": None, "op": op}


# Two flushes at max-rows 2: "a" is put, flushed, then deleted and put again, so the
# first flush leaves an intermediate value a replay in another block would not cover.
INPUT_A = [row("a", 1), row("x", 1), row("a", None, "delete"), row("a", 2)]
INPUT_B = [row("b", 1), row("y", 1)]


def versions(sink, key: str) -> list[tuple[bytes, int]]:
    conn = happybase.Connection(sink.opts.host, sink.opts.port)
    try:
        return conn.table(sink.opts.table).cells(key.encode(), b"d:v", versions=100, include_timestamp=True)
    finally:
        conn.close()


def block_of(msg) -> int:
    return (msg.ts_end - 1 - msg.base_ms) // TASK_WIDTH_MS


def crash_after_first_flush(sink, monkeypatch, rows, *, partition: int, plan: str) -> None:
    monkeypatch.setenv(FAULT_ENV, FAULT_AFTER_PARTIAL_FLUSH)
    with pytest.raises(FlushError):
        sink.task(rows, batch=0, partition=partition, plan=plan)
    monkeypatch.delenv(FAULT_ENV)


def test_a_replay_under_swapped_task_ids_writes_exactly_the_first_attempts_cells(make_sink, monkeypatch) -> None:
    opts = {"op.column": "op", "sink.buffer-flush.max-rows": "2"}
    sink = make_sink(OPS, **opts)
    crash_after_first_flush(sink, monkeypatch, INPUT_A, partition=1, plan="p1")
    first_attempt = versions(sink, "a")
    replay = [sink.task(INPUT_A, batch=0, partition=0, plan="p2"), sink.task(INPUT_B, batch=0, partition=1, plan="p2")]
    sink.commit(replay, 0)

    assert sink.read() == [{"id": "a", "v": 2, "s": None}, {"id": "b", "v": 1, "s": None},
                           {"id": "x", "v": 1, "s": None}, {"id": "y", "v": 1, "s": None}]
    assert [block_of(m) for m in replay] == [1, 0]  # A kept its block, B took the free one
    # The same input in a clean run on another sink: the visible cells must be identical.
    clean = make_sink(OPS, **opts)
    clean_msgs = [clean.task(INPUT_A, batch=0, partition=1, plan="c"),
                  clean.task(INPUT_B, batch=0, partition=0, plan="c")]
    clean.commit(clean_msgs, 0)
    shift = replay[0].base_ms - clean_msgs[0].base_ms
    for key in ("a", "x", "b", "y"):
        assert [(v, ts - shift) for v, ts in versions(sink, key)] == versions(clean, key), key
    # The first attempt wrote its intermediate "a" in that same block: the replay's round-1
    # delete marker masks it, as in the clean run.
    assert [(v, (ts - replay[0].base_ms) // TASK_WIDTH_MS) for v, ts in first_attempt] == [(first_attempt[0][0], 1)]


def test_a_new_input_takes_a_block_above_the_earlier_ones_and_equal_first_flushes_stay_apart(
        make_sink, monkeypatch) -> None:
    sink = make_sink(OPS, **{"op.column": "op", "sink.buffer-flush.max-rows": "2"})
    crash_after_first_flush(sink, monkeypatch, INPUT_A, partition=0, plan="p1")
    # Replay: B now runs as task 0, whose block A's input claimed; C equals B's first flush.
    # New inputs go above every block an earlier plan claimed (1 + task id there).
    input_c = INPUT_B + [row("c", 7)]
    replay = [sink.task(INPUT_B, batch=0, partition=0, plan="p2"),
              sink.task(input_c, batch=0, partition=2, plan="p2"),
              sink.task(INPUT_A, batch=0, partition=1, plan="p2")]
    assert [block_of(m) for m in replay] == [1, 3, 0]
    # A retry of a task in the same plan finds its own block again.
    retry = sink.task(input_c, batch=0, partition=2, plan="p2")
    assert block_of(retry) == 3 and retry.base_ms == replay[0].base_ms
    sink.commit(replay, 0)
    assert {r["id"]: r["v"] for r in sink.read()} == {"a": 2, "b": 1, "c": 7, "x": 1, "y": 1}


def test_the_fingerprint_covers_keys_deletes_and_values_in_any_order() -> None:
    base = [(b"k", False, set(), {b"d:v": b"1"}), (b"j", True, set(), {})]
    same = fingerprint(iter(base))
    assert fingerprint(iter(base)) == same
    assert fingerprint(iter(base[::-1])) == same  # a shuffle's rows come in any order
    assert fingerprint(iter([(b"k", False, set(), {b"d:v": b"2"}), base[1]])) != same
    assert fingerprint(iter(base[:1])) != same
    assert fingerprint(iter([(b"k", False, {b"d:s"}, {b"d:v": b"1"}), base[1]])) != same
    assert fingerprint(iter([(b"k", False, set(), {b"d:v1": b""}), base[1]])) != fingerprint(
        iter([(b"k", False, set(), {b"d:v": b"1"}), base[1]]))


KEYS = [row(f"k{i}", i) for i in range(6)]


def rerun_reordered(sink, monkeypatch, *, plan: str):
    """The first attempt (plan "s1", task 0) dies after its first flush; the rerun gets the
    same rows in reverse order, as a shuffle may deliver them, and commits; reads exact."""
    crash_after_first_flush(sink, monkeypatch, KEYS, partition=0, plan="s1")
    again = sink.task(KEYS[::-1], batch=0, partition=0, plan=plan)
    sink.commit([again], 0)
    assert {r["id"]: r["v"] for r in sink.read()} == {f"k{i}": i for i in range(6)}
    return again


def test_behind_a_shuffle_a_retry_in_the_same_plan_keeps_its_block_whatever_the_row_order(
        make_sink, monkeypatch) -> None:
    sink = make_sink(OPS, **{"op.column": "op", "sink.buffer-flush.max-rows": "2"})
    retry = rerun_reordered(sink, monkeypatch, plan="s1")
    assert block_of(retry) == 0
    assert all(len(versions(sink, f"k{i}")) == 1 for i in range(6))


def test_behind_a_shuffle_a_replay_adopts_its_block_when_the_first_flush_holds_the_same_rows(
        make_sink, monkeypatch) -> None:
    sink = make_sink(OPS, **{"op.column": "op"})  # one flush per task: order cannot change what it holds
    replay = rerun_reordered(sink, monkeypatch, plan="s2")
    assert block_of(replay) == 0
    assert all(len(versions(sink, f"k{i}")) == 1 for i in range(6))


def test_behind_a_shuffle_a_replay_whose_first_flush_changed_writes_above_the_first_attempt(
        make_sink, monkeypatch) -> None:
    """Cut by the row limit, a reordered first flush holds other rows: no adoption. The
    replay writes above the first attempt's block, so plain and committed reads are exact
    (the first attempt's cells stay as older versions of the same values)."""
    sink = make_sink(OPS, **{"op.column": "op", "sink.buffer-flush.max-rows": "2"})
    replay = rerun_reordered(sink, monkeypatch, plan="s2")
    assert block_of(replay) == 1
    newest = {f"k{i}": versions(sink, f"k{i}")[0] for i in range(6)}
    assert all((ts - replay.base_ms) // TASK_WIDTH_MS == 1 for _, ts in newest.values())


# Limit 2: INPUT_D's first flush equals INPUT_B's ({b, y}); its later flushes write
# c = 7 (second flush) and then c = 8 (the end), at one timestamp of its block.
INPUT_D = INPUT_B + [row("c", 7), row("z", 1), row("c", 8)]


def crash_after_second_flush(sink, monkeypatch, state_dir, rows, *, partition: int, plan: str) -> None:
    monkeypatch.setenv(FAULT_ENV, f"{FAULT_AFTER_PARTIAL_FLUSH}@2")
    monkeypatch.setenv(FAULT_STATE_DIR_ENV, str(state_dir))
    with pytest.raises(FlushError):
        sink.task(rows, batch=0, partition=partition, plan=plan)
    monkeypatch.delenv(FAULT_ENV)
    monkeypatch.delenv(FAULT_STATE_DIR_ENV)


def assert_reads_equal_a_clean_run(sink, make_sink, opts):
    """Committed view and plain scan equal the inputs' final values (a clean run's plain scan)."""
    assert {r["id"]: r["v"] for r in sink.read()} == {"b": 1, "c": 8, "y": 1, "z": 1}
    clean = make_sink(OPS, **opts)
    clean.commit([clean.task(INPUT_B, batch=0, partition=0, plan="c"),
                  clean.task(INPUT_D, batch=0, partition=1, plan="c")], 0)
    assert sink.plain() == clean.plain()
    return clean


def test_a_replay_of_two_inputs_with_one_first_flush_writes_above_both_earlier_blocks(
        make_sink, monkeypatch, tmp_path) -> None:
    """Two earlier claims share the fingerprint: which input wrote which block is unknown,
    so neither is adopted. Moving D's input to B's lower block would leave the c = 7 its
    first attempt flushed on top; above both, the earlier cells are older versions only."""
    opts = {"op.column": "op", "sink.buffer-flush.max-rows": "2"}
    sink = make_sink(OPS, **opts)
    sink.task(INPUT_B, batch=0, partition=0, plan="p1")  # block 0
    crash_after_second_flush(sink, monkeypatch, tmp_path, INPUT_D, partition=1, plan="p1")  # block 1: c = 7
    replay = [sink.task(INPUT_D, batch=0, partition=0, plan="p2"), sink.task(INPUT_B, batch=0, partition=1, plan="p2")]
    sink.commit(replay, 0)
    clean = assert_reads_equal_a_clean_run(sink, make_sink, opts)
    assert [block_of(m) for m in replay] == [2, 3]  # above every earlier block, in task order
    # The first attempt's c = 7 stays below, as an older version (the limit-1 outcome).
    c = versions(sink, "c")
    assert [(ts - replay[0].base_ms) // TASK_WIDTH_MS for _, ts in c] == [2, 1]
    assert c[0][0] == versions(clean, "c")[0][0] != c[1][0]


def test_an_input_whose_block_a_twin_adopted_writes_above_that_block(make_sink, monkeypatch, tmp_path) -> None:
    """Only D's input wrote before, but B's replay claims first and its fingerprint matches
    D's one claim: B adopts D's block. D's replay then finds its fingerprint on a block its
    own plan adopted (it may hold D's earlier cells) and writes above it."""
    opts = {"op.column": "op", "sink.buffer-flush.max-rows": "2"}
    sink = make_sink(OPS, **opts)
    crash_after_second_flush(sink, monkeypatch, tmp_path, INPUT_D, partition=1, plan="p1")  # block 1: c = 7
    replay = [sink.task(INPUT_B, batch=0, partition=0, plan="p2"), sink.task(INPUT_D, batch=0, partition=1, plan="p2")]
    sink.commit(replay, 0)
    assert_reads_equal_a_clean_run(sink, make_sink, opts)
    assert [block_of(m) for m in replay] == [1, 3]


# Limit 3: one Kafka partition split over two tasks (minPartitions); "k" is in both, so
# Kafka order ends with k = 2 (the later split). The splits' fingerprints differ.
SPLIT_1 = [row("k", 1), row("e", 1)]
SPLIT_2 = [row("k", 2), row("f", 1)]


def test_limit_3_a_replay_may_put_the_earlier_minpartitions_split_on_top(make_sink) -> None:
    """Limit 3 of docs/hbase-guarantees.md, pinned as it is: a replayed split that wrote
    before keeps its block, one that had not goes above it, so the earlier split's value
    wins where Kafka order ends with the later one's. Ordering them needs the splits'
    offsets, which a write task does not see. When this changes, the page must too."""
    sink = make_sink(OPS, **{"op.column": "op"})
    sink.task(SPLIT_2, batch=0, partition=1, plan="p1")  # the later split wrote; the earlier had not started
    replay = [sink.task(SPLIT_1, batch=0, partition=0, plan="p2"), sink.task(SPLIT_2, batch=0, partition=1, plan="p2")]
    assert [block_of(m) for m in replay] == [2, 1]  # split 2 kept its block, split 1 went above it
    sink.commit(replay, 0)
    assert {r["id"]: r["v"] for r in sink.read()} == {"k": 1, "e": 1, "f": 1}  # k = 2 in Kafka order


def test_a_claim_is_written_as_the_previous_release_wrote_it_unless_adopted() -> None:
    """``adopted`` is written only when true: a downgraded build, which rejects fields it
    does not know, still reads every claim a first attempt made."""
    from sparkbarrier.connectors.hbase._commit_table import BlockClaim

    first = BlockClaim(1_000, 2, "f" * 32, "plan", 3)
    assert first.to_bytes() == (b'{"base_ms":1000,"block":2,"fingerprint":"' + b"f" * 32
                                + b'","plan":"plan","task":3,"version":2}')
    adopted = BlockClaim(1_000, 2, "f" * 32, "plan", 3, adopted=True)
    assert b'"adopted":true' in adopted.to_bytes()
    assert [BlockClaim.from_bytes(c.to_bytes()) for c in (first, adopted)] == [first, adopted]

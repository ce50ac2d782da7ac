"""barrier-hbase when it is not alone, against the devstack's HBase: copies of a task at once,
late tasks of older batches, other writers in the same table, a driver whose clock is behind.

Each case is judged against a sink that ran the same batches once, without company: the
plain scan and every cell's versions (values; timestamps differ between the two sinks).
"""

from __future__ import annotations

import random
from typing import Any

import happybase
import pyarrow as pa
import pytest

from sparkbarrier._exceptions import FencedError, FlushError
from sparkbarrier.connectors.hbase.sink._buffer import FAULT_AFTER_PARTIAL_FLUSH, MutationBuffer
from sparkbarrier.connectors.hbase.client._connection import HBaseConnection
from sparkbarrier.connectors.hbase.sink._timestamps import TASK_WIDTH_MS
from sparkbarrier.connectors.hbase.sink._writer import HBaseTaskWriter, TaskIdentity
from sparkbarrier.devstack.faults import FAULT_ENV, FAULT_STATE_DIR_ENV

pytestmark = [pytest.mark.hbase]

OPS = pa.schema([("id", pa.string()), ("v", pa.int64()), ("s", pa.string()), ("op", pa.string())])
FLUSH = {"op.column": "op", "sink.buffer-flush.max-rows": "3"}


def batch_rows(rnd: random.Random, prefix: str, n: int = 24) -> list[dict[str, Any]]:
    """Upserts and deletes over a few hot keys: every key is written in several flushes."""
    rows = []
    for i in range(n):
        key = f"{prefix}k{rnd.randrange(4)}"
        if rnd.random() < 0.2:
            rows.append({"id": key, "v": None, "s": None, "op": "delete"})
        else:
            rows.append({"id": key, "v": i, "s": rnd.choice([None, "x", f"s{i}"]), "op": None})
    return rows


def every_version(sink: Any, prefix: bytes = b"") -> dict[tuple[bytes, bytes], list[bytes]]:
    """Each cell's version values, newest first, keyed without ``prefix``."""
    conn = happybase.Connection(sink.opts.host, sink.opts.port)
    try:
        table = conn.table(sink.opts.table)
        return {(key[len(prefix):], column): table.cells(key, column, versions=1000)
                for key, data in table.scan(row_prefix=prefix or None) for column in data}
    finally:
        conn.close()


@pytest.mark.timeout(240)
def test_two_copies_of_a_task_whose_flushes_land_in_any_order_leave_what_one_copy_leaves(
        make_sink, monkeypatch) -> None:
    """Speculation, a lost executor that still runs, a mutation retried through another gateway
    whose first try lands late: every mutation call of two copies of one task, in 12 drawn
    orders (some sent twice, some after the commit), leaves what one copy leaves."""
    sink, clean = make_sink(OPS, **FLUSH), make_sink(OPS, **FLUSH)
    rnd = random.Random(40)
    sent: list[tuple[list[object], int]] = []
    send = MutationBuffer._send
    for order in range(12):
        rows = batch_rows(rnd, f"o{order}-")
        clean.commit([clean.task(rows, batch=order, plan="clean")], order)
        with monkeypatch.context() as m:
            m.setattr(MutationBuffer, "_send", lambda self, mutations, ts: sent.append((mutations, ts)))
            copies = [sink.task(rows, batch=order, plan=f"e{order:019d}") for _ in range(2)]
        assert copies[0].base_ms == copies[1].base_ms and len(sent) % 2 == 0
        calls = sent + rnd.sample(sent, len(sent) // 3)  # some land twice
        rnd.shuffle(calls)
        late = rnd.randrange(len(calls) + 1)
        conn = HBaseConnection(sink.opts, 0)
        try:
            def land(batch: list[tuple[list[object], int]]) -> None:
                for mutations, ts in batch:
                    conn.call(lambda c, mu=mutations, t=ts: c.client.mutateRowsTs(sink.opts.table.encode(), mu, t, {}))
            land(calls[:late])
            sink.commit(copies, order)
            land(calls[late:])  # after the commit
        finally:
            conn.close()
        sent.clear()
        prefix = f"o{order}-".encode()
        assert every_version(sink, prefix) == every_version(clean, prefix), f"order {order}"
    assert send is MutationBuffer._send


def stepped_writer(sink: Any, rows: list[dict[str, Any]], *, batch: int, plan: str,
                   partition: int = 0) -> HBaseTaskWriter:
    """A task that has begun and buffered its rows (nothing flushed yet): it flushes when told."""
    opts = sink.opts
    writer = HBaseTaskWriter(opts, TaskIdentity("q1", batch, partition, plan))
    writer.begin()
    big = MutationBuffer.__init__

    def no_limits(self: MutationBuffer, *a: Any, **k: Any) -> None:
        big(self, *a, **{**k, "max_rows": 10**9, "max_size": 10**12})

    MutationBuffer.__init__ = no_limits  # type: ignore[method-assign]
    try:
        writer.add(pa.RecordBatch.from_pylist(rows, schema=OPS))
    finally:
        MutationBuffer.__init__ = big  # type: ignore[method-assign]
    return writer


def test_a_late_task_of_batch_n_after_n_plus_1_and_n_plus_2_committed_writes_nothing(make_sink) -> None:
    """A speculative copy launched just before its stage ended, or a dead driver's task whose read
    stalled: one that starts late is fenced where it places; one that had begun is fenced at
    its next flush note. Either way the table is what the three batches left."""
    sink = make_sink(OPS, **FLUSH)
    put = lambda key, v: {"id": key, "v": v, "s": None, "op": None}  # noqa: E731
    delete = {"id": "a", "v": None, "s": None, "op": "delete"}
    begun = stepped_writer(sink, [delete, put("b", 9)], batch=0, plan="e0000000000000000001")
    sink.commit([sink.task([delete, put("b", 1)], batch=0, plan="e0000000000000000001")], 0)
    sink.commit([sink.task([put("a", 2)], batch=1, plan="e0000000000000000002")], 1)
    sink.commit([sink.task([put("a", 3), put("b", 3)], batch=2, plan="e0000000000000000003")], 2)
    before = every_version(sink)
    with pytest.raises(FencedError, match="leftover"):
        sink.task([delete, put("b", 1)], batch=0, plan="e0000000000000000001")
    with pytest.raises(FencedError, match="replaced"):
        begun.snapshot(final=True)
    assert every_version(sink) == before
    assert sink.plain() == {b"a": {b"d:v": (3).to_bytes(8, "big", signed=True)},
                            b"b": {b"d:v": (3).to_bytes(8, "big", signed=True)}}


@pytest.mark.timeout(180)
def test_a_replay_removes_only_its_own_cells_beside_another_sink_and_a_plain_client(
        make_sink, unique_name, monkeypatch, tmp_path) -> None:
    """One table, two sinks (columns d:v/d:s and d:w) and a plain client writing other rows and
    the same rows' d:c, some at exactly the abandoned attempt's timestamps. Sink A is killed
    mid-write twice and replayed (its replays move rows to other task ids); every version of
    the plain client and of sink B survives, and sink A ends as a run without failures."""
    table = unique_name("shared")
    a = make_sink(OPS, table=table, **FLUSH, **{"sink.id": f"{table}-a"})
    b = make_sink(pa.schema([("id", pa.string()), ("w", pa.int64())]), table=table,
                  **{"sink.id": f"{table}-b", "columns": "w=d:w"})
    clean = make_sink(OPS, **FLUSH)
    rnd = random.Random(3)
    inputs = [batch_rows(rnd, "", 12), batch_rows(rnd, "", 12)]
    plain = happybase.Connection(a.opts.host, a.opts.port)
    written: dict[tuple[bytes, bytes, int], bytes] = {}

    def client_writes(base: int) -> None:
        for n in range(6):
            ts = base + rnd.randrange(24)  # inside the attempt's first blocks
            for row, column in ((f"side-{n}".encode(), b"d:c"), (f"k{n % 4}".encode(), b"d:c"),
                                (f"side-{n}".encode(), b"d:v")):
                # in the sink's column an int64, as the sink's schema reads it
                value = ts.to_bytes(8, "big", signed=True) if column == b"d:v" else f"{row!r}@{ts}".encode()
                plain.table(table).put(row, {column: value}, timestamp=ts)
                written[(row, column, ts)] = value

    try:
        for batch, rows in enumerate(inputs):
            tasks = [rows[:6], rows[6:]]
            clean.commit([clean.task(part, batch=batch, partition=p, plan="clean")
                          for p, part in enumerate(tasks)], batch)
            plan = 3 * batch
            for kill in range(2):  # killed mid-write: the last task dies after its first flush
                plan += 1
                first = a.task(tasks[0], batch=batch, partition=kill, plan=f"e{plan:019d}")
                client_writes(first.base_ms)
                state = tmp_path / f"faults-{plan}"
                state.mkdir()
                monkeypatch.setenv(FAULT_ENV, f"{FAULT_AFTER_PARTIAL_FLUSH}@1")
                monkeypatch.setenv(FAULT_STATE_DIR_ENV, str(state))
                with pytest.raises(FlushError):
                    a.task(tasks[1], batch=batch, partition=1 - kill, plan=f"e{plan:019d}")
                monkeypatch.delenv(FAULT_ENV)
                monkeypatch.delenv(FAULT_STATE_DIR_ENV)
                b.commit([b.task([{"id": f"k{i}", "w": 10 * batch + i} for i in range(4)], batch=2 * batch + kill,
                                 query="qb", plan=f"e{plan:019d}")], 2 * batch + kill)
            plan += 1
            replay = [a.task(part, batch=batch, partition=p, plan=f"e{plan:019d}") for p, part in enumerate(tasks)]
            assert len(replay[0].abandoned) == 2
            a.commit(replay, batch)
        versions = {(row, column): plain.table(table).cells(row, column, versions=1000, include_timestamp=True)
                    for row, column, _ in written}
        for (row, column, ts), value in written.items():
            assert (value, ts) in versions[(row, column)], f"the plain client's {row!r} {column!r}@{ts} was deleted"
        assert {k: v for k, v in every_version(b).items() if k[1] == b"d:w"} == {
            (f"k{i}".encode(), b"d:w"): [(10 + i).to_bytes(8, "big", signed=True)] * 2
            + [i.to_bytes(8, "big", signed=True)] * 2 for i in range(4)}
        ours = {k: v for k, v in every_version(a).items() if k[1] in (b"d:v", b"d:s") and not k[0].startswith(b"side")}
        assert ours == every_version(clean)
        # A's committed view reads the table below A's read bound: the plain client's rows in A's
        # column are in it, whatever A's abandoned attempts (their puts are removed, so no range
        # of the table is hidden from readers)
        side = {}
        for (row, column, ts), value in sorted(written.items(), key=lambda w: w[0][2]):
            if column == b"d:v":
                side[row.decode()] = value
        assert [r for r in a.read() if not r["id"].startswith("side")] == clean.read()
        assert {r["id"]: r["v"] for r in a.read() if r["id"].startswith("side")} == {
            k: int.from_bytes(v, "big", signed=True) for k, v in side.items()}
    finally:
        plain.close()


def test_a_driver_whose_clock_is_behind_neither_fences_the_live_attempt_nor_writes_below(
        make_sink, monkeypatch) -> None:
    """The restarted driver's clock is an hour behind the dead one's (the clock hook, not the
    system clock): plans are ordered by epochs, so the dead driver's leftover is fenced and the
    replay's attempt starts above everything written before."""
    from sparkbarrier.connectors.hbase.sink import _timestamps

    sink, clean = make_sink(OPS, **FLUSH), make_sink(OPS, **FLUSH)
    rows = [{"id": "a", "v": 1, "s": None, "op": None}, {"id": "b", "v": 2, "s": "x", "op": None}]
    dead = sink.task(rows, batch=0, plan="e0000000000000000007")  # the dead driver's plan, its clock ahead
    monkeypatch.setenv(_timestamps.CLOCK_OFFSET_ENV, str(-3_600_000))
    replay = sink.task(rows, batch=0, plan="e0000000000000000008")
    # the floor: what the dead attempt's try noted (task 0, keyed, block 0), not the clock
    assert replay.abandoned == [dead.base_ms] and replay.base_ms == dead.base_ms + TASK_WIDTH_MS
    with pytest.raises(FencedError, match="leftover"):
        sink.task(rows, batch=0, partition=1, plan="e0000000000000000007")
    sink.commit([replay], 0)
    nxt = sink.task([{"id": "a", "v": 5, "s": None, "op": None}], batch=1, plan="e0000000000000000009")
    sink.commit([nxt], 1)
    assert nxt.base_ms >= replay.ts_end  # the floor, not the clock
    clean.commit([clean.task(rows, batch=0, plan="c")], 0)
    clean.commit([clean.task([{"id": "a", "v": 5, "s": None, "op": None}], batch=1, plan="c")], 1)
    assert every_version(sink) == every_version(clean)
    assert sink.read(as_of_batch=0) == clean.read(as_of_batch=0) and sink.read() == clean.read()

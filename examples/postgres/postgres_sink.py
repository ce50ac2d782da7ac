"""An exactly-once PostgreSQL sink in ~130 lines: ``TwoPhaseCommitSink`` + ``PREPARE TRANSACTION``.

The pattern of Flink's JDBC exactly-once sink (XA), written against sparkbarrier's
checkpointed-sink API:

* executor, per snapshot: ``BEGIN``, ``COPY`` the rows into ``table``, ``PREPARE
  TRANSACTION '<gid>'`` — durable, invisible, and it survives the task's death. The gid
  is the handle sent to the driver (``sb:<sink>:<query>:<batch>:<partition>:<nonce>``).
* driver, on the completed micro-batch: record the *decision* (the batch's gids and the
  Kafka offsets it covers) in ``sparkbarrier_pg_commits`` once, then ``COMMIT PREPARED``
  every decided gid still prepared and ``ROLLBACK PREPARED`` every other prepared gid of
  the batch (task attempts that lost, or a replay after the decision). A replay after a
  crash at any point therefore ends with exactly the decided transactions committed.
* driver, on abort: ``ROLLBACK PREPARED`` the batch's handles.

Options: ``dsn`` (libpq connection string), ``table`` (created at query start from the
stream's columns if missing), ``sink.id`` (names the sink in gids and decisions).
Register with ``sparkbarrier.checkpointed_sink(spark, "pg-exactly-once", PostgresSink)``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from sparkbarrier.barrier import CompletedCheckpoint, TwoPhaseCommitSink

__all__ = ["PostgresSink", "DECISIONS"]

DECISIONS = "sparkbarrier_pg_commits"
_PG_TYPES = {"string": "text", "bigint": "bigint", "int": "integer", "binary": "bytea", "double": "double precision",
             "boolean": "boolean", "timestamp": "timestamptz"}


def _connect(dsn: str, **kw: Any) -> Any:
    import psycopg

    return psycopg.connect(dsn, **kw)


def _data_columns(names: Sequence[str]) -> list[str]:
    return [n for n in names if not n.startswith("_barrier_")]


class PostgresSink(TwoPhaseCommitSink[Any]):
    """Appends every row of the stream to ``table`` exactly once (no key needed)."""

    def __init__(self) -> None:
        self.dsn = self.sink_id = self.table = ""

    # -- planning worker, query start (before any task writes) -----------------

    def validate(self, options: Mapping[str, str], schema: Any) -> None:
        for key in ("dsn", "table", "sink.id"):
            if not options.get(key):
                raise ValueError(f"option {key!r} is required by the PostgreSQL example sink")
        cols = ", ".join(f'"{f.name}" {_PG_TYPES.get(f.dataType.simpleString(), "text")}'
                         for f in schema.fields if not f.name.startswith("_barrier_"))
        with _connect(options["dsn"], autocommit=True) as conn:
            conn.execute(f'CREATE TABLE IF NOT EXISTS "{options["table"]}" ({cols})')
            conn.execute(f"CREATE TABLE IF NOT EXISTS {DECISIONS} (sink text, query text, batch bigint, "
                         "gids jsonb, offsets jsonb, PRIMARY KEY (sink, query, batch))")

    # -- commit worker, once per query run, before its first commit or abort ---

    def start(self, options: Mapping[str, str], schema: Any) -> None:
        self.dsn, self.sink_id, self.table = options["dsn"], options["sink.id"], options["table"]

    # -- executor ------------------------------------------------------------

    def begin_transaction(self) -> Any:
        ctx = self.context
        assert ctx is not None
        prefix = _prefix(ctx.options["sink.id"], ctx.query_id, ctx.batch_id)
        conn = _connect(ctx.options["dsn"])
        gid = f"{prefix}{ctx.partition_id}:{uuid.uuid4().hex}"
        conn.tpc_begin(gid)
        return conn, gid

    def write(self, txn: Any, batch: pa.RecordBatch) -> None:
        conn, _gid = txn
        cols = _data_columns(batch.schema.names)
        table = self.context.options["table"] if self.context else ""
        names = ", ".join(f'"{c}"' for c in cols)
        with conn.cursor().copy(f'COPY "{table}" ({names}) FROM STDIN') as copy:
            for row in zip(*(batch.column(c).to_pylist() for c in cols)):
                copy.write_row(row)

    def pre_commit(self, txn: Any) -> str:
        conn, gid = txn
        conn.tpc_prepare()
        conn.close()
        return gid

    # -- driver ----------------------------------------------------------------

    def commit(self, handles: Sequence[Any], completed: CompletedCheckpoint) -> None:
        sink, query, batch = self.sink_id, completed.query_id, completed.batch_id
        with _connect(self.dsn, autocommit=True) as conn:
            conn.execute(f"INSERT INTO {DECISIONS} VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                         (sink, query, batch, json.dumps(list(handles)), json.dumps(dict(completed.source_offsets))))
            decided = set(conn.execute(f"SELECT gids FROM {DECISIONS} WHERE sink=%s AND query=%s AND batch=%s",
                                       (sink, query, batch)).fetchone()[0])
            for gid in _prepared(conn, _prefix(sink, query, batch)):
                _finish(conn, gid, commit=gid in decided)

    def abort(self, handles: Sequence[Any], batch_id: int) -> None:
        if not handles:
            return
        with _connect(self.dsn, autocommit=True) as conn:
            prepared = set(_prepared(conn, "sb:"))
            for gid in handles:
                if gid in prepared:
                    _finish(conn, gid, commit=False)


def _prefix(sink: str, query: str, batch: int) -> str:
    return f"sb:{sink}:{query}:{batch}:"


def _prepared(conn: Any, prefix: str) -> list[str]:
    rows = conn.execute("SELECT gid FROM pg_prepared_xacts WHERE starts_with(gid, %s) ORDER BY gid", (prefix,))
    return [r[0] for r in rows]


def _finish(conn: Any, gid: str, *, commit: bool) -> None:
    """COMMIT/ROLLBACK PREPARED take a literal, not a parameter."""
    literal = "'" + gid.replace("'", "''") + "'"
    conn.execute(("COMMIT PREPARED " if commit else "ROLLBACK PREPARED ") + literal)

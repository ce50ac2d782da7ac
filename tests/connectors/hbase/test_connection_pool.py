"""The sink's Thrift connections are kept in the worker between tasks and commits (``_connection_pool``).

Against the devstack's gateways: a task or commit that finished cleanly leaves its
connection for the next one with the same options and spreading index; one that failed
closes it; a kept connection whose socket died meanwhile (the Thrift server's idle
cleaner, a gateway restart) reconnects on its next call, and what is written stays
exactly what the tasks were given.
"""

from __future__ import annotations

import logging
import socket

import pyarrow as pa
import pytest

from sparkbarrier.connectors.checkpointed._driver_commit import completed_checkpoint
from sparkbarrier.connectors.hbase.client._connection_pool import POOL, _key

pytestmark = [pytest.mark.hbase, pytest.mark.timeout(120)]

SCHEMA = pa.schema([("id", pa.string()), ("v", pa.int64())])


def _rows(batch: int) -> list[dict[str, object]]:
    return [{"id": f"k{i}", "v": batch * 10 + i} for i in range(4)]


def _commit(sink, msgs, batch: int) -> None:
    """Commit as Spark's commit worker does (``notify_checkpoint_complete``, which keeps the connection)."""
    reports = [sink._reports[id(m)] for m in msgs]
    sink.driver.notify_checkpoint_complete(batch, completed_checkpoint(reports, batch))


def test_clean_tasks_and_commits_hand_their_connection_on(make_sink) -> None:
    POOL.close()
    sink = make_sink(SCHEMA)  # its query-start check kept its connection (spreading index 0)
    assert len(POOL) == 1
    hits = POOL.hits
    _commit(sink, [sink.task(_rows(0), batch=0, partition=0, plan="p0")], 0)
    assert len(POOL) == 1  # the check's connection served the task, the task's the commit, then came back
    assert POOL.hits == hits + 2
    for batch in (1, 2):
        msgs = [sink.task(_rows(batch), batch=batch, partition=p, plan=f"p{batch}") for p in (0, 1)]
        _commit(sink, msgs, batch)
    assert len(POOL) == 2  # one per spreading index (partition 1 starts at its own gateway)
    assert POOL.hits == hits + 2 + 5  # of the last 6 takes, only partition 1's first was new
    assert sink.read() == [{"id": f"k{i}", "v": 20 + i} for i in range(4)]


def test_a_failed_task_closes_its_connection(make_sink) -> None:
    POOL.close()
    sink = make_sink(SCHEMA)
    with pytest.raises(Exception, match="row key"):
        sink.task([{"id": None, "v": 1}], batch=0, partition=0, plan="p0")
    assert len(POOL) == 0


def test_a_kept_connection_whose_socket_died_reconnects(make_sink, caplog) -> None:
    caplog.set_level(logging.INFO, logger="sparkbarrier.connectors.hbase.client._connection")
    POOL.close()
    sink = make_sink(SCHEMA)
    _commit(sink, [sink.task(_rows(0), batch=0, partition=0, plan="p0")], 0)
    key = _key(sink.opts, 0)
    kept = POOL.take(key)
    assert kept is not None and kept._conn is not None
    kept._conn.transport.sock.shutdown(socket.SHUT_RDWR)  # as when the server closes it
    POOL.give(key, kept)
    msgs = [sink.task(_rows(1), batch=1, partition=0, plan="p1")]
    _commit(sink, msgs, 1)
    assert "reconnecting once" in caplog.text  # the dead socket was met, and replaced
    assert sink.read() == [{"id": f"k{i}", "v": 10 + i} for i in range(4)]

"""The sink's Thrift connections, kept in a Python worker between tasks and commits.

Why: every write task and every driver commit of ``barrier-hbase`` runs with a freshly
unpickled writer (Spark's Python sink API), and each opened its own connection: a TCP
connect per task and per commit (2 ms on loopback, measured inside Spark) and, on a
secured cluster, a TLS handshake or a SASL/GSSAPI exchange on top, in every
micro-batch. HBase's own clients share one connection per process for the same reason.

A connection is keyed by every connection option (``HBaseConnectionOptions``, the
Kerberos and TLS settings included: paths and names, nothing secret) and by the task's
spreading index, which picks its first gateway, so a changed option or another
partition never gets it. It goes back only when its work finished cleanly (a task's
last flush, a commit); a task or commit that failed closes its connection, so a socket
left in an unknown state by an error is never used again. Kept for :data:`IDLE_S`,
below the Thrift server's 60 s idle cleaner; should the server close one anyway (a
gateway restart), its next call reconnects as any connection does
(:meth:`~._connection.GatewayConnection.call`: every call made through it is
idempotent or re-read after a retry). Nothing about a batch lives here: every task
still reads the commit row and every commit checks-and-puts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable

from ..._idle_pool import IdlePool
from ._connection import HBaseConnection
from ._options import HBaseConnectionOptions

__all__ = ["CAPACITY", "IDLE_S", "POOL", "connect", "release"]

IDLE_S = 50.0
CAPACITY = 16
POOL: IdlePool[HBaseConnection] = IdlePool(IDLE_S, CAPACITY, what="HBase Thrift connection")

_FIELDS = tuple(f.name for f in dataclasses.fields(HBaseConnectionOptions))


def _key(opts: HBaseConnectionOptions, spread_index: int) -> Hashable:
    return (tuple(getattr(opts, name) for name in _FIELDS), spread_index)


def connect(opts: HBaseConnectionOptions, spread_index: int = 0) -> HBaseConnection:
    """A kept connection made with the same options and index, else a new (lazy) one."""
    return POOL.take(_key(opts, spread_index)) or HBaseConnection(opts, spread_index)


def release(conn: HBaseConnection) -> None:
    """``conn`` finished its work cleanly: keep it for the next task or commit."""
    POOL.give(_key(conn.options, conn.spread_index), conn)

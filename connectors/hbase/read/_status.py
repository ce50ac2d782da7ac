"""The sink's status: the last commit of a ``sink.id`` and the attempt in flight above it.

Read from the commit table the sink's commit protocol writes (``_commit_table``), so
this package, which owns that format, is the one that reads it for the CLI and the
demo. Read-only; safe while the sink runs (the answer is then a past commit).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ...._exceptions import SinkError
from ..client._connection import HBaseConnection, connection_options
from ..client._gateways import describe
from ..client._sasl import KerberosSettings
from ..client._tls import TlsSettings
from ..sink._commit_table import read_state

__all__ = ["SinkStatus", "sink_status"]

_DEFAULTS = {"hbase.thrift.timeout": "15000", "hbase.thrift.failover.rounds": "1"}


@dataclass(frozen=True)
class SinkStatus:
    """The last commit of one ``sink.id`` and the attempt in flight above it, if any."""

    sink_id: str
    commit_table: str
    table: str
    seq: int
    query_id: str
    batch_id: int
    committed_at_ms: int
    checkpoint_ids: list[int]
    offsets: dict[str, int]
    gaps: int
    attempt_batch_id: int | None = None
    attempt_seq: int | None = None


def sink_status(host: str | None, port: int | None, sink_id: str, commit_table: str, *,
                kerberos: KerberosSettings | None = None, tls: TlsSettings | None = None,
                options: Mapping[str, str] | None = None) -> SinkStatus:
    """The commit record of ``sink_id`` in ``commit_table`` on the Thrift gateway(s).

    ``options``: any ``hbase.*`` option as the sink takes it (TLS, Kerberos, gateways,
    failover); ``host``, ``port``, ``kerberos`` and ``tls`` are shorthands for some of them.
    A status read gives up after one pass with a 15 s timeout unless the options say otherwise.

    Raises SinkError when the commit table does not exist or the sink has committed
    nothing (unknown ``sink.id``).
    """
    opts = connection_options(options, host=host, port=port, tls=tls, kerberos=kerberos, defaults=_DEFAULTS)
    conn = HBaseConnection(opts)
    where = describe(opts.gateways)
    try:
        tables = conn.call(lambda c: c.tables())
        if commit_table.encode() not in tables:
            raise SinkError(f"commit table {commit_table!r} does not exist on HBase {where}")
        state = read_state(conn, commit_table, sink_id)
    finally:
        conn.close()
    commit = state.commit
    if commit is None:
        raise SinkError(f"sink {sink_id!r} has no commit in {commit_table!r} on {where} "
                        "(unknown sink.id, or nothing committed yet)")
    attempt = state.attempt
    in_flight = (attempt is not None and attempt.prev_seq == commit.seq
                 and (attempt.query_id, attempt.batch_id) != (commit.query_id, commit.batch_id))
    return SinkStatus(
        sink_id=commit.sink_id, commit_table=commit_table, table=commit.table, seq=commit.seq,
        query_id=commit.query_id, batch_id=commit.batch_id, committed_at_ms=commit.committed_at_ms,
        checkpoint_ids=list(commit.source_checkpoints), offsets=dict(commit.offsets),
        gaps=len(commit.gaps),
        attempt_batch_id=attempt.batch_id if in_flight and attempt else None,
        attempt_seq=commit.seq + 1 if in_flight else None,
    )

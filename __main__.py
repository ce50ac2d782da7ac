"""``python -m sparkbarrier status|lineage``: where a barrier pipeline stands, and where a cell came from.

It composes the public readers of the packages that own the data:
``connectors.kafka`` (consumer group, Spark's offset log) and ``connectors.hbase``
(commit table, lineage).

Examples::

    python -m sparkbarrier status --group orders-etl --topic orders
    python -m sparkbarrier status --sink-id orders --commit-table my_commits
    python -m sparkbarrier status --group g --sink-id s --checkpoint-location /ckpt --json
    python -m sparkbarrier lineage --table orders --row order-17 [--column d:amount] [--versions 5]

Endpoints come from ``--bootstrap`` / ``--hbase`` or ``SPARKBARRIER_KAFKA_BOOTSTRAP`` /
``SPARKBARRIER_HBASE_THRIFT`` (``eval "$(python -m sparkbarrier.devstack env)"`` sets them
for the local devstack). HBase takes the sink's own ``hbase.*`` options
(``--hbase-option hbase.thrift.tls=true``, or a file of them with ``--hbase-config``), so
TLS, Kerberos, gateway lists and failover mean what they mean in the sink. Exit status: 0 shown,
1 something asked for was not found or unreachable, 2 usage error. This module is a CLI, so it writes to stdout/stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, overload

from ._endpoints import HBASE_ENV, KAFKA_ENV
from ._exceptions import ConfigError, SparkBarrierError

if TYPE_CHECKING:  # the connectors import pyspark and the clients: only when a command runs
    from .connectors.hbase import CellLineage, SinkStatus
    from .connectors.kafka import CheckpointLogStatus, GroupStatus, SparkBatch

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sparkbarrier", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    st = sub.add_parser("status", help="group offsets / lag, last sink commit, pending checkpoints")
    st.add_argument("--group", help="consumer group (kafka.group.id of the barrier-kafka source)")
    st.add_argument("--topic", action="append", help="topic to show (repeatable; default: the group's)")
    st.add_argument("--bootstrap", help=f"Kafka bootstrap servers (default ${KAFKA_ENV})")
    st.add_argument("--command-config", metavar="FILE",
                    help="Kafka client properties for a secured cluster, as Kafka's own tools "
                         "take them (security.protocol, sasl.*, ssl.truststore.*, ...)")
    st.add_argument("--sink-id", help="sink.id of the barrier-hbase sink")
    st.add_argument("--commit-table", help="commit table (default: barrier-hbase's, sparkbarrier_commits)")
    st.add_argument("--table", help="expected data table of the sink (checked against the commit record)")
    _add_hbase(st)
    st.add_argument("--checkpoint-location",
                    help="the query's Spark checkpoint (a local path or a URI: hdfs://, webhdfs://...): "
                         "last completed + pending batches")
    st.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    ln = sub.add_parser("lineage", help="which checkpoint wrote a row's cells, when, from which Kafka offsets")
    ln.add_argument("--table", required=True, help="data table written by barrier-hbase")
    ln.add_argument("--row", required=True, help="row key (UTF-8)")
    ln.add_argument("--column", help="family:qualifier (default: every column of the row)")
    ln.add_argument("--versions", type=int, default=1, help="versions per cell (default %(default)s)")
    ln.add_argument("--sink-id", help="sink.id (needed only when several sinks wrote the table)")
    ln.add_argument("--commit-table", help="commit table (default: barrier-hbase's, sparkbarrier_commits)")
    _add_hbase(ln)
    ln.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return parser


def _add_hbase(parser: argparse.ArgumentParser) -> None:
    """How to reach the gateways: the sink's ``hbase.*`` options, with shorthands for the common ones."""
    parser.add_argument("--hbase", help=f"HBase Thrift1 host:port, or a list h1:9090,h2:9090 "
                                        f"(hbase.thrift.host; default ${HBASE_ENV})")
    parser.add_argument("--hbase-option", action="append", metavar="KEY=VALUE", default=[],
                        help="any hbase.* option of the sink, e.g. hbase.thrift.tls=true, "
                             "hbase.thrift.tls.ca=/path/ca.pem (repeatable)")
    parser.add_argument("--hbase-config", metavar="FILE",
                        help="a properties file of hbase.* options (key=value lines)")
    parser.add_argument("--hbase-kerberos", action="store_true",
                        help="log in to the gateway with Kerberos (the ticket cache unless a keytab is given)")
    parser.add_argument("--hbase-kerberos-principal", help="client principal (hbase.thrift.kerberos.client.principal)")
    parser.add_argument("--hbase-kerberos-keytab", help="its keytab (hbase.thrift.kerberos.client.keytab)")
    parser.add_argument("--hbase-kerberos-service", default="hbase",
                        help="primary of the gateway's principal (default %(default)s)")


def _hbase_options(args: argparse.Namespace) -> dict[str, str]:
    """The ``hbase.*`` options from ``--hbase-config``, ``--hbase-option`` and the shorthand flags,
    checked now by the sink's specs (a bad one is a usage error naming it)."""
    options = _properties(args.hbase_config, "--hbase-config") if args.hbase_config else {}
    for item in args.hbase_option:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise _UsageError(f"--hbase-option takes KEY=VALUE, got {item.split('=')[0][:40]!r}")
        options[key.strip()] = value.strip()
    keys = {key.lower() for key in options}
    if args.hbase or "hbase.thrift.host" not in keys:
        options["hbase.thrift.host"] = _endpoint(args.hbase, HBASE_ENV, "HBase Thrift (--hbase)")
    if args.hbase_kerberos or args.hbase_kerberos_principal or args.hbase_kerberos_keytab:
        if args.hbase_kerberos_keytab and not args.hbase_kerberos_principal:
            raise _UsageError("--hbase-kerberos-keytab needs --hbase-kerberos-principal")
        options.update({"hbase.thrift.authentication": "kerberos",
                        "hbase.thrift.kerberos.service": args.hbase_kerberos_service,
                        "hbase.thrift.kerberos.client.principal": args.hbase_kerberos_principal or "",
                        "hbase.thrift.kerberos.client.keytab": args.hbase_kerberos_keytab or ""})
    from .connectors.hbase import parse_connection_options

    try:
        parse_connection_options(options, source_name="sparkbarrier CLI's HBase")
    except ConfigError as exc:
        raise _UsageError(str(exc)) from None
    return options


class _UsageError(Exception):
    pass


@overload
def as_json(obj: None) -> None: ...


@overload
def as_json(obj: GroupStatus | SinkStatus | CheckpointLogStatus | CellLineage) -> dict[str, object]: ...


def as_json(obj: GroupStatus | SinkStatus | CheckpointLogStatus | CellLineage | None) -> dict[str, object] | None:
    """Plain JSON form of the status dataclasses (for ``--json``).

    Values are what ``asdict`` gives, not yet :data:`~.state._json.Json`: a cell's value
    is still bytes, which the caller encodes.
    """
    if obj is None:
        return None
    data = asdict(obj)
    from .connectors.kafka import GroupStatus

    if isinstance(obj, GroupStatus):
        data["last_checkpoint_id"] = obj.last_checkpoint_id
        data["last_batch_id"] = obj.last_batch_id
        data["total_lag"] = obj.total_lag
    return data


def _endpoint(flag: str | None, env: str, what: str) -> str:
    value = flag or os.environ.get(env)
    if not value:
        raise _UsageError(f"no {what} endpoint: pass the flag or set {env} "
                          "(for the devstack: eval \"$(python -m sparkbarrier.devstack env)\")")
    return value


def _when(ms: int | None) -> str:
    if not ms:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) + f".{ms % 1000:03d}"


def _table(headers: list[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [headers] + [["-" if v is None else str(v) for v in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(v.rjust(w) if i else v.ljust(w) for i, (v, w) in enumerate(zip(r, widths, strict=True)))
             for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _completed(checkpoint_id: int | None, batch_id: int | None) -> str | None:
    """``checkpoint N`` (barrier-kafka) or ``batch N`` (Spark's batch, spark-kafka): each
    id under its own name."""
    named = []
    if checkpoint_id is not None:
        named.append(f"checkpoint {checkpoint_id}")
    if batch_id is not None:
        named.append(f"batch {batch_id}")
    return ", ".join(named) or None


def _render_group(g: GroupStatus) -> str:
    head = (f"consumer group {g.group}: last completed "
            f"{_completed(g.last_checkpoint_id, g.last_batch_id) or '-'}, total lag {g.total_lag}")
    rows = [[p.topic, p.partition, p.committed, p.end, p.lag, _completed(p.checkpoint_id, p.batch_id),
             _when(p.checkpoint_timestamp_ms)] for p in g.partitions]
    headers = ["topic", "partition", "committed", "end", "lag", "committed for", "metadata time"]
    return head + "\n" + _table(headers, rows)


def _render_sink(s: SinkStatus) -> str:
    head = (f"sink {s.sink_id} -> table {s.table} (commit table {s.commit_table}): last commit seq {s.seq}, "
            f"Spark batch {s.batch_id}, at {_when(s.committed_at_ms)}, checkpoints "
            f"{s.checkpoint_ids[-3:] if s.checkpoint_ids else '-'}, gaps {s.gaps}")
    if s.attempt_seq is not None:
        head += f"\n  in flight: batch {s.attempt_batch_id} (seq {s.attempt_seq}), not committed"
    rows = [[ch, off] for ch, off in sorted(s.offsets.items())]
    return head + "\n" + _table(["source channel", "next offset covered"], rows)


def _spark_batch(b: SparkBatch) -> str:
    """``batch N (checkpoint M)``; Spark's own source plans no checkpoint, so just ``batch N``."""
    return f"batch {b.batch_id}" + (f" (checkpoint {b.checkpoint_id})" if b.checkpoint_id is not None else "")


def _render_log(c: CheckpointLogStatus) -> str:
    last = c.last_completed
    head = f"Spark checkpoint {c.location}: last completed " + (_spark_batch(last) if last else "-")
    pend = ", ".join(_spark_batch(b) for b in c.pending) or "none"
    rows = [[ch, off] for ch, off in sorted(last.offsets.items())] if last else []
    return head + f"\npending checkpoints: {pend}\n" + _table(["source channel", "completed offset"], rows)


def _status(args: argparse.Namespace) -> int:
    from .connectors.hbase import sink_status
    from .connectors.kafka import checkpoint_log_status, client_settings, group_status

    if not (args.group or args.sink_id or args.checkpoint_location):
        raise _UsageError("status needs --group, --sink-id and/or --checkpoint-location")
    group: GroupStatus | None = None
    sink: SinkStatus | None = None
    log: CheckpointLogStatus | None = None
    if args.group:
        bootstrap = _endpoint(args.bootstrap, KAFKA_ENV, "Kafka (--bootstrap)")
        settings = client_settings(_properties(args.command_config, "--command-config")) if args.command_config else {}
        group = group_status(bootstrap, args.group, args.topic, settings, allow_empty=bool(args.checkpoint_location))
    elif args.topic:
        raise _UsageError("--topic needs --group")
    if args.sink_id:
        sink = sink_status(None, None, args.sink_id, _commit_table(args), options=_hbase_options(args))
        if args.table and sink.table != args.table:
            raise SparkBarrierError(f"sink {args.sink_id!r} writes table {sink.table!r}, not {args.table!r}")
    if args.checkpoint_location:
        log = checkpoint_log_status(args.checkpoint_location)
    behind = _group_behind(group, log)
    if args.json:
        payload: dict[str, object] = {k: as_json(v) for k, v in
                                      (("group", group), ("sink", sink), ("checkpoint_log", log)) if v is not None}
        if group is not None and log is not None:
            payload["group_behind_checkpoint"] = behind
        if log is None:
            payload["pending_checkpoints"] = None  # not readable without Spark's checkpoint dir
        print(json.dumps(payload, indent=2, sort_keys=True))
        return 0
    parts = []
    if group is not None:
        parts.append(_render_group(group))
    if sink is not None:
        parts.append(_render_sink(sink))
    if log is not None:
        parts.append(_render_log(log))
        if behind:
            parts.append(behind)
    else:
        parts.append("pending checkpoints: not available (the source keeps its pending ledger in the "
                     "driver's memory; pass --checkpoint-location to read Spark's offset log)")
    print("\n\n".join(parts))
    return 0


def _properties(path: str, flag: str) -> dict[str, str]:
    """Java ``.properties`` (``key=value``, ``#``/``!`` comments, ``\\`` continuations, as
    JAAS lines are often written); the values are secrets and never printed."""
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
    except OSError as exc:
        raise _UsageError(f"{flag}: cannot read {path!r} ({exc.strerror})") from None
    out: dict[str, str] = {}
    logical = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\"):
            logical += line[:-1] + " "
            continue
        logical += line
        key, sep, value = logical.partition("=")
        if not sep:
            key, sep, value = logical.partition(":")
        if not sep:
            raise _UsageError(f"{flag}: {path!r} has a line without '=': "
                              f"{key.strip()[:40]!r}")
        out[key.strip()] = value.strip()
        logical = ""
    return out


def _group_behind(group: GroupStatus | None, log: CheckpointLogStatus | None) -> str | None:
    """A line when the group's commits lag Spark's completed batches (commits failing).

    Compared by the id the group holds: barrier-kafka's checkpoint id against the one in
    Spark's offset log; for Spark's own source (spark-kafka), whose offset log has no
    checkpoint id, Spark's batch id against the last completed batch.
    """
    if group is None or log is None or log.last_completed is None:
        return None
    last = log.last_completed
    if last.checkpoint_id is None:
        what, done, held = "batch", last.batch_id, group.last_batch_id
    else:
        what, done, held = "checkpoint", last.checkpoint_id, group.last_checkpoint_id
    if held is not None and held >= done:
        return None
    return (f"group {group.group} is behind Spark's checkpoint: it holds {what} "
            f"{held if held is not None else '-'}, Spark completed {what} {done}; commits to "
            f"the group are failing or not yet made (the driver log says why: "
            f"'committing {what} ... failed'; records still flow, Spark's checkpoint decides)")


def _commit_table(args: argparse.Namespace) -> str:
    from .connectors.hbase import DEFAULT_COMMIT_TABLE

    return args.commit_table or DEFAULT_COMMIT_TABLE


def _lineage(args: argparse.Namespace) -> int:
    from .connectors.hbase import lineage

    cells = lineage(None, None, args.table, args.row, column=args.column, sink_id=args.sink_id,
                    commit_table=_commit_table(args), versions=args.versions, options=_hbase_options(args))
    if not cells:
        raise SparkBarrierError(f"row {args.row!r} of table {args.table!r} has no cells")
    if args.json:
        print(json.dumps([dict(as_json(c), value=c.value.hex(), committed=c.committed) for c in cells],
                         indent=2, sort_keys=True))
        return 0
    rows = [[c.column, c.timestamp_ms, _when(c.timestamp_ms), c.batch_id if c.committed else "not ours/in flight",
             c.seq, _when(c.committed_at_ms),
             ", ".join(f"{ch} {c.offsets_from.get(ch, '-')}..{to}" for ch, to in sorted(c.offsets_to.items()))]
            for c in cells]
    print(f"row {args.row!r} of table {args.table!r}")
    print(_table(["column", "timestamp", "written at", "Spark batch", "sink seq", "committed at",
                  "Kafka offsets covered"], rows))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _lineage(args) if args.command == "lineage" else _status(args)
    except _UsageError as exc:
        print(f"sparkbarrier: {exc}", file=sys.stderr)
        return 2
    except SparkBarrierError as exc:
        print(f"sparkbarrier: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

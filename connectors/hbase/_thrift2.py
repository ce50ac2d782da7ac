"""A minimal admin client for HBase's Thrift2 server (``THBaseService``).

Why a second gateway: Thrift1 (happybase) can neither set nor read a family's
``KEEP_DELETED_CELLS``, which the sink needs so that a time-range read gives an exact
"as of T" view that newer delete markers do not mask. Thrift2 can (``createTable`` /
``getTableDescriptor``); it also lists region boundaries and deletes one exact cell
version (``DELETE_COLUMN`` with a timestamp), which Thrift1's ``deleteAllTs`` cannot.

Why an own IDL subset: only these few calls are needed, and a subset with HBase's
field ids (checked against ``hbase-thrift-2.6.1.jar!/.../thrift2/hbase.thrift``) keeps
the wire format exact without shipping 1,100 lines of IDL. Unknown fields in
answers are skipped by the protocol, so the subset reads full descriptors safely.

Sockets are opened like happybase opens Thrift1 ones (``TSocket`` with a timeout in
ms, buffered or framed transport, binary or compact protocol, undecoded bytes).
"""

from __future__ import annotations

import io
import logging
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from thriftpy2.thrift import TClient

from ..._exceptions import SinkError
from ._errors import OPEN_ERRORS, SERVER_ERRORS, TLS_ERRORS, refused, tls_error, unreachable

__all__ = [
    "FamilySpec",
    "FamilySettings",
    "KeepDeletedCells",
    "Thrift2Admin",
    "THRIFT2_IDL",
]

log = logging.getLogger(__name__)

# Field ids and types as in HBase 2.6.1's thrift2 hbase.thrift; only what the calls
# below send or read. ``string`` fields arrive as bytes (decode_response=False).
THRIFT2_IDL = """
enum TDeleteType { DELETE_COLUMN = 0, DELETE_COLUMNS = 1, DELETE_FAMILY = 2,
                   DELETE_FAMILY_VERSION = 3 }
enum TDurability { USE_DEFAULT = 0, SKIP_WAL = 1, ASYNC_WAL = 2, SYNC_WAL = 3, FSYNC_WAL = 4 }
enum TKeepDeletedCells { FALSE = 0, TRUE = 1, TTL = 2 }

struct TTimeRange {
  1: required i64 minStamp,
  2: required i64 maxStamp
}
struct TColumnValue {
  1: required binary family,
  2: required binary qualifier,
  3: required binary value,
  4: optional i64 timestamp
}
struct TResult {
  1: optional binary row,
  2: required list<TColumnValue> columnValues
}
struct TColumn {
  1: required binary family,
  2: optional binary qualifier,
  3: optional i64 timestamp
}
struct TDelete {
  1: required binary row,
  2: optional list<TColumn> columns,
  3: optional i64 timestamp,
  4: optional TDeleteType deleteType = 1,
  6: optional map<binary, binary> attributes,
  7: optional TDurability durability
}
struct TScan {
  1: optional binary startRow,
  2: optional binary stopRow,
  3: optional list<TColumn> columns,
  4: optional i32 caching,
  5: optional i32 maxVersions = 1,
  6: optional TTimeRange timeRange
}
struct TServerName {
  1: required string hostName,
  2: optional i32 port,
  3: optional i64 startCode
}
struct THRegionInfo {
  1: required i64 regionId,
  2: required binary tableName,
  3: optional binary startKey,
  4: optional binary endKey,
  5: optional bool offline,
  6: optional bool split,
  7: optional i32 replicaId
}
struct THRegionLocation {
  1: required TServerName serverName,
  2: required THRegionInfo regionInfo
}
struct TTableName {
  1: optional binary ns,
  2: required binary qualifier
}
struct TColumnFamilyDescriptor {
  1: required binary name,
  9: optional TKeepDeletedCells keepDeletedCells,
  10: optional i32 maxVersions,
  11: optional i32 minVersions,
  13: optional i32 timeToLive
}
struct TTableDescriptor {
  1: required TTableName tableName,
  2: optional list<TColumnFamilyDescriptor> columns,
  3: optional map<binary, binary> attributes,
  4: optional TDurability durability
}
exception TIOError {
  1: optional string message,
  2: optional bool canRetry
}
exception TIllegalArgument {
  1: optional string message
}

service THBaseService {
  i32 openScanner(1: required binary table, 2: required TScan tscan) throws (1: TIOError io)
  list<TResult> getScannerRows(1: required i32 scannerId, 2: i32 numRows = 1)
    throws (1: TIOError io, 2: TIllegalArgument ia)
  void closeScanner(1: required i32 scannerId) throws (1: TIOError io, 2: TIllegalArgument ia)
  list<TDelete> deleteMultiple(1: required binary table, 2: required list<TDelete> tdeletes)
    throws (1: TIOError io)
  list<THRegionLocation> getAllRegionLocations(1: required binary table)
    throws (1: TIOError io)
  TTableDescriptor getTableDescriptor(1: required TTableName table) throws (1: TIOError io)
  bool tableExists(1: TTableName tableName) throws (1: TIOError io)
  void createTable(1: required TTableDescriptor desc, 2: optional list<binary> splitKeys)
    throws (1: TIOError io)
}
"""

# thriftpy2 requires module names ending in ``_thrift``; loaded once per process.
_MODULE_NAME = "sparkbarrier_hbase_thrift2_thrift"
_lock = threading.Lock()
_module: ModuleType | None = None


def _idl() -> ModuleType:
    global _module
    with _lock:
        if _module is None:
            import thriftpy2

            _module = thriftpy2.load_fp(io.StringIO(THRIFT2_IDL), module_name=_MODULE_NAME)
        return _module


class KeepDeletedCells:
    """Values of ``TKeepDeletedCells`` (HBase's ``KeepDeletedCells``)."""

    FALSE = 0
    TRUE = 1
    TTL = 2


# HBase's "forever": a family created without TTL reports Integer.MAX_VALUE seconds.
FOREVER = 2**31 - 1


@dataclass(frozen=True)
class FamilySpec:
    """What ``create_table`` sets on one family; None leaves HBase's default."""

    max_versions: int | None = None
    keep_deleted_cells: int | None = None
    ttl_seconds: int | None = None
    min_versions: int | None = None


@dataclass(frozen=True)
class FamilySettings:
    """A family's settings as HBase reports them (``ttl_seconds`` FOREVER = no TTL)."""

    max_versions: int
    keep_deleted_cells: int
    ttl_seconds: int
    min_versions: int


def _text(value: bytes | str | None) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value or ""


def _bytes(value: bytes | str) -> bytes:
    return value.encode() if isinstance(value, str) else value


class Thrift2Admin:
    """One connection to a Thrift2 server; not thread-safe (one socket).

    ``transport``/``protocol`` must match the server (its defaults: buffered, binary).
    Every failure is a :class:`SinkError` naming ``host:port`` and what to do.
    """

    def __init__(self, host: str, port: int, *, timeout_ms: int = 60_000,
                 transport: str = "buffered", protocol: str = "binary", tls: Any = None,
                 kerberos: Any = None) -> None:
        from thriftpy2.protocol import TBinaryProtocol, TCompactProtocol
        from thriftpy2.transport import TBufferedTransport, TFramedTransport, TSocket

        transports = {"buffered": TBufferedTransport, "framed": TFramedTransport}
        protocols = {"binary": TBinaryProtocol, "compact": TCompactProtocol}
        if transport not in transports or protocol not in protocols:
            raise SinkError(f"Thrift2 transport/protocol {transport!r}/{protocol!r} unknown; "
                            f"use one of {sorted(transports)} / {sorted(protocols)}")
        self.host, self.port = host, port
        self._t = _idl()
        if kerberos is not None:  # SASL/GSSAPI (see ``_sasl``); the SASL layer frames itself
            from ._sasl import sasl_transport

            self._transport = sasl_transport(host, port, timeout_ms, kerberos)
        elif tls is not None:  # Thrift over HTTPS, the only TLS HBase offers (see ``_tls``)
            from ._tls import https_transport

            self._transport = https_transport(host, port, timeout_ms, tls)
        else:
            self._transport = transports[transport](
                TSocket(host=host, port=port, socket_timeout=timeout_ms))
        if kerberos is not None:
            from ._sasl import sasl_protocol

            self._client = TClient(self._t.THBaseService, sasl_protocol(protocol, self._transport))
        elif tls is not None:  # pure-Python protocol over a Python transport
            from ._tls import https_protocol

            self._client = TClient(self._t.THBaseService, https_protocol(protocol, self._transport))
        else:
            self._client = TClient(self._t.THBaseService,
                                   protocols[protocol](self._transport, decode_response=False))
        self._call("connect", self._transport.open)

    # ------------------------------------------------------------------ plumbing
    def _call(self, what: str, fn: Any, *args: Any) -> Any:
        """Run one call, turning its errors into one-line SinkErrors through the one map (``_errors``)."""
        where = f"HBase Thrift2 server {self.host}:{self.port}"
        try:
            return fn(*args)
        except TLS_ERRORS as exc:
            self.close()
            raise tls_error(where, exc, during=what) from exc
        except (self._t.TIOError, self._t.TIllegalArgument) as exc:
            raise refused(f"{where} refused {what}", exc, fix="check the table name and its families") from exc
        except OPEN_ERRORS as exc:
            self.close()
            raise unreachable(where, what, exc, "is the Thrift2 server (org.apache.hadoop.hbase.thrift2.ThriftServer) "
                              "running there with matching transport/protocol?") from exc
        except SERVER_ERRORS as exc:
            self.close()
            raise refused(f"{where} failed {what}", exc,
                          fix="check that the port serves Thrift2, not Thrift1") from exc

    def _table_name(self, name: str | bytes) -> Any:
        ns, sep, qualifier = _bytes(name).rpartition(b":")
        return self._t.TTableName(ns=ns if sep else None, qualifier=qualifier)

    # ------------------------------------------------------------------ admin
    def table_exists(self, name: str | bytes) -> bool:
        """Whether table ``name`` (``ns:table`` or ``table``) exists."""
        return bool(self._call("tableExists", self._client.tableExists, self._table_name(name)))

    def create_table(self, name: str | bytes, families: Mapping[str | bytes, FamilySpec], *,
                     split_keys: Sequence[bytes] = ()) -> None:
        """Create ``name`` with ``families``; ``split_keys`` pre-split it into regions."""
        columns = [
            self._t.TColumnFamilyDescriptor(
                name=_bytes(family), maxVersions=spec.max_versions,
                keepDeletedCells=spec.keep_deleted_cells, timeToLive=spec.ttl_seconds,
                minVersions=spec.min_versions)
            for family, spec in families.items()
        ]
        desc = self._t.TTableDescriptor(tableName=self._table_name(name), columns=columns)
        self._call("createTable", self._client.createTable, desc,
                   [_bytes(k) for k in split_keys] or None)

    def family_settings(self, name: str | bytes) -> dict[str, FamilySettings]:
        """Family name → its settings, read from the table descriptor."""
        desc = self._call("getTableDescriptor", self._client.getTableDescriptor,
                          self._table_name(name))
        result = {}
        for column in desc.columns or ():
            result[_text(column.name)] = FamilySettings(
                max_versions=column.maxVersions if column.maxVersions is not None else 1,
                keep_deleted_cells=(column.keepDeletedCells
                                    if column.keepDeletedCells is not None
                                    else KeepDeletedCells.FALSE),
                ttl_seconds=column.timeToLive if column.timeToLive is not None else FOREVER,
                min_versions=column.minVersions if column.minVersions is not None else 0,
            )
        return result

    def region_boundaries(self, name: str | bytes) -> list[tuple[bytes, bytes]]:
        """``(start, end)`` of every region, sorted by start; ``b""`` is open-ended."""
        locations = self._call("getAllRegionLocations", self._client.getAllRegionLocations,
                               _bytes(name))
        bounds = {(loc.regionInfo.startKey or b"", loc.regionInfo.endKey or b"")
                  for loc in locations}
        return sorted(bounds)

    def delete_versions(self, name: str | bytes,
                        cells: Iterable[tuple[bytes, bytes, bytes, int]]) -> None:
        """Delete exactly the given versions ``(row, family, qualifier, timestamp)``.

        Each becomes a ``DELETE_COLUMN`` (HBase ``Delete.addColumn(f, q, ts)``): older and
        newer versions of the same cell stay readable.
        """
        deletes = [
            self._t.TDelete(
                row=row, deleteType=self._t.TDeleteType.DELETE_COLUMN,
                columns=[self._t.TColumn(family=family, qualifier=qualifier, timestamp=ts)])
            for row, family, qualifier, ts in cells
        ]
        if deletes:
            self._call("deleteMultiple", self._client.deleteMultiple, _bytes(name), deletes)

    def versions_in_range(self, name: str | bytes, families: Sequence[bytes], lo: int, hi: int, *,
                          chunk: int = 1000) -> Iterator[list[tuple[bytes, bytes, bytes, int]]]:
        """Every live version with a timestamp in ``[lo, hi)``, as ``(row, family, qualifier, ts)``, in chunks.

        One server-side time-range scan (``TScan.timeRange``, all versions): only the
        versions in the range cross the wire, and versions deleted already do not come
        back, so a second pass after :meth:`delete_versions` finds nothing.
        """
        scan = self._t.TScan(columns=[self._t.TColumn(family=f) for f in families] or None, caching=chunk,
                             maxVersions=2**31 - 1, timeRange=self._t.TTimeRange(minStamp=lo, maxStamp=hi))
        scanner = self._call("openScanner", self._client.openScanner, _bytes(name), scan)
        try:
            while True:
                results = self._call("getScannerRows", self._client.getScannerRows, scanner, chunk)
                if not results:
                    return
                yield [(r.row, cv.family, cv.qualifier, cv.timestamp) for r in results for cv in r.columnValues]
        finally:
            self._call("closeScanner", self._client.closeScanner, scanner)

    def close(self) -> None:
        try:
            self._transport.close()
        except OPEN_ERRORS as exc:
            log.debug("ignoring error while closing Thrift2 socket to %s:%s: %s",
                      self.host, self.port, exc)

    def __enter__(self) -> Thrift2Admin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

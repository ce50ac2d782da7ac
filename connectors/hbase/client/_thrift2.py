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

One client stack: :class:`Thrift2Admin` is built from the same
:class:`~._options.HBaseConnectionOptions` as every Thrift1 connection and talks through a
:class:`Thrift2Connection`, the shared gateway loop (``_connection``) over
``hbase.thrift2.host`` / ``.port``: the same dialer (plain, TLS, Kerberos), failover
rounds and backoff, and error map. Only its scan is its own, through the loop's
resumable :meth:`~._connection.GatewayConnection.scan`.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TypeVar

from ...._exceptions import ConfigError
from ._connection import GatewayConnection
from ._errors import OPEN_ERRORS, SERVER_ERRORS, refused
from ._gateways import Gateway
from ._options import HBaseConnectionOptions
from ._thrift_types import THBaseServiceClient, Transport, TResult

__all__ = [
    "THRIFT2_IDL",
    "FamilySettings",
    "FamilySpec",
    "KeepDeletedCells",
    "Thrift2Admin",
    "Thrift2Connection",
]

T = TypeVar("T")


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
  2: optional map<binary, binary> attributes,
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
    attributes: Mapping[bytes, bytes] | None = None  # the descriptor's other values, as HBase names them


@dataclass(frozen=True)
class FamilySettings:
    """A family's settings as HBase reports them (``ttl_seconds`` FOREVER = no TTL)."""

    max_versions: int
    keep_deleted_cells: int
    ttl_seconds: int
    min_versions: int
    # ``NEW_VERSION_BEHAVIOR => true``: a delete masks only puts that landed before it
    # (HBASE-15968), which the sink's ordering by timestamps does not allow (``_admin``).
    new_version_behavior: bool = False


def _text(value: bytes | str | None) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value or ""


def _bytes(value: bytes | str) -> bytes:
    return value.encode() if isinstance(value, str) else value


class Thrift2Client:
    """One open socket to a Thrift2 gateway: its transport and the ``THBaseService`` client."""

    def __init__(self, transport: Transport, client: THBaseServiceClient) -> None:
        self.transport, self.client = transport, client

    def close(self) -> None:
        self.transport.close()


class Thrift2Connection(GatewayConnection[Thrift2Client]):
    """The shared gateway loop over the Thrift2 gateways (``hbase.thrift2.host`` / ``.port``).

    Admin calls are rare, so no spreading: the first gateway that answers serves them.
    """

    label = service = "HBase Thrift2 server"
    fix = ("is the Thrift2 server (org.apache.hadoop.hbase.thrift2.ThriftServer) running there with matching "
           "transport/protocol?")

    def __init__(self, opts: HBaseConnectionOptions) -> None:
        if not opts.thrift2_gateways:
            raise ConfigError("no HBase Thrift2 gateway is configured: set hbase.thrift2.port (or hbase.thrift2.host)",
                              option="hbase.thrift2.port")
        super().__init__(opts, opts.thrift2_gateways)

    def _open(self, gateway: Gateway) -> Thrift2Client:
        transport, client = self._dial().client(_idl().THBaseService, gateway)
        transport.open()
        return Thrift2Client(transport, client)


class Thrift2Admin:
    """Admin calls and version scans on a Thrift2 gateway, built from the connection options.

    Connects at once (an unreachable server fails the constructor). Every failure is a
    :class:`~...._exceptions.SinkError` naming the gateway and what to do; a configuration
    error a :class:`~...._exceptions.ConfigError` naming its option. Not thread-safe.
    """

    def __init__(self, opts: HBaseConnectionOptions) -> None:
        self._t = _idl()
        self._conn = Thrift2Connection(opts)
        self._conn.call(lambda _client: None, what="connect")

    @property
    def host(self) -> str:
        return self._conn.host

    @property
    def port(self) -> int:
        return self._conn.port

    # ------------------------------------------------------------------ plumbing
    def _where(self) -> str:
        return f"HBase Thrift2 server {self._conn.gateway}"

    def _refusal(self, what: str, exc: BaseException) -> Exception:
        """The server's answer to ``what``, as one line through the one map (``_errors``)."""
        if isinstance(exc, (self._t.TIOError, self._t.TIllegalArgument)):
            return refused(f"{self._where()} refused {what}", exc, fix="check the table name and its families")
        self._conn.close()  # an unknown method leaves the socket mid-message: start the next call afresh
        return refused(f"{self._where()} failed {what}", exc, fix="check that the port serves Thrift2, not Thrift1")

    def _call(self, what: str, fn: Callable[[THBaseServiceClient], T]) -> T:
        """``fn(client)`` through the gateway loop (retries, failover, TLS); the server's refusals mapped."""
        try:
            return self._conn.call(lambda c: fn(c.client), what=what)
        except SERVER_ERRORS as exc:
            raise self._refusal(what, exc) from exc

    def _table_name(self, name: str | bytes) -> object:
        ns, sep, qualifier = _bytes(name).rpartition(b":")
        return self._t.TTableName(ns=ns if sep else None, qualifier=qualifier)

    # ------------------------------------------------------------------ admin
    def table_exists(self, name: str | bytes) -> bool:
        """Whether table ``name`` (``ns:table`` or ``table``) exists."""
        return bool(self._call("tableExists", lambda c: c.tableExists(self._table_name(name))))

    def create_table(self, name: str | bytes, families: Mapping[str | bytes, FamilySpec], *,
                     split_keys: Sequence[bytes] = ()) -> None:
        """Create ``name`` with ``families``; ``split_keys`` pre-split it into regions.

        Not idempotent: retried after a dead socket, it may find the table it created; the
        caller (``_admin.prepare_table``) treats an existing table as created.
        """
        columns = [
            self._t.TColumnFamilyDescriptor(
                name=_bytes(family), maxVersions=spec.max_versions,
                keepDeletedCells=spec.keep_deleted_cells, timeToLive=spec.ttl_seconds,
                minVersions=spec.min_versions, attributes=dict(spec.attributes) if spec.attributes else None)
            for family, spec in families.items()
        ]
        desc = self._t.TTableDescriptor(tableName=self._table_name(name), columns=columns)
        self._call("createTable", lambda c: c.createTable(desc, [_bytes(k) for k in split_keys] or None))

    def family_settings(self, name: str | bytes) -> dict[str, FamilySettings]:
        """Family name → its settings, read from the table descriptor."""
        desc = self._call("getTableDescriptor", lambda c: c.getTableDescriptor(self._table_name(name)))
        result = {}
        for column in desc.columns or ():
            result[_text(column.name)] = FamilySettings(
                max_versions=column.maxVersions if column.maxVersions is not None else 1,
                keep_deleted_cells=(column.keepDeletedCells
                                    if column.keepDeletedCells is not None
                                    else KeepDeletedCells.FALSE),
                ttl_seconds=column.timeToLive if column.timeToLive is not None else FOREVER,
                min_versions=column.minVersions if column.minVersions is not None else 0,
                new_version_behavior=(column.attributes or {}).get(b"NEW_VERSION_BEHAVIOR", b"").lower() == b"true",
            )
        return result

    def region_boundaries(self, name: str | bytes) -> list[tuple[bytes, bytes]]:
        """``(start, end)`` of every region, sorted by start; ``b""`` is open-ended."""
        locations = self._call("getAllRegionLocations", lambda c: c.getAllRegionLocations(_bytes(name)))
        bounds = {(loc.regionInfo.startKey or b"", loc.regionInfo.endKey or b"")
                  for loc in locations}
        return sorted(bounds)

    def delete_versions(self, name: str | bytes,
                        cells: Iterable[tuple[bytes, bytes, bytes, int]]) -> None:
        """Delete exactly the given versions ``(row, family, qualifier, timestamp)``.

        Each becomes a ``DELETE_COLUMN`` (HBase ``Delete.addColumn(f, q, ts)``): older and
        newer versions of the same cell stay readable. Idempotent, so a retry is safe.
        """
        deletes = [
            self._t.TDelete(
                row=row, deleteType=self._t.TDeleteType.DELETE_COLUMN,
                columns=[self._t.TColumn(family=family, qualifier=qualifier, timestamp=ts)])
            for row, family, qualifier, ts in cells
        ]
        if deletes:
            self._call("deleteMultiple", lambda c: c.deleteMultiple(_bytes(name), deletes))

    def versions_in_range(self, name: str | bytes, families: Sequence[bytes], lo: int, hi: int, *,
                          chunk: int = 1000) -> Iterator[list[tuple[bytes, bytes, bytes, int]]]:
        """Every live version with a timestamp in ``[lo, hi)``, as ``(row, family, qualifier, ts)``, in chunks.

        One server-side time-range scan (``TScan.timeRange``, all versions): only the
        versions in the range cross the wire, and versions deleted already do not come
        back, so a second pass after :meth:`delete_versions` finds nothing. A chunk holds
        whole rows, so the scan resumes exactly after a dead socket, also when a
        :meth:`delete_versions` between two chunks failed over (``GatewayConnection.scan``).
        """
        t, table = self._t, _bytes(name)
        columns = [t.TColumn(family=f) for f in families] or None

        def open_scanner(c: Thrift2Client, after: bytes | None) -> int:
            scan = t.TScan(startRow=None if after is None else after + b"\x00", columns=columns, caching=chunk,
                           maxVersions=2**31 - 1, timeRange=t.TTimeRange(minStamp=lo, maxStamp=hi))
            return self._answer("openScanner", lambda: c.client.openScanner(table, scan))

        def fetch(c: Thrift2Client, scanner: int) -> list[TResult]:
            return list(self._answer("getScannerRows", lambda: c.client.getScannerRows(scanner, chunk)))

        for results in self._conn.scan(open_scanner, fetch, lambda c, s: c.client.closeScanner(s),
                                       lambda r: bytes(r.row), what=f"Thrift2 scan of {_text(table)!r}"):
            yield [(r.row, cv.family, cv.qualifier, cv.timestamp) for r in results for cv in r.columnValues]

    def _answer(self, what: str, fn: Callable[[], T]) -> T:
        """``fn()`` inside a scan (whose loop handles the socket), the server's refusals mapped."""
        try:
            return fn()
        except OPEN_ERRORS:
            raise  # a dead socket (a TException too): the scan's loop resumes on a fresh one
        except SERVER_ERRORS as exc:
            raise self._refusal(what, exc) from exc

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Thrift2Admin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

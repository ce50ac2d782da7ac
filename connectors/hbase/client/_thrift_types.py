"""The Thrift calls the HBase connector makes, as types the libraries do not give.

Why: happybase ships no types, and thriftpy2's clients are dynamic (``TClient`` answers
every method name through ``__getattr__``; structs live in a module built at run time),
so every call into them was ``Any`` and a misspelt method or a swapped argument passed
the type checker. These protocols list exactly the methods the connector calls -- no
more -- with the types HBase's Thrift IDLs give them (``hbase-thrift-2.6.1``'s
``thrift/Hbase.thrift`` and ``thrift2/hbase.thrift``; ``binary`` and ``string`` fields
arrive as bytes, the clients are built with ``decode_response=False``). A new call is
added here first. Names are the IDLs' (camelCase): thriftpy2 matches keyword arguments
and struct fields by them. Arguments the connector builds from the libraries' generated
struct classes (``Mutation``, ``TScan``, ``TTableName``...) are ``object`` here: only what
it reads back is described.

Types only: nothing checks the real objects at run time (no ``runtime_checkable``); the
integration tests against a real HBase check that the libraries keep this contract.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Literal, Protocol, TypedDict

__all__ = [
    "FamilyDescriptor",
    "HbaseClient",
    "RegionInfo",
    "TCell",
    "TColumnFamilyDescriptor",
    "TColumnValue",
    "THBaseServiceClient",
    "THRegionInfo",
    "THRegionLocation",
    "TResult",
    "TRowResult",
    "TTableDescriptor",
    "Thrift1Connection",
    "Thrift1Table",
    "Transport",
]


class Transport(Protocol):
    """A thriftpy2 transport (socket, framed, HTTP or SASL): opened and closed by the caller."""

    def open(self) -> None: ...

    def close(self) -> None: ...


# ------------------------------------------------------------------------ Thrift1 (Hbase)
class TCell(Protocol):
    value: bytes
    timestamp: int


class TRowResult(Protocol):
    row: bytes
    columns: dict[bytes, TCell]


class HbaseClient(Protocol):
    """The ``Hbase`` service calls made past happybase (batched writes, checkAndPut, scans)."""

    def mutateRowsTs(self, tableName: bytes, rowBatches: Sequence[object], timestamp: int,
                     attributes: Mapping[bytes, bytes]) -> None: ...

    def mutateRows(self, tableName: bytes, rowBatches: Sequence[object], attributes: Mapping[bytes, bytes]) -> None: ...

    def checkAndPut(self, tableName: bytes, row: bytes, column: bytes, value: bytes | None,
                    mput: object, attributes: Mapping[bytes, bytes]) -> bool: ...

    def scannerOpenWithScan(self, tableName: bytes, scan: object,
                            attributes: Mapping[bytes, bytes]) -> int: ...

    def scannerGetList(self, id: int, nbRows: int) -> list[TRowResult]: ...

    def scannerClose(self, id: int) -> None: ...


class FamilyDescriptor(TypedDict):
    """What the connector reads of happybase's ``Table.families()`` value (it holds more keys)."""

    max_versions: int


class RegionInfo(TypedDict):
    """What the connector reads of happybase's ``Table.regions()`` items (they hold more keys)."""

    start_key: bytes
    end_key: bytes


class Thrift1Table(Protocol):
    """happybase's ``Table``: the calls the connector makes."""

    def row(self, row: bytes, columns: Sequence[bytes] | None = ...) -> dict[bytes, bytes]: ...

    def cells(self, row: bytes, column: bytes, versions: int | None = ..., timestamp: int | None = ..., *,
              include_timestamp: Literal[True]) -> list[tuple[bytes, int]]: ...

    def scan(self, *, row_start: bytes | None = ..., row_stop: bytes | None = ..., row_prefix: bytes | None = ...,
             columns: Sequence[bytes] | None = ...) -> Iterator[tuple[bytes, dict[bytes, bytes]]]: ...

    def put(self, row: bytes, data: Mapping[bytes, bytes]) -> None: ...

    def delete(self, row: bytes, columns: Sequence[bytes] | None = ...) -> None: ...

    def counter_inc(self, row: bytes, column: bytes, value: int = ...) -> int: ...

    def families(self) -> dict[bytes, FamilyDescriptor]: ...

    def regions(self) -> list[RegionInfo]: ...


class Thrift1Connection(Protocol):
    """happybase's ``Connection`` (over the one dialer's client): the calls the connector makes."""

    client: HbaseClient

    def table(self, name: str | bytes) -> Thrift1Table: ...

    def tables(self) -> list[bytes]: ...

    def create_table(self, name: str, families: Mapping[str, Mapping[str, int]]) -> None: ...

    def close(self) -> None: ...


# ------------------------------------------------------------------ Thrift2 (THBaseService)
# A scan's answer: the IDL marks ``row`` and ``timestamp`` optional, but HBase fills both in
# every result it returns (``ThriftUtilities.resultFromHBase``), so they are typed as set.
class TColumnValue(Protocol):
    family: bytes
    qualifier: bytes
    value: bytes
    timestamp: int


class TResult(Protocol):
    row: bytes
    columnValues: list[TColumnValue]


class TColumnFamilyDescriptor(Protocol):
    name: bytes
    attributes: dict[bytes, bytes] | None
    keepDeletedCells: int | None
    maxVersions: int | None
    minVersions: int | None
    timeToLive: int | None


class TTableDescriptor(Protocol):
    columns: list[TColumnFamilyDescriptor] | None


class THRegionInfo(Protocol):
    startKey: bytes | None
    endKey: bytes | None


class THRegionLocation(Protocol):
    regionInfo: THRegionInfo


class THBaseServiceClient(Protocol):
    """The ``THBaseService`` calls of ``_thrift2.THRIFT2_IDL`` (the IDL subset holds exactly these)."""

    def openScanner(self, table: bytes, tscan: object) -> int: ...

    def getScannerRows(self, scannerId: int, numRows: int = ...) -> list[TResult]: ...

    def closeScanner(self, scannerId: int) -> None: ...

    def deleteMultiple(self, table: bytes, tdeletes: Sequence[object]) -> list[object]: ...

    def getAllRegionLocations(self, table: bytes) -> list[THRegionLocation]: ...

    def getTableDescriptor(self, table: object) -> TTableDescriptor: ...

    def tableExists(self, tableName: object) -> bool: ...

    def createTable(self, desc: object, splitKeys: Sequence[bytes] | None) -> None: ...

"""Query-start checks of the target table (driver): exists, families, versions, deleted cells.

Read-committed and as-of views are time-range reads below a commit's bound, so

* every family the sink writes must keep at least :data:`MIN_VERSIONS` versions (the
  committed version has to survive the in-flight batch's newer one);
* ``KEEP_DELETED_CELLS=TRUE`` makes them exact: a newer delete marker (an in-flight
  batch's, or a later checkpoint's) then does not hide older versions from a
  time-range read, and major compactions keep deleted cells for as-of reads.

TTLs are fine: cells carry wall-clock timestamps, so they expire as HBase users expect.

Thrift1 can neither set nor read ``KEEP_DELETED_CELLS``; with ``hbase.thrift2.port``
the sink checks it (exactly once refuses a family that does not keep them: see
:func:`_deleted_cells_error`) and ``create.table=true`` sets it through the Thrift2 server.
Without one, ``create.table`` creates the table through Thrift1, and the checks return
a :class:`DeletedCellsNotice`: what the views cannot guarantee and which shell command
fixes it. The caller gives it once per ``sink.id`` (``_notices``), not once per
planning process. A missing table without ``create.table`` and a family keeping one
version are :class:`ConfigError`\\ s.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from ...._exceptions import ConfigError, SinkError
from ....state._json import Json
from ._connection import HBaseConnection
from ._errors import SERVER_ERRORS, refused
from ._thrift2 import FamilySpec, KeepDeletedCells, Thrift2Admin
from ._thrift_types import Thrift1Connection

__all__ = ["CREATE_VERSIONS", "MIN_VERSIONS", "DeletedCellsNotice", "keep_deleted_cells_command", "prepare_table",
           "table_exists"]

log = logging.getLogger(__name__)

MIN_VERSIONS = 2
CREATE_VERSIONS = 100

_CREATE_FAILED: tuple[type[BaseException], ...] = (*SERVER_ERRORS, SinkError)
"""What a create that another process may have won raises (the table is checked after it)."""


def keep_deleted_cells_command(table: str, families: Iterable[str]) -> str:
    """The HBase shell command that makes the views exact on an existing table."""
    specs = ", ".join(f"{{NAME => '{f}', KEEP_DELETED_CELLS => TRUE}}" for f in families)
    return f"alter '{table}', {specs}"


@dataclass(frozen=True)
class DeletedCellsNotice:
    """Families of ``table`` that may not keep deleted cells, and why the sink could not make sure."""

    table: str
    families: tuple[str, ...]
    why: str

    def key(self) -> dict[str, Json]:
        """What makes two notices the same news: the table and the families the fix names.

        ``why`` is left out: "created through Thrift1" and "cannot be checked over
        Thrift1" about the same table call for the same command.
        """
        return {"table": self.table, "families": list(self.families)}

    def text(self) -> str:
        return (f"HBase table {self.table!r}: {self.why}. Where deleted cells are not kept, the committed and "
                f"as-of views of barrier-hbase can miss rows that a newer (in-flight or later) delete removed, "
                f"and major compactions drop deleted cells that older as-of reads need. Fix it in the HBase "
                f"shell: {keep_deleted_cells_command(self.table, self.families)}")


def table_exists(conn: HBaseConnection, table: str) -> bool:
    """Whether ``table`` exists (driver, query start), in one call on one table where it does.

    The call reads the table's column descriptors. What the listing of every table
    (Thrift1's ``getTableNames``) answers instead grows with the cluster: 10-130 ms on the
    devstack's 400 tables, where a descriptor read is 1-3 ms. A refused descriptor read
    (no such table, or the server refused it for another reason, a permission say) falls
    back to the listing, so a table missing or not is decided as before.
    """
    try:
        conn.call(lambda c: c.table(table).families())
    except SERVER_ERRORS:
        return table.encode() in conn.call(lambda c: c.tables())
    return True


def prepare_table(conn: HBaseConnection, table: str, families: Iterable[bytes], *, create: bool,
                  thrift2: Thrift2Admin | None = None, min_versions: int = MIN_VERSIONS,
                  require_deleted_cells: bool = False) -> DeletedCellsNotice | None:
    """Check (or create) ``table``; the notice to give when deleted cells may not be kept.

    None means every family is known to keep deleted cells. ``thrift2``: a Thrift2 admin
    connection, or None. ``min_versions``: what a family must keep (the sink's reason
    is in its docs: a batch's tries in flight above the committed version).
    ``require_deleted_cells``: a family Thrift2 reads as not keeping deleted cells is a
    :class:`ConfigError` instead of a notice (exactly once: see :func:`_deleted_cells_error`).
    Logs nothing above INFO: the caller decides whether the notice is news (see ``_notices``).
    """
    wanted = [f.decode() for f in families]
    created_without: list[DeletedCellsNotice] = []

    def check(c: Thrift1Connection) -> bool:
        """True when the table already existed."""
        if table.encode() in c.tables():
            return True
        if not create:
            raise ConfigError(
                f"HBase table {table!r} does not exist; create it (families {wanted}, VERSIONS >= "
                f"{min_versions}, KEEP_DELETED_CELLS => TRUE) or set create.table=true", option="table")
        try:
            if thrift2 is not None:
                thrift2.create_table(table, {f: FamilySpec(max_versions=CREATE_VERSIONS,
                                                           keep_deleted_cells=KeepDeletedCells.TRUE)
                                             for f in wanted})
            else:
                c.create_table(table, {f: {"max_versions": CREATE_VERSIONS} for f in wanted})
                created_without.append(DeletedCellsNotice(
                    table, tuple(wanted), "created through Thrift1, which cannot set KEEP_DELETED_CELLS "
                    "(set hbase.thrift2.port to create it that way)"))
            log.info("created HBase table %s with families %s", table, wanted)
        except _CREATE_FAILED as exc:
            if table.encode() not in c.tables():
                raise refused(f"cannot create HBase table {table!r}", exc) from exc
            return True  # another planning process created it first: check it like any table
        return False

    try:  # a table that exists answers with its families: one call on it, no listing of every table
        descriptors = conn.call(lambda c: c.table(table).families())
        existed = True
    except SERVER_ERRORS:  # missing, or refused for another reason: the listing decides, as it always did
        existed = conn.call(check)
        descriptors = conn.call(lambda c: c.table(table).families())
    missing = [f for f in wanted if f.encode() not in descriptors]
    if missing:
        # Thrift1 cannot alter a table, so even create.table=true cannot add a family.
        raise ConfigError(f"HBase table {table!r} has no column family {missing}; add it with the HBase "
                          f"shell (VERSIONS >= {min_versions}, KEEP_DELETED_CELLS => TRUE)",
                          option="column.family")
    for f in wanted:
        versions = descriptors[f.encode()]["max_versions"]
        if versions < min_versions:
            raise ConfigError(
                f"family {f!r} of HBase table {table!r} keeps {versions} version(s); barrier-hbase needs "
                f"VERSIONS >= {min_versions}: a memstore flush or compaction keeps only the newest VERSIONS "
                f"versions of a cell, and while a batch is in flight a cell can hold, above the committed "
                f"version that committed and as-of reads need, one put per try of the task writing it "
                f"(retries and speculative copies, up to {min_versions - 1}); with fewer, a flush can drop the "
                f"committed version or the try Spark commits. Fix: alter '{table}', {{NAME => '{f}', VERSIONS => "
                f"{CREATE_VERSIONS}}}", option="table")
    if not existed:
        return created_without[0] if created_without else None
    if thrift2 is None:
        return DeletedCellsNotice(table, tuple(wanted), "KEEP_DELETED_CELLS cannot be checked over Thrift1 "
                                  "(set hbase.thrift2.port to check it)")
    settings = thrift2.family_settings(table)
    newer = [f for f in wanted if settings[f].new_version_behavior]
    if newer:
        # Under NEW_VERSION_BEHAVIOR a delete masks only puts that reached the server before
        # it: a task's delete marker then no longer masks an abandoned attempt's or a late
        # copy's put at a lower timestamp that lands after it, so exactly once would not hold.
        specs = ", ".join(f"{{NAME => '{f}', NEW_VERSION_BEHAVIOR => 'false'}}" for f in newer)
        raise ConfigError(
            f"families {newer} of HBase table {table!r} have NEW_VERSION_BEHAVIOR => true, under which a "
            f"delete does not mask a put with a lower timestamp that arrives after it; barrier-hbase orders "
            f"writes by timestamp and needs it off: alter '{table}', {specs}", option="table")
    off = [f for f in wanted if settings[f].keep_deleted_cells == KeepDeletedCells.FALSE]
    if off and require_deleted_cells:
        raise _deleted_cells_error(table, off)
    return DeletedCellsNotice(table, tuple(off), f"families {off} do not keep deleted cells") if off else None


def _deleted_cells_error(table: str, families: list[str]) -> ConfigError:
    """Why exactly once needs ``KEEP_DELETED_CELLS``, measured on the devstack's HBase 2.6.

    The sink removes an uncommitted try's puts (a failed try's, a losing speculative
    copy's, an abandoned attempt's) with exact-version delete markers. A major compaction
    drops delete markers where deleted cells are not kept; a put of that try still in
    flight (a killed copy's write in a gateway retry) that lands after it is then a live
    version again, the newest where the try's slot was above the committed one
    (tests/connectors/hbase/test_hbase_rules.py). With deleted cells kept, the markers
    stay, and the committed and as-of views also read below newer delete markers.
    """
    command = keep_deleted_cells_command(table, families)
    return ConfigError(
        f"families {families} of HBase table {table!r} do not keep deleted cells (KEEP_DELETED_CELLS => FALSE); "
        f"exactly once needs them kept: the sink removes the puts of tries Spark did not commit with "
        f"exact-version delete markers, a major compaction drops those markers where deleted cells are not "
        f"kept, and a put of such a try that lands afterwards (a killed speculative copy's write still in a "
        f"gateway retry) would be the newest value again. Fix: {command} (or set "
        f"delivery.guarantee=at-least-once, which removes nothing)", option="table")

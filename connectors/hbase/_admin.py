"""Query-start checks of the target table (driver): exists, families, versions, TTL.

Read-committed needs older versions to survive newer uncommitted ones, so every
family the sink writes must keep at least :data:`MIN_VERSIONS` versions and have no
TTL (cell timestamps are sequence-based, not wall-clock, so a TTL would expire them
at random). ``create.table=true`` creates the table / missing families with
:data:`CREATE_VERSIONS` versions; otherwise a missing table is a :class:`ConfigError`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from thriftpy2.thrift import TException

from ..._exceptions import ConfigError, SinkError
from ._connection import HBaseConnection

__all__ = ["prepare_table", "MIN_VERSIONS", "CREATE_VERSIONS"]

log = logging.getLogger(__name__)

MIN_VERSIONS = 2
CREATE_VERSIONS = 100


def prepare_table(conn: HBaseConnection, table: str, families: Iterable[bytes], *, create: bool) -> None:
    wanted = [f.decode() for f in families]

    def check(c: Any) -> None:
        if table.encode() not in c.tables():
            if not create:
                raise ConfigError(
                    f"HBase table {table!r} does not exist; create it (families {wanted}, "
                    f"VERSIONS >= {MIN_VERSIONS}, no TTL) or set create.table=true", option="table")
            try:
                c.create_table(table, {f: {"max_versions": CREATE_VERSIONS} for f in wanted})
                log.info("created HBase table %s with families %s", table, wanted)
                return
            except TException as exc:
                if table.encode() not in c.tables():
                    raise SinkError(f"cannot create HBase table {table!r}: {exc}") from exc
        descriptors = c.table(table).families()
        missing = [f for f in wanted if f.encode() not in descriptors]
        if missing:
            # Thrift1 cannot alter a table, so even create.table=true cannot add a family.
            raise ConfigError(f"HBase table {table!r} has no column family {missing}; add it with "
                              f"the HBase shell (VERSIONS >= {MIN_VERSIONS})", option="column.family")
        for f in wanted:
            d = descriptors[f.encode()]
            if d["max_versions"] < MIN_VERSIONS or d["time_to_live"] not in (-1, 2147483647):
                raise ConfigError(
                    f"family {f!r} of HBase table {table!r} keeps {d['max_versions']} version(s) with "
                    f"TTL {d['time_to_live']}; read-committed needs VERSIONS >= {MIN_VERSIONS} and no TTL",
                    option="table")

    conn.call(check)


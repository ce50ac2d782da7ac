"""barrier-hbase end to end through Kerberized Thrift gateways (real KDC, real Kerberized HBase 2.6).

A file stream writes through two SASL gateways of different qops (auth, auth-conf), with
a Thrift2 admin connection; then the committed view (Spark reader), a plain scan, the
sink's status, lineage and the family settings are read back, all through Kerberos.
Credential problems must fail the query at start, with the option to fix, and no
key material may show up in errors, logs or the checkpoint.
"""

from __future__ import annotations

import base64
import os
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hbase_clients import thrift1, thrift2_admin

from sparkbarrier.connectors.hbase import KerberosSettings, lineage, read_committed, sink_status
from sparkbarrier.connectors.hbase.client._thrift2 import KeepDeletedCells

pytestmark = [pytest.mark.hbase, pytest.mark.spark, pytest.mark.slow]

SCHEMA = pa.schema([("id", pa.string()), ("v", pa.int64()), ("op", pa.string())])
DDL = "id string, v bigint, op string"
COMMITS = "sparkbarrier_commits_krb"


@pytest.fixture(autouse=True)
def _registered(spark) -> None:
    from sparkbarrier.connectors.hbase import register

    register(spark)


def _write_files(folder: Path, batches: list[list[dict]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i, rows in enumerate(batches):
        path = folder / f"part-{i:03d}.parquet"
        pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), path)
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))  # the file source orders by mtime


def _options(kdc, endpoints, table: str, role: str = "client", **extra: str) -> dict[str, str]:
    principal, keytab = kdc.keytab(role)
    gateways = f"localhost:{endpoints.thrift[1]},localhost:{endpoints.thrift_conf[1]}"
    return {"hbase.thrift.host": gateways, "hbase.thrift2.host": f"localhost:{endpoints.thrift2[1]}",
            "hbase.thrift.authentication": "kerberos", "hbase.thrift.kerberos.client.principal": principal,
            "hbase.thrift.kerberos.client.keytab": keytab, "table": table, "commit.table": COMMITS,
            "hbase.thrift.timeout": "30000", **extra}


def _run(spark, source: Path, ckpt: Path, options: dict[str, str]) -> list[int]:
    """Run to the end of the input; returns the batch ids the query ran."""
    stream = (spark.readStream.schema(DDL).option("maxFilesPerTrigger", 1).parquet(str(source))
              .writeStream.format("barrier-hbase").options(**options)
              .option("rowkey", "id").option("op.column", "op").option("create.table", "true")
              .option("checkpointLocation", str(ckpt)).trigger(availableNow=True))
    query = stream.start()
    try:
        assert query.awaitTermination(180), "query did not finish in time"
        assert query.exception() is None, query.exception()
        return [p["batchId"] for p in query.recentProgress]
    finally:
        query.stop()


def test_stream_writes_exactly_once_through_kerberized_gateways(
        spark, kdc, kerberos_hbase, unique_name: Callable[[str], str], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    table = unique_name("krb")
    _write_files(tmp_path / "in", [
        [{"id": "a", "v": 1, "op": None}, {"id": "b", "v": 2, "op": None}],
        [{"id": "a", "v": None, "op": "delete"}, {"id": "a", "v": 3, "op": None}, {"id": "c", "v": 4, "op": None}],
        [{"id": "b", "v": None, "op": "delete"}],
    ])
    options = _options(kdc, kerberos_hbase, table, **{"sink.id": table})
    _run(spark, tmp_path / "in", tmp_path / "ckpt", options)

    principal, keytab = kdc.keytab("client")
    settings = KerberosSettings(principal=principal, keytab=keytab)
    conn = thrift1(*kerberos_hbase.thrift_conf, timeout_ms=30_000, kerberos=settings)

    def scan() -> dict[bytes, dict[bytes, bytes]]:
        return dict(conn.call(lambda c: list(c.table(table).scan())))

    def versions() -> list[tuple[bytes, int]]:
        return conn.call(lambda c: c.table(table).cells(b"c", b"d:v", versions=10, include_timestamp=True))

    try:
        plain = scan()
        assert sorted(plain) == [b"a", b"c"], plain
        cells_before = versions()
        # Spark forgets it committed the last batch and replays it: the sink must not write again.
        for name in ("2", ".2.crc"):
            (tmp_path / "ckpt" / "commits" / name).unlink(missing_ok=True)
        status_before = sink_status("localhost", kerberos_hbase.thrift[1], table, COMMITS, kerberos=settings)
        assert _run(spark, tmp_path / "in", tmp_path / "ckpt", options) == [2], "Spark did not replay batch 2"
        assert scan() == plain and versions() == cells_before
        status = sink_status("localhost", kerberos_hbase.thrift[1], table, COMMITS, kerberos=settings)
        assert (status.seq, status.batch_id) == (status_before.seq, status_before.batch_id) == (3, 2)
        from sparkbarrier.__main__ import main

        assert main(["status", "--sink-id", table, "--commit-table", COMMITS, "--json",
                     "--hbase", f"localhost:{kerberos_hbase.thrift[1]}", "--hbase-kerberos-principal", principal,
                     "--hbase-kerberos-keytab", keytab]) == 0
        assert '"batch_id": 2' in capsys.readouterr().out
        assert main(["lineage", "--table", table, "--row", "c", "--sink-id", table, "--commit-table", COMMITS,
                     "--hbase", f"localhost:{kerberos_hbase.thrift[1]}", "--hbase-kerberos-principal", principal,
                     "--hbase-kerberos-keytab", keytab]) == 0
    finally:
        conn.close()

    rows = (spark.read.format("barrier-hbase").options(**options).load().orderBy("id").collect())
    assert [(r.id, r.v) for r in rows] == [("a", 3), ("c", 4)]
    view = read_committed(options["hbase.thrift.host"], 9090, table, sink_id=table, commit_table=COMMITS,
                          kerberos=settings)
    assert sorted((r["id"], r["v"]) for r in view.to_pylist()) == [("a", 3), ("c", 4)]

    cells = lineage("localhost", kerberos_hbase.thrift_int[1], table, "c", sink_id=table, commit_table=COMMITS,
                    kerberos=settings)
    assert cells and all(c.committed and c.batch_id == 1 for c in cells), cells

    with thrift2_admin(*kerberos_hbase.thrift2, timeout_ms=30_000, kerberos=settings) as admin:
        assert admin.family_settings(table)["d"].keep_deleted_cells == KeepDeletedCells.TRUE


def _start_error(spark, tmp_path: Path, options: dict[str, str]) -> tuple[str, float]:
    """The error a query with ``options`` fails with, and how long until it did."""
    _write_files(tmp_path / "in", [[{"id": "a", "v": 1, "op": None}]])
    started = time.monotonic()
    writer = (spark.readStream.schema(DDL).parquet(str(tmp_path / "in")).writeStream.format("barrier-hbase")
              .options(**options).option("rowkey", "id").option("create.table", "true")
              .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True))
    try:
        query = writer.start()
        try:
            query.awaitTermination(120)
            exc = query.exception()
        finally:
            query.stop()
    except Exception as raised:  # noqa: BLE001 - the failure is what the test inspects
        exc = raised
    assert exc is not None, "the query started with bad credentials"
    return str(exc), time.monotonic() - started


@pytest.mark.parametrize("role,needle,option", [
    ("stale", "Preauthentication failed", "hbase.thrift.kerberos.client.keytab"),
    ("unknown", "not found in Kerberos database", "hbase.thrift.kerberos.client.principal"),
])
def test_bad_credentials_fail_the_query_at_start_without_leaking_the_keytab(
        spark, kdc, kerberos_hbase, unique_name, tmp_path: Path, capfd: pytest.CaptureFixture[str],
        role: str, needle: str, option: str) -> None:
    message, took = _start_error(spark, tmp_path, _options(kdc, kerberos_hbase, unique_name("krb"), role))
    assert needle in message and option in message, message
    assert took < 60, "a refused login must fail at query start, not after retries"
    key_material = Path(kdc.keytab(role)[1]).read_bytes()[-32:]  # the end of the last key entry
    out, err = capfd.readouterr()
    checkpoint = b"".join(p.read_bytes() for p in (tmp_path / "ckpt").rglob("*") if p.is_file())
    for text in (message.encode(), out.encode(), err.encode(), checkpoint):
        for form in (key_material, key_material.hex().encode(), base64.b64encode(key_material)):
            assert form not in text


def test_no_ticket_and_no_keytab_fails_the_query_at_start_saying_kinit(
        spark, kdc, kerberos_hbase, unique_name, tmp_path: Path) -> None:
    Path(os.environ["KRB5CCNAME"].removeprefix("FILE:")).unlink(missing_ok=True)  # kdestroy
    options = _options(kdc, kerberos_hbase, unique_name("krb"))
    del options["hbase.thrift.kerberos.client.keytab"], options["hbase.thrift.kerberos.client.principal"]
    message, took = _start_error(spark, tmp_path, options)
    assert "run `kinit`" in message and "hbase.thrift.kerberos.client.keytab" in message, message
    assert took < 60

"""The Kerberized HBase of the devstack (``devstack/_hbase_kerberos.py``) in a throw-away home:
it serves SASL clients at each qop, ``up`` is idempotent, ``down`` leaves nothing running,
and the gateways' keytab never shows in the logs. Real KDC and HBase, no mock."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devstack_helpers import stack_pids

from sparkbarrier.connectors.hbase import KerberosSettings
from sparkbarrier.connectors.hbase.client._connection import HBaseConnection, connection_options
from sparkbarrier.devstack import Kdc
from sparkbarrier.devstack._hbase_kerberos import MASTER, KerberosHBase

pytestmark = [pytest.mark.hbase, pytest.mark.timeout(300)]


def test_up_serves_every_qop_is_idempotent_and_down_stops_everything(scratch_home: Path) -> None:
    kdc = Kdc(scratch_home)
    manifest = kdc.up()
    kdc_pids = set(stack_pids(scratch_home))
    hbase = KerberosHBase(scratch_home, manifest)
    try:
        endpoints = hbase.up()
        assert endpoints.service_principal == manifest.keytab("hbase")[0]
        assert {endpoints.thrift[0], endpoints.thrift2[0]} == {"localhost"}
        pid = json.loads((scratch_home / "run" / f"{MASTER}.json").read_text())["pid"]
        assert hbase.up() == endpoints  # already running: kept
        assert json.loads((scratch_home / "run" / f"{MASTER}.json").read_text())["pid"] == pid
        principal, keytab = manifest.keytab("client")
        host, port = endpoints.thrift_conf
        conn = HBaseConnection(connection_options({"hbase.thrift.timeout": "30000"}, host=host, port=port,
                                                  kerberos=KerberosSettings(principal=principal, keytab=keytab)))
        try:
            assert isinstance(conn.call(lambda c: c.tables()), list)
        finally:
            conn.close()
        assert len(set(stack_pids(scratch_home)) - kdc_pids) == 5
    finally:
        stopped = hbase.down()
    assert len(stopped) == 5
    assert set(stack_pids(scratch_home)) == kdc_pids, "only the KDC may survive the Kerberized HBase's down"
    assert hbase.endpoints() is None and hbase.down() == []
    key_material = Path(manifest.keytab("hbase")[1]).read_bytes()[-32:]
    for log in (scratch_home / "logs").glob("krb-hbase-*.log"):
        text = log.read_bytes()
        assert key_material not in text and key_material.hex().encode() not in text

"""sparkbarrier's WebHDFS layer on a real Kerberized HDFS HA pair: folder calls authenticate with
SPNEGO at whichever NameNode they reach and follow a crash failover; without a ticket they
fail at once with the Kerberos error map's words.

The pair is this module's own (``devstack/_hdfs_ha_kerberos.py``: the HA pair of
``_hdfs_ha.py`` in Hadoop's secure mode, NameNodes at ``localhost`` with SPNEGO principal
``HTTP/localhost``), started once for the module with the session's KDC (``kdc`` in
tests/conftest.py) and stopped when its tests end. The client is the product's, configured
by the pair's ``HADOOP_CONF_DIR`` alone (``hadoop.security.authentication=kerberos``,
``dfs.ha.namenodes.devstack-ha``); it logs in as the client role through a ticket cache of
the test's own that ``kinit`` fills. Every wait polls with a deadline. The plain-HTTP
twin, with graceful failovers and a Spark query: tests/integration/test_hdfs_ha.py.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from folder_calls import folder_calls
from polling import wait_for

from sparkbarrier import KerberosError
from sparkbarrier.connectors.storage._files import WEBHDFS_ENV, folder
from sparkbarrier.connectors.storage._webhdfs_retry import RETRY_ENV, Attempt, Transient
from sparkbarrier.devstack._hdfs import http_request
from sparkbarrier.devstack._hdfs_ha import NAMENODE_IDS, HaEndpoints
from sparkbarrier.devstack._hdfs_ha_kerberos import KerberosHdfsHaPair

pytestmark = [pytest.mark.slow, pytest.mark.hdfs]


@pytest.fixture(scope="module")
def krb_pair(tmp_path_factory: pytest.TempPathFactory, kdc: Any) -> Iterator[tuple[KerberosHdfsHaPair, HaEndpoints]]:
    pair = KerberosHdfsHaPair(tmp_path_factory.mktemp("hdfs-ha-krb") / "devstack-home", kdc)
    started = time.monotonic()
    try:
        endpoints = pair.up()
        print(f"\nkerberized hdfs ha pair up in {time.monotonic() - started:.1f} s")
        yield pair, endpoints
    finally:
        pair.down()


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch, krb_pair: tuple[KerberosHdfsHaPair, HaEndpoints],
                 tmp_path: Path) -> None:
    """The pair's client configuration and a private, empty ticket cache (no HADOOP_USER_NAME:
    under Kerberos the ticket names the user)."""
    monkeypatch.setenv("HADOOP_CONF_DIR", str(krb_pair[1].conf_dir))
    monkeypatch.delenv(WEBHDFS_ENV, raising=False)
    monkeypatch.delenv("HADOOP_USER_NAME", raising=False)
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path / 'client.ccache'}")
    monkeypatch.setenv(RETRY_ENV, "40")


def _kinit(kdc: Any) -> None:
    """A ticket for the client role in the test's cache (``KRB5CCNAME``)."""
    principal, keytab = kdc.keytab("client")
    subprocess.run(["kinit", "-k", "-t", keytab, principal], check=True, timeout=30, env=os.environ,
                   stdin=subprocess.DEVNULL, capture_output=True)


def _active(pair: KerberosHdfsHaPair) -> tuple[str, str]:
    active = wait_for(lambda: next((nn for nn in NAMENODE_IDS if pair.state(nn) == "active"), None), timeout=30,
                      what="an active NameNode")
    return active, next(nn for nn in NAMENODE_IDS if nn != active)


@pytest.mark.timeout(60)
def test_without_a_ticket_a_call_fails_at_once_saying_kinit_and_naming_no_secret(krb_pair, kdc) -> None:
    """The NameNodes really demand SPNEGO (a bare request is answered 401 Negotiate); the
    product's call with an empty ticket cache raises KerberosError before sending anything,
    not after the retry bound, and names neither a keytab nor its contents."""
    pair, endpoints = krb_pair
    status, _, _ = http_request("GET", f"{endpoints.http['nn1']}/webhdfs/v1/?op=LISTSTATUS")
    assert status == 401
    started = time.monotonic()
    with pytest.raises(KerberosError, match=r"no valid Kerberos ticket .* run `kinit`") as err:
        folder(f"{endpoints.uri}/tests/no-ticket").names()
    assert time.monotonic() - started < 5
    message = str(err.value)
    assert "the HDFS NameNodes' WebHDFS" in message and os.environ["KRB5CCNAME"] in message
    for keytab in (kdc.keytab("client")[1], kdc.keytab("http")[1], kdc.keytab("hdfs")[1], pair.keytab):
        assert keytab not in message


@pytest.mark.timeout(90)
def test_folder_calls_authenticate_at_each_namenode_and_follow_a_crash_failover(krb_pair, kdc) -> None:
    """A loop of create + read + list through SPNEGO runs while the active NameNode is
    SIGKILLed and the standby promoted: the call in flight moves to the standby (which
    authenticates it and answers StandbyException until the promotion) and completes;
    no call fails, none is lost. Before the crash, the standby itself is asked once: an
    authenticated StandbyException, not a 401, is what sends the client on."""
    pair, endpoints = krb_pair
    _kinit(kdc)
    f = folder(f"{endpoints.uri}/tests/krb-{os.getpid()}-{time.time_ns()}")
    f.create("first", b"1")
    assert f.read("first") == b"1" and f.names() == ["first"]
    active, standby = _active(pair)
    client = f._fs  # the product's WebHDFS client
    with pytest.raises(Transient, match="StandbyException"):
        client._request(Attempt(NAMENODE_IDS.index(standby), False, 10.0), "GETFILESTATUS", path="/")

    with folder_calls(f, join_timeout=45) as calls:
        done, failures = calls.done, calls.failures
        wait_for(lambda: len(done) >= 3 or failures, timeout=20, what="calls before the crash")
        pair.kill(active)
        crashed_at = time.monotonic()
        time.sleep(0.5)  # calls meet the dead NameNode and the standby before the promotion
        pair.transition_to_active(standby)
        promoted_at = time.monotonic()
        wait_for(lambda: sum(s > promoted_at for _, s, _ in done) >= 3 or failures, timeout=30,
                 what="calls after the promotion")
    assert failures == [], failures
    assert [n for n, _, _ in done] == list(range(len(done)))
    waited = [took for _, s, took in done if s <= crashed_at < s + took]
    assert waited and waited[0] > 0.3, f"no call waited through the crash: {waited}"
    assert f.names() == sorted(["first", *(f"{n:05d}" for n, _, _ in done)])
    assert pair.state(standby) == "active"
    print(f"\nSPNEGO folder calls: {len(done)}; the one in flight at the crash took {waited[0]:.1f} s "
          f"(the promotion took {promoted_at - crashed_at:.1f} s)")

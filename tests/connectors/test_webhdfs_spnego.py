"""SPNEGO on the WebHDFS layer (``connectors/storage/_webhdfs_spnego.py``) against the fake NameNode:
which requests carry a token, that ``requests-kerberos`` is not needed, and that a missing
ticket fails at once with the one Kerberos error map's words. The same against a real
Kerberized HA pair, with failovers: tests/integration/test_hdfs_ha_kerberos.py."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_webhdfs import fake_namenode

from sparkbarrier import KerberosError
from sparkbarrier.connectors.storage import _webhdfs
from sparkbarrier.connectors.storage._files import WEBHDFS_ENV, folder
from sparkbarrier.connectors.storage._webhdfs_retry import RETRY_ENV

pytest.importorskip("gssapi")


def _kerberized_conf(directory: Path, address: str) -> None:
    site = "<configuration><property><name>{}</name><value>{}</value></property></configuration>"
    (directory / "core-site.xml").write_text(site.format("hadoop.security.authentication", "kerberos"))
    (directory / "hdfs-site.xml").write_text(site.format("dfs.namenode.http-address", address))


@pytest.fixture
def kerberized(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator:
    with fake_namenode() as nn:
        _kerberized_conf(tmp_path, nn.url.removeprefix("http://"))
        monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path))
        monkeypatch.delenv(WEBHDFS_ENV, raising=False)
        monkeypatch.setenv(RETRY_ENV, "20")
        yield nn


def test_every_namenode_request_carries_a_token_for_its_host_and_no_datanode_request_does(
        kerberized, monkeypatch) -> None:
    """The bug the real Kerberized pair showed: fsspec's SPNEGO imports ``requests_kerberos``,
    which nothing installs; a Kerberized nameservice failed with ModuleNotFoundError."""
    monkeypatch.setitem(sys.modules, "requests_kerberos", None)  # importing it raises
    hosts: list[str] = []

    def negotiate(host: str) -> str:
        hosts.append(host)
        return f"Negotiate token-{len(hosts)}"

    monkeypatch.setattr(_webhdfs, "negotiate", negotiate)
    f = folder("hdfs://prod/ckpt")
    f.create("x", b"one")
    assert f.read("x") == b"one" and f.names() == ["x"]
    seen = kerberized.authorizations
    assert seen and {op for op, _ in seen if op.startswith("DATA-")} == {"DATA-CREATE", "DATA-OPEN"}
    assert all(header is None for op, header in seen if op.startswith("DATA-"))
    namenode = [header for op, header in seen if not op.startswith("DATA-")]
    assert namenode == [f"Negotiate token-{n}" for n in range(1, len(namenode) + 1)]  # a fresh token each
    assert set(hosts) == {"127.0.0.1"}
    assert all("user.name" not in path for _, _, path in kerberized.requests)


def test_no_ticket_fails_at_once_saying_kinit_and_sends_nothing(kerberized, tmp_path, monkeypatch) -> None:
    """Not retried (it cannot heal within the bound); no keytab or secret in the message."""
    (tmp_path / "krb5.conf").write_text("[libdefaults]\n default_realm = EXAMPLE.TEST\n")
    monkeypatch.setenv("KRB5_CONFIG", str(tmp_path / "krb5.conf"))
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path / 'no-such-cache'}")
    with pytest.raises(KerberosError, match=r"no valid Kerberos ticket .* run `kinit`") as err:
        folder("hdfs://prod/ckpt").names()
    assert "the HDFS NameNodes' WebHDFS" in str(err.value) and err.value.option == "KRB5CCNAME"
    assert kerberized.requests == []

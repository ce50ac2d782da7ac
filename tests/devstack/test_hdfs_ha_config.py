"""The HA pair's configuration (``devstack/_hdfs_ha.py``) is the contract both clients read:
one nameservice with two NameNodes on 127.0.0.1, each daemon told who it is, and a
clients' ``HADOOP_CONF_DIR`` that Spark can put on its classpath. No server: the pair
itself runs in tests/integration/test_hdfs_ha.py.
"""

from __future__ import annotations

import os
import stat
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

from sparkbarrier.connectors.storage._files import namenodes
from sparkbarrier.devstack._hdfs_ha import NAMESERVICE, HdfsHaPair, _free_ports
from sparkbarrier.devstack._hdfs_ha_kerberos import KerberosHdfsHaPair


def _site(path: Path) -> dict[str, str]:
    return {p.findtext("name") or "": p.findtext("value") or "" for p in ET.parse(path).getroot().iter("property")}


def test_the_clients_conf_names_the_nameservice_and_each_namenode_knows_its_id(tmp_path: Path) -> None:
    pair = HdfsHaPair(tmp_path / "home")
    ports = _free_ports()
    assert len(set(ports.values())) == len(ports)
    pair._write_confs(ports)
    endpoints = pair.endpoints()
    client = endpoints.conf_dir
    # No log4j2.properties among the clients' files: on Spark's classpath it would replace Spark's.
    assert sorted(p.name for p in client.iterdir()) == ["core-site.xml", "hdfs-site.xml"]
    assert _site(client / "core-site.xml") == {"fs.defaultFS": f"hdfs://{NAMESERVICE}"}
    hdfs = _site(client / "hdfs-site.xml")
    assert hdfs["dfs.nameservices"] == NAMESERVICE and hdfs[f"dfs.ha.namenodes.{NAMESERVICE}"] == "nn1,nn2"
    assert hdfs[f"dfs.client.failover.proxy.provider.{NAMESERVICE}"].endswith(".ConfiguredFailoverProxyProvider")
    assert hdfs[f"dfs.namenode.rpc-address.{NAMESERVICE}.nn2"] == f"127.0.0.1:{ports['nn2_rpc']}"
    assert endpoints.uri == f"hdfs://{NAMESERVICE}" and endpoints.env() == {"HADOOP_CONF_DIR": str(client)}

    # sparkbarrier's WebHDFS layer finds both NameNodes from that folder alone, in order.
    found = namenodes(NAMESERVICE, str(client), hdfs)
    assert [n.url for n in found] == [endpoints.http["nn1"], endpoints.http["nn2"]]

    for nn in ("nn1", "nn2"):
        own = _site(pair.data / nn / "conf" / "hdfs-site.xml")
        assert own["dfs.ha.namenode.id"] == nn  # both listen on 127.0.0.1: the address cannot tell them apart
        assert own["dfs.namenode.name.dir"] == (pair.data / nn / "name").as_uri()
        assert own["dfs.namenode.shared.edits.dir"] == (pair.data / "shared-edits").as_uri()
        assert own["dfs.ha.fencing.methods"] == "shell(/bin/true)"
        assert own["dfs.ha.automatic-failover.enabled"] == "false"
    datanode = _site(pair.data / "datanode" / "conf" / "hdfs-site.xml")
    assert "dfs.ha.namenode.id" not in datanode and datanode["dfs.datanode.hostname"] == "127.0.0.1"


def test_the_kerberized_pairs_clients_conf_asks_for_spnego_at_localhost_and_holds_no_keytab(tmp_path: Path,
                                                                                            kdc) -> None:
    """The secure variant (``devstack/_hdfs_ha_kerberos.py``): clients learn only that the
    nameservice is Kerberized and where its NameNodes are, by the host their ``HTTP/``
    principal names; keytab paths go to the daemons' folders alone, and the merged keytab
    is private and holds both service keys. No server (tests/integration/test_hdfs_ha_kerberos.py
    runs it)."""
    pair = KerberosHdfsHaPair(tmp_path / "home", kdc)
    pair._write_confs(_free_ports())
    endpoints = pair.endpoints()
    client = endpoints.conf_dir
    assert _site(client / "core-site.xml")["hadoop.security.authentication"] == "kerberos"
    hdfs = _site(client / "hdfs-site.xml")
    assert not any("keytab" in key or pair.keytab in value for key, value in hdfs.items())
    assert hdfs["dfs.web.authentication.kerberos.principal"] == pair.service_principal == kdc.keytab("http")[0]
    assert [n.url for n in namenodes(NAMESERVICE, str(client), hdfs)] == [endpoints.http["nn1"], endpoints.http["nn2"]]
    assert all(url.startswith("http://localhost:") for url in endpoints.http.values())
    for daemon in ("nn1", "nn2", "datanode"):
        own = _site(pair.data / daemon / "conf" / "hdfs-site.xml")
        assert own["dfs.namenode.keytab.file"] == own["dfs.datanode.keytab.file"] == pair.keytab
        assert own["ignore.secure.ports.for.testing"] == "true" and own["dfs.block.access.token.enable"] == "true"
    assert stat.S_IMODE(os.stat(pair.keytab).st_mode) == 0o600
    listed = subprocess.run(["klist", "-k", pair.keytab], capture_output=True, text=True, timeout=30, check=True).stdout
    assert kdc.keytab("hdfs")[0] in listed and kdc.keytab("http")[0] in listed

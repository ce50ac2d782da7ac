"""The devstack's HDFS HA pair in Hadoop's secure mode: Kerberos RPC and SPNEGO WebHDFS.

Why. A production nameservice is Kerberized more often than not, and there WebHDFS
answers a request without an ``Authorization: Negotiate`` header with 401: sparkbarrier's
WebHDFS layer (``connectors/storage/_webhdfs.py``) must do the SPNEGO handshake with whichever
NameNode it calls, and follow a failover while doing so. Only a real secure NameNode
shows what it answers; ``tests/integration/test_hdfs_ha_kerberos.py`` drives this one.

What differs from :class:`~._hdfs_ha.HdfsHaPair` (everything else, life cycle included,
is the plain pair's):

* the NameNodes, the DataNode and the ``DFSHAAdmin`` tool log in as ``hdfs/localhost``
  (the KDC's ``hdfs`` role); the NameNodes' HTTP servers accept SPNEGO for
  ``HTTP/localhost`` (the ``http`` role). Hadoop reads both keys from one keytab (the
  image servlet's SPNEGO uses the NameNode's keytab), so ``up`` merges the two role
  keytabs with ``ktutil`` into ``<data>/hdfs.keytab`` (0600; never logged);
* the HTTP addresses are ``localhost:<port>``: a SPNEGO client derives the service
  principal ``HTTP/<host>`` from the URL's host, and ``localhost`` is the host every
  Kerberized server of the devstack is named by (the KDC's ``domain_realm`` maps it);
* ``dfs.block.access.token.enable`` (a secure NameNode refuses to start without it) and
  ``ignore.secure.ports.for.testing``: Hadoop's switch for a secure DataNode on
  unprivileged ports without SASL data-transfer protection (otherwise it needs root's
  ports through jsvc, or TLS plus SASL on every block);
* the JVMs get ``-Djava.security.krb5.conf`` (the KDC's file; ``/etc/krb5.conf`` is never
  read) and, for the admin tool, ``KRB5CCNAME`` naming a cache that ``kinit`` with the
  ``hdfs`` keytab fills before each command (the tool logs in from the ticket cache only);
* readiness: the active NameNode has a live DataNode (the plain pair's probe file is
  plain HTTP, which a secure NameNode refuses; the tests' first calls are the SPNEGO probe).

No service-level authorisation and permissions off, as in the plain pair: what is tested
is authentication, and who may do what is HDFS's business, not the client's.
"""

from __future__ import annotations

import base64
import http.client
import os
import subprocess
from collections.abc import Mapping
from urllib.parse import urlsplit

from .._exceptions import DevstackError
from ._hdfs_ha import HaEndpoints, HdfsHaPair
from ._kdc import KdcManifest, _tool

__all__ = ["HOST", "KerberosHdfsHaPair"]

HOST = "localhost"
_KINIT_TIMEOUT_S = 30.0
_HTTP_TIMEOUT_S = 10.0


class KerberosHdfsHaPair(HdfsHaPair):
    """The HA pair of ``home`` secured with the KDC of ``manifest`` (a running one)."""

    component = "hdfs-ha-krb"
    http_host = HOST

    def __init__(self, home: str | os.PathLike[str], manifest: KdcManifest, *,
                 environ: Mapping[str, str] | None = None, start_timeout_s: float = 180.0) -> None:
        super().__init__(home, environ=environ, start_timeout_s=start_timeout_s)
        self.manifest = manifest
        self._environ |= {"KRB5_CONFIG": manifest.krb5_conf, "KRB5CCNAME": f"FILE:{self.data / 'admin.ccache'}"}

    @property
    def keytab(self) -> str:
        return str(self.data / "hdfs.keytab")

    @property
    def service_principal(self) -> str:
        """The NameNodes' SPNEGO principal (``HTTP/localhost@REALM``)."""
        return self.manifest.keytab("http")[0]

    def _security(self) -> tuple[dict[str, object], dict[str, object], dict[str, object]]:
        self._merge_keytab()
        hdfs, http = self.manifest.keytab("hdfs")[0], self.service_principal
        core: dict[str, object] = {"hadoop.security.authentication": "kerberos"}
        both: dict[str, object] = {
            "dfs.namenode.kerberos.principal": hdfs,
            "dfs.datanode.kerberos.principal": hdfs,
            "dfs.web.authentication.kerberos.principal": http,
            "dfs.block.access.token.enable": "true",
        }
        daemons: dict[str, object] = {
            "dfs.namenode.keytab.file": self.keytab,
            "dfs.datanode.keytab.file": self.keytab,
            "dfs.web.authentication.kerberos.keytab": self.keytab,
            "dfs.namenode.kerberos.internal.spnego.principal": http,
            # WebHDFS's filter takes its type from here (default "simple": an anonymous user,
            # whom a secure NameNode then refuses with 403 SecurityException, never 401).
            "hadoop.http.authentication.type": "kerberos",
            "hadoop.http.authentication.kerberos.principal": http,
            "hadoop.http.authentication.kerberos.keytab": self.keytab,
            "ignore.secure.ports.for.testing": "true",
        }
        return core, both, daemons

    def _merge_keytab(self) -> None:
        """``<data>/hdfs.keytab``: the ``hdfs`` and ``http`` roles' keys, through ``ktutil``
        (commands on stdin; its output, which lists no keys, goes nowhere)."""
        self.data.mkdir(parents=True, exist_ok=True)
        script = "".join(f"rkt {self.manifest.keytab(role)[1]}\n" for role in ("hdfs", "http"))
        result = subprocess.run([_tool("ktutil")], input=f"{script}wkt {self.keytab}\nquit\n", text=True,
                                capture_output=True, env=self._environ, timeout=_KINIT_TIMEOUT_S, check=False)
        if result.returncode != 0 or not os.path.exists(self.keytab):
            raise DevstackError(f"ktutil could not merge the hdfs and HTTP keytabs (exit {result.returncode})",
                                fix="check that the KDC's keytabs exist (`devstack kdc up`)")
        os.chmod(self.keytab, 0o600)

    def _jvm_options(self) -> tuple[str, ...]:
        return (f"-Djava.security.krb5.conf={self.manifest.krb5_conf}", "-Dsun.security.krb5.disableReferrals=true")

    def _before_admin(self) -> None:
        principal = self.manifest.keytab("hdfs")[0]
        result = subprocess.run([_tool("kinit"), "-k", "-t", self.keytab, principal], env=self._environ,
                                stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=_KINIT_TIMEOUT_S,
                                check=False)
        if result.returncode != 0:
            raise DevstackError(f"kinit as {principal} for DFSHAAdmin failed: {result.stderr.strip()}",
                                fix="check the KDC (`devstack kdc up`)")

    def _get(self, url: str) -> tuple[int, bytes]:
        """GET with SPNEGO as ``hdfs/localhost`` (the admin's cache): a secure NameNode's
        HTTP server authenticates every path, ``/jmx`` included (Hadoop 3.5)."""
        import gssapi  # the devstack's Kerberos servers need the kerberos extra anyway

        if not (self.data / "admin.ccache").exists():
            self._before_admin()
        parts = urlsplit(url)
        # MIT reads KRB5_CONFIG from this process's environment, afresh per call.
        saved = os.environ.get("KRB5_CONFIG")
        os.environ["KRB5_CONFIG"] = self.manifest.krb5_conf
        try:
            creds = gssapi.Credentials(usage="initiate", store={"ccache": f"FILE:{self.data / 'admin.ccache'}"})
            name = gssapi.Name(f"HTTP@{parts.hostname}", gssapi.NameType.hostbased_service)
            token = gssapi.SecurityContext(name=name, creds=creds, usage="initiate").step() or b""
        finally:
            if saved is None:
                os.environ.pop("KRB5_CONFIG", None)
            else:
                os.environ["KRB5_CONFIG"] = saved
        conn = http.client.HTTPConnection(parts.hostname or HOST, parts.port, timeout=_HTTP_TIMEOUT_S)
        try:
            conn.request("GET", f"{parts.path}?{parts.query}",
                         headers={"Authorization": f"Negotiate {base64.b64encode(token).decode()}"})
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def _serves(self, endpoints: HaEndpoints, deadline: float) -> None:  # noqa: ARG002 -- the hook's signature
        self._wait_state("nn1", "active", deadline, live_datanode=True)

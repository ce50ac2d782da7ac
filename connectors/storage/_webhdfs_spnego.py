"""SPNEGO for WebHDFS: the ``Authorization: Negotiate`` header of each request to a NameNode of a
Kerberized HDFS, from the one Kerberos login every hop shares (``_kerberos_login``).

Why not ``requests-kerberos`` (fsspec's WebHDFS imports it when ``kerberos=True``): it
was never a dependency, so the first Kerberized nameservice failed with a bare
``ModuleNotFoundError`` (found against the devstack's Kerberized HA pair); and it is a
second Kerberos stack (pyspnego) whose refusals arrive as its own texts. Here the token
comes from :func:`~..kerberos._login.security_context`, the function the Kafka and HBase
hops call, on the ``gssapi`` package the ``kerberos`` extra already installs, and every
refusal goes through the one map by status code (:mod:`..kerberos._errors`): "no ticket"
says run ``kinit``, an unknown ``HTTP/<host>`` names the host. Keytab contents never leave
MIT's library, and this module logs nothing.

Who logs in: whoever the ticket cache holds (``KRB5CCNAME``, filled by ``kinit``), as
Hadoop's own client does; WebHDFS has no option of its own to name a principal or keytab.
The cache is read afresh for every request, so a ``kinit`` while a query runs takes effect.

Why a header on every NameNode request, without waiting for the 401: each NameNode of an
HA pair checks the token itself (its ``hadoop.auth`` cookie is signed with its own secret,
and requests' cookie jar sends one NameNode's cookie to the other on the same host), so
asking first saves a round trip per request and per failover and makes a retry the same
request again. After the first request the service ticket sits in the ticket cache: a
header costs local cryptography only. DataNode requests carry none: the NameNode's
redirect names a delegation token, and a DataNode has no ``HTTP/<host>`` principal to
ask for (requests drops the header on a redirect to another host).
"""

from __future__ import annotations

import base64

from ..kerberos._login import require_gssapi, security_context
from ..kerberos._settings import KerberosSettings, LoginOptions, OptionName

__all__ = ["AUTHENTICATION_KEY", "LOGIN_OPTIONS", "SETTINGS", "check_gssapi", "negotiate"]

AUTHENTICATION_KEY = "hadoop.security.authentication"
SETTINGS = KerberosSettings(service="HTTP")  # the ticket cache's principal, to HTTP/<NameNode host>
LOGIN_OPTIONS = LoginOptions(
    peer="the HDFS NameNodes' WebHDFS", peer_one="the NameNode",
    principal=OptionName("KRB5CCNAME", "the ticket cache's principal"),
    keytab=OptionName("KRB5CCNAME"),
    service=OptionName("HADOOP_CONF_DIR", "dfs.namenode.http-address"),
    service_fix=("the NameNode must be reached by the host name in its SPNEGO principal HTTP/<host> "
                 "(dfs.web.authentication.kerberos.principal): name that host, not an IP address, in "
                 "dfs.namenode.http-address of hdfs-site.xml (HADOOP_CONF_DIR) or in SPARKBARRIER_WEBHDFS"),
    enabled=OptionName(AUTHENTICATION_KEY), enabled_value="kerberos",
    keytab_login="`kinit -kt <keytab> <principal>` before the query (WebHDFS reads the ticket cache, as "
                 "Hadoop's client does)")
"""WebHDFS's names for the shared login's errors."""


def check_gssapi() -> None:
    """Raise :class:`~..._exceptions.ConfigError` naming ``hadoop.security.authentication``
    when the ``gssapi`` package (the ``kerberos`` extra) is missing; called when the client
    is built, before any request."""
    require_gssapi(LOGIN_OPTIONS)


def negotiate(host: str) -> str:
    """The ``Authorization`` value for a request to the NameNode at ``host``: a fresh
    SPNEGO/Kerberos token for ``HTTP/<host>`` as the ticket cache's principal. Raises
    :class:`~..._exceptions.KerberosError` (no ticket, unknown service principal, no
    KDC, ...), which no retry heals."""
    _context, token = security_context(SETTINGS, host, LOGIN_OPTIONS)
    return f"Negotiate {base64.b64encode(token).decode('ascii')}"

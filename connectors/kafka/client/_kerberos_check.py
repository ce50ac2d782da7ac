"""Driver, query start: can this query's Kerberos login reach the brokers' service? Fail fast.

kafka-python reports a refused GSSAPI login only as "Unable to bootstrap" after its
timeout, and librdkafka (the other preflight) cannot do GSSAPI here. So before the
first metadata request this module does what every connection will do: get the
principal's credentials (from the keytab, or the ticket cache) and start a security
context with ``<service>@<host>`` for each bootstrap host, which asks the KDC for a
ticket-granting ticket and a service ticket. Every Kerberos mistake shows up there,
within milliseconds, with MIT's status codes, and :func:`..kerberos._login.security_context`
maps them through the one map both hops share (:mod:`..kerberos._errors`) with Kafka's
option names (:data:`._kerberos.LOGIN_OPTIONS`):

* stale or wrong keytab (``Preauthentication failed``), a principal the KDC does not
  know, a keytab without the principal's key  -> ``kafka.sasl.jaas.config``;
* no service principal for ``<service>/<host>``     -> ``kafka.sasl.kerberos.service.name``
  and the host (Kerberos names the broker by the host the client connects to);
* no or expired ticket with ``useTicketCache=true`` -> run kinit, or use a keytab;
* no KDC answering                                  -> the krb5.conf (``KRB5_CONFIG``);
* clocks too far apart                              -> synchronise them.

The broker itself is not contacted here; the normal metadata request follows.
"""

from __future__ import annotations

from ...kerberos._login import security_context
from ...kerberos._settings import KerberosSettings
from ._kerberos import (
    JAAS as JAAS,  # the option these errors name, for callers and tests
    LOGIN_OPTIONS,
)

__all__ = ["check_kerberos"]


def check_kerberos(kerberos: KerberosSettings, bootstrap_servers: str,
                   domain_name: str | None = None) -> None:
    """Raise :class:`~sparkbarrier.KerberosError` (a ConfigError) naming the option when the
    login or a service ticket for a bootstrap host is refused; return when every host's
    ticket was granted."""
    hosts = sorted({domain_name or server.strip().rsplit(":", 1)[0].strip("[]")
                    for server in bootstrap_servers.split(",") if server.strip()})
    for host in hosts:
        security_context(kerberos, host, LOGIN_OPTIONS)  # logs in first: the same errors as every connection

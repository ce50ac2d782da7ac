"""Driver, query start: can this query's Kerberos login reach the brokers' service? Fail fast.

kafka-python reports a refused GSSAPI login only as "Unable to bootstrap" after its
timeout, and librdkafka (the other preflight) cannot do GSSAPI here. So before the
first metadata request this module does what every connection will do: get the
principal's credentials (from the keytab, or the ticket cache) and start a security
context with ``<service>@<host>`` for each bootstrap host, which asks the KDC for a
ticket-granting ticket and a service ticket. Every Kerberos mistake shows up there,
within milliseconds, with MIT's reason, and the login's errors name the option to fix
(the map both hops share, :func:`.._kerberos_login.login_error`, with Kafka's names):

* stale or wrong keytab (``Preauthentication failed``), a principal the KDC does not
  know, a keytab without the principal's key  -> ``kafka.sasl.jaas.config``;
* no service principal for ``<service>/<host>``     -> ``kafka.sasl.kerberos.service.name``
  and the host (Kerberos names the broker by the host the client connects to);
* no or expired ticket with ``useTicketCache=true`` -> run kinit, or use a keytab;
* no KDC answering                                  -> the krb5.conf (``KRB5_CONFIG``).

The broker itself is not contacted here; the normal metadata request follows.
"""

from __future__ import annotations

from ..._exceptions import KerberosError
from .._kerberos_login import gss_reason, login_error
from ._kerberos import (
    JAAS as JAAS,  # the option these errors name, for callers and tests
    LOGIN_OPTIONS,
    SERVICE,
    Kerberos,
    credentials,
)

__all__ = ["check_kerberos"]

# MIT Kerberos error code (krb5_err.et): ERROR_TABLE_BASE_krb5 + 7, as unsigned.
_S_PRINCIPAL_UNKNOWN = 2529638912 + 7


def _login_error(kerberos: Kerberos, exc: Exception) -> KerberosError:
    """The shared map (:func:`.._kerberos_login.login_error`) with Kafka's option names."""
    return login_error(kerberos.login, exc, LOGIN_OPTIONS)


def check_kerberos(kerberos: Kerberos, bootstrap_servers: str,
                   domain_name: str | None = None) -> None:
    """Raise :class:`KerberosError` (a ConfigError) naming the option when the login or a service ticket
    for a bootstrap host is refused; return when every host's ticket was granted."""
    import gssapi

    creds = credentials(kerberos)  # raises KerberosError naming kafka.sasl.jaas.config
    hosts = sorted({domain_name or server.strip().rsplit(":", 1)[0].strip("[]")
                    for server in bootstrap_servers.split(",") if server.strip()})
    for host in hosts:
        name = gssapi.Name(f"{kerberos.service_name}@{host}", gssapi.NameType.hostbased_service)
        try:
            gssapi.SecurityContext(name=name.canonicalize(gssapi.MechType.kerberos),
                                   usage="initiate", creds=creds).step()
        except gssapi.exceptions.GSSError as exc:
            code, reason = getattr(exc, "min_code", None), gss_reason(exc)
            if code == _S_PRINCIPAL_UNKNOWN or (
                    "not found in Kerberos database" in reason and "Server" in reason):
                raise KerberosError(
                    f"the KDC has no service principal {kerberos.service_name}/{host} "
                    f"({reason}); Kerberos names a broker by the host the client connects "
                    f"to: put the host name of the brokers' principals in "
                    f"kafka.bootstrap.servers (not an IP address or alias), and check "
                    f"{SERVICE!r} (the brokers' principals are <service>/<host>@<REALM>)",
                    option=SERVICE) from None
            raise _login_error(kerberos, exc) from None

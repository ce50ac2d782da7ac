"""Driver, query start: can this query's Kerberos login reach the brokers' service? Fail fast.

kafka-python reports a refused GSSAPI login only as "Unable to bootstrap" after its
timeout, and librdkafka (the other preflight) cannot do GSSAPI here. So before the
first metadata request this module does what every connection will do: get the
principal's credentials (from the keytab, or the ticket cache) and start a security
context with ``<service>@<host>`` for each bootstrap host, which asks the KDC for a
ticket-granting ticket and a service ticket. Every Kerberos mistake shows up there,
within milliseconds, with MIT's reason; this module names the option to fix:

* stale or wrong keytab (``Preauthentication failed``), a principal the KDC does not
  know, a keytab without the principal's key  -> ``kafka.sasl.jaas.config``;
* no service principal for ``<service>/<host>``     -> ``kafka.sasl.kerberos.service.name``
  and the host (Kerberos names the broker by the host the client connects to);
* no or expired ticket with ``useTicketCache=true`` -> run kinit, or use a keytab;
* no KDC answering                                  -> the krb5.conf (``KRB5_CONFIG``).

The broker itself is not contacted here; the normal metadata request follows.
"""

from __future__ import annotations

import os
import re

from ..._exceptions import KerberosError
from ._kerberos import JAAS, SERVICE, Kerberos, credentials

__all__ = ["check_kerberos"]

# MIT Kerberos error codes (krb5_err.et): ERROR_TABLE_BASE_krb5 + offset, as unsigned.
_BASE = 2529638912
_C_PRINCIPAL_UNKNOWN = _BASE + 6
_S_PRINCIPAL_UNKNOWN = _BASE + 7
_PREAUTH_FAILED = _BASE + 24
_MINOR = re.compile(r"Minor \(\d+\): (.*)$", re.DOTALL)


def _reason(exc: Exception) -> str:
    text = exc.gen_message() if hasattr(exc, "gen_message") else str(exc)
    found = _MINOR.search(text)
    return (found.group(1) if found else text).strip()


def _login_error(kerberos: Kerberos, exc: Exception) -> KerberosError:
    code, reason = getattr(exc, "min_code", None), _reason(exc)
    who = kerberos.principal or "the ticket cache's principal"
    if code == _PREAUTH_FAILED or "Preauthentication failed" in reason:
        return KerberosError(
            f"the KDC refused the Kerberos login of {who} ({reason}): the keytab "
            f"{kerberos.keytab!r} holds an old or another principal's key; export a current "
            f"keytab for {who} (kadmin ktadd, ipa-getkeytab) and check principal= in {JAAS!r}",
            option=JAAS)
    if code == _C_PRINCIPAL_UNKNOWN or "not found in Kerberos database" in reason:
        return KerberosError(
            f"the KDC does not know the principal {who} ({reason}); check principal= in "
            f"{JAAS!r} (with its @REALM) and that the principal exists", option=JAAS)
    if "Cannot contact any KDC" in reason or "Cannot find KDC" in reason:
        config = os.environ.get("KRB5_CONFIG", "/etc/krb5.conf")
        return KerberosError(
            f"no KDC answered for the Kerberos login of {who} ({reason}); check the realm's "
            f"kdc entries in {config} (KRB5_CONFIG; on executors spark.executorEnv."
            f"KRB5_CONFIG) and that the KDC is reachable", option=JAAS)
    if kerberos.keytab is None:
        cache = kerberos.ticket_cache or os.environ.get("KRB5CCNAME", "the default ticket cache")
        return KerberosError(
            f"no valid Kerberos ticket for {who} in {cache} ({reason}); run kinit as the "
            f"job's user (where the clients run), or log in with a keytab: {JAAS!r} = "
            f'...Krb5LoginModule required useKeyTab=true keyTab="..." principal="...";',
            option=JAAS)
    return KerberosError(f"the Kerberos login of {who} with keytab {kerberos.keytab!r} failed "
                       f"({reason}); check {JAAS!r}", option=JAAS)


def check_kerberos(kerberos: Kerberos, bootstrap_servers: str,
                   domain_name: str | None = None) -> None:
    """Raise :class:`KerberosError` (a ConfigError) naming the option when the login or a service ticket
    for a bootstrap host is refused; return when every host's ticket was granted."""
    import gssapi

    try:
        creds = credentials(kerberos)
        creds.lifetime  # noqa: B018 -- raises for an expired ticket cache
    except gssapi.exceptions.GSSError as exc:
        raise _login_error(kerberos, exc) from None
    hosts = sorted({domain_name or server.strip().rsplit(":", 1)[0].strip("[]")
                    for server in bootstrap_servers.split(",") if server.strip()})
    for host in hosts:
        name = gssapi.Name(f"{kerberos.service_name}@{host}", gssapi.NameType.hostbased_service)
        try:
            gssapi.SecurityContext(name=name.canonicalize(gssapi.MechType.kerberos),
                                   usage="initiate", creds=creds).step()
        except gssapi.exceptions.GSSError as exc:
            code, reason = getattr(exc, "min_code", None), _reason(exc)
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

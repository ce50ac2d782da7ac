"""The one map from a refused Kerberos login or service ticket to :class:`KerberosError`.

Both hops call it, for the login (``gss_acquire_cred_from``) and for the service ticket
(the first ``gss_init_sec_context`` step); each passes its
:class:`~._settings.LoginOptions`, so the message and ``option`` name the
option the user set on that hop.

Why status codes and not messages: MIT's messages change between releases and
locales, its codes are the contract. ``gssapi`` raises a ``GSSError`` with the GSS-API
major status (``maj_code``) and the Kerberos mechanism's minor status (``min_code``), a
``com_err`` code of MIT's error tables, as an unsigned 32-bit number. Each code below
was reproduced against MIT krb5 1.20 (Debian 12's KDC and client library, the
devstack's private KDC); ``tests/connectors/test_kerberos_codes.py`` keeps reproducing
every one:

* ``KRB5KDC_ERR_C_PRINCIPAL_UNKNOWN``: the KDC knows no such client -> UNKNOWN_PRINCIPAL;
* ``KRB5KDC_ERR_S_PRINCIPAL_UNKNOWN``: no ``<service>/<host>`` principal -> UNKNOWN_SERVICE;
* ``KRB5KDC_ERR_PREAUTH_FAILED``: the keytab's key is not the principal's -> STALE_KEYTAB;
* ``KRB5_FCC_NOFILE``: no cache file -> NO_TICKET; with a keytab, no key for the principal
  in it (MIT then looks for a cache; it is not ``KRB5_KT_NOTFOUND``) -> KEYTAB_WITHOUT_KEY;
* ``KRB5_CC_NOTFOUND``: no ticket for the principal in the cache -> NO_TICKET;
* ``KG_CCACHE_NOMATCH`` (the gssapi mechanism's table): the cache holds another
  principal -> NO_TICKET;
* major ``GSS_S_CREDENTIALS_EXPIRED`` (at login) and ``KRB5KRB_AP_ERR_TKT_EXPIRED`` (at
  the service ticket): the cached ticket ran out -> NO_TICKET;
* ``KRB5KRB_AP_ERR_SKEW``: clocks further apart than the allowed skew -> CLOCK_SKEW;
* ``KRB5_REALM_UNKNOWN`` (krb5.conf names no KDC for the realm), ``KRB5_KDC_UNREACH`` (no
  KDC answers) -> NO_KDC.

Any other code is :attr:`Refusal.OTHER`: the message carries MIT's reason and names the
options to check. Keytab contents never leave MIT's library; only the path appears.
"""

from __future__ import annotations

import contextlib
import enum
import os
import re
from collections.abc import Mapping

from ..._exceptions import KerberosError
from ._settings import KerberosSettings, LoginOptions

__all__ = ["MAJOR_CODES", "MINOR_CODES", "Refusal", "gss_reason", "kerberos_error", "refusal"]

# MIT's error tables (krb5_err.et, gssapi_err_krb5.et): table base + offset, as the
# unsigned 32-bit numbers gssapi reports (krb5.h spells them signed: base - 2**32).
_KRB5 = 2529638912
_K5G = 39756032
_TABLES = (_KRB5, _K5G)
# GSS-API major status: the routine error sits in bits 16-23 (RFC 2744).
_ROUTINE_SHIFT = 16
_CREDENTIALS_EXPIRED = 11


class Refusal(enum.Enum):
    """What a refused Kerberos step means for the user: each has its own fix."""

    NO_KDC = "no KDC answered"
    UNKNOWN_PRINCIPAL = "the KDC does not know the client principal"
    UNKNOWN_SERVICE = "the KDC does not know the peer's service principal"
    STALE_KEYTAB = "the keytab holds a key the KDC does not accept"
    KEYTAB_WITHOUT_KEY = "the keytab holds no key for the principal"
    NO_TICKET = "no valid ticket in the ticket cache"
    CLOCK_SKEW = "this machine's clock and the KDC's are too far apart"
    OTHER = "any other refusal"


MINOR_CODES: Mapping[int, Refusal] = {
    _KRB5 + 6: Refusal.UNKNOWN_PRINCIPAL,  # KRB5KDC_ERR_C_PRINCIPAL_UNKNOWN (-1765328378)
    _KRB5 + 7: Refusal.UNKNOWN_SERVICE,  # KRB5KDC_ERR_S_PRINCIPAL_UNKNOWN (-1765328377)
    _KRB5 + 24: Refusal.STALE_KEYTAB,  # KRB5KDC_ERR_PREAUTH_FAILED (-1765328360)
    _KRB5 + 32: Refusal.NO_TICKET,  # KRB5KRB_AP_ERR_TKT_EXPIRED (-1765328352)
    _KRB5 + 37: Refusal.CLOCK_SKEW,  # KRB5KRB_AP_ERR_SKEW (-1765328347)
    _KRB5 + 141: Refusal.NO_TICKET,  # KRB5_CC_NOTFOUND (-1765328243)
    _KRB5 + 154: Refusal.NO_KDC,  # KRB5_REALM_UNKNOWN (-1765328230)
    _KRB5 + 156: Refusal.NO_KDC,  # KRB5_KDC_UNREACH (-1765328228)
    _KRB5 + 195: Refusal.NO_TICKET,  # KRB5_FCC_NOFILE (-1765328189)
    _K5G + 0: Refusal.NO_TICKET,  # KG_CCACHE_NOMATCH
}
"""Minor status (the Kerberos mechanism's ``com_err`` code) -> refusal."""

MAJOR_CODES: Mapping[int, Refusal] = {
    _CREDENTIALS_EXPIRED: Refusal.NO_TICKET,  # GSS_S_CREDENTIALS_EXPIRED: minor is no krb5 code
}
"""GSS-API routine error (of the major status) -> refusal, where the minor code says nothing."""

_MAJOR = re.compile(r"^Major \(\d+\): ")
_MINOR = re.compile(r",? ?Minor \((\d+)\): (.*)$", re.DOTALL)


def _code(value: object) -> int | None:
    """A status code as gssapi reports it (unsigned 32-bit); ``krb5.h``'s signed form too."""
    return value & 0xFFFFFFFF if isinstance(value, int) and not isinstance(value, bool) else None


def _mit_minor(code: int | None) -> bool:
    """Whether a minor code is one of MIT's table codes (else it carries no reason of its own)."""
    return code is not None and any(base <= code < base + 256 for base in _TABLES)


def refusal(exc: BaseException, settings: KerberosSettings) -> Refusal:
    """What ``exc`` (a ``GSSError``, or anything else) means, from its status codes only.

    ``settings`` decides the one code whose meaning depends on the login: ``KRB5_FCC_NOFILE``
    is "no ticket cache" for a ticket-cache login, and "no key for the principal in the
    keytab" for a keytab login (MIT falls back to the cache when the keytab has none; our
    keytab logins use a private ``MEMORY:`` cache, so a missing cache file means the key).
    """
    minor = _code(getattr(exc, "min_code", None))
    found = MINOR_CODES.get(minor) if minor is not None else None
    if found is None:
        major = _code(getattr(exc, "maj_code", None))
        found = MAJOR_CODES.get((major >> _ROUTINE_SHIFT) & 0xFF) if major else None
    if found is Refusal.NO_TICKET and minor == _KRB5 + 195 and settings.keytab is not None:
        return Refusal.KEYTAB_WITHOUT_KEY
    return found or Refusal.OTHER


def gss_reason(exc: BaseException) -> str:
    """MIT's reason from a GSSError, on one line: the minor (mechanism) message when its code
    is one of MIT's (it says what went wrong: "Preauthentication failed"), else the major
    one ("The referenced credential has expired"); any other exception's text as it is."""
    gen = getattr(exc, "gen_message", None)
    text = str(exc)
    if callable(gen):
        with contextlib.suppress(TypeError, ValueError, AttributeError, UnicodeError):  # formatting only: str()
            text = str(gen())
    found = _MINOR.search(text)
    if found and _mit_minor(_code(getattr(exc, "min_code", int(found.group(1))))):
        text = found.group(2)
    elif found:
        text = _MAJOR.sub("", text[:found.start()])
    return " ".join(text.split())


def kerberos_error(settings: KerberosSettings, exc: BaseException, options: LoginOptions, *,
                   host: str | None = None, gateway: str | None = None) -> KerberosError:
    """The one map from a refused login (``host`` None) or service ticket for ``host`` to a
    :class:`KerberosError` naming ``options``' fix; ``gateway`` goes on the error (HBase)."""
    kind, reason = refusal(exc, settings), gss_reason(exc)
    minor = _code(getattr(exc, "min_code", None))
    code = minor if _mit_minor(minor) else _code(getattr(exc, "maj_code", None))
    who, keytab, where = settings.who, options.keytab, gateway or host

    def error(message: str, option: str | None) -> KerberosError:
        return KerberosError(message, option=option, gateway=gateway, code=code)

    if kind is Refusal.UNKNOWN_SERVICE:
        return error(f"the KDC has no service principal {settings.service}/{host} for {options.peer_one} "
                     f"{where} ({reason}); {options.service_fix}", options.service.key)
    if kind is Refusal.NO_KDC:
        config = os.environ.get("KRB5_CONFIG", "/etc/krb5.conf")
        return error(f"no KDC answered for the Kerberos login of {who} to {options.peer} ({reason}); check the "
                     f"realm's kdc entries in {config} (KRB5_CONFIG; on executors spark.executorEnv.KRB5_CONFIG) "
                     f"and that the KDC is reachable", keytab.key)
    if kind is Refusal.UNKNOWN_PRINCIPAL:
        return error(f"the KDC does not know the principal {who} ({reason}); check {options.principal} "
                     f"(with its @REALM) and that the principal exists", options.principal.key)
    if kind is Refusal.STALE_KEYTAB:
        return error(f"the KDC refused the Kerberos login of {who} ({reason}): the keytab {settings.keytab!r} "
                     f"holds an old key (the principal's key changed since it was exported) or another "
                     f"principal's; export a current keytab for {who} (kadmin ktadd, ipa-getkeytab), give it in "
                     f"{keytab} and check {options.principal}", keytab.key)
    if kind is Refusal.KEYTAB_WITHOUT_KEY:
        return error(f"the keytab {settings.keytab!r} holds no key for {who} ({reason}: with no key in the "
                     f"keytab MIT looks for a ticket cache); export a keytab for {who} (kadmin ktadd, "
                     f"ipa-getkeytab), give it in {keytab} and check {options.principal}", keytab.key)
    if kind is Refusal.CLOCK_SKEW:
        return error(f"the KDC refused the Kerberos {'ticket for ' + where if where else 'login'} of {who} "
                     f"({reason}): this machine's clock and the KDC's differ by more than the realm's allowed "
                     f"skew (krb5.conf clockskew, 5 minutes by default); synchronise the clocks (NTP) of the "
                     f"driver, every executor and the KDC", None)
    if kind is Refusal.NO_TICKET and settings.keytab is None:
        cache = settings.ticket_cache or os.environ.get("KRB5CCNAME", "the default ticket cache")
        return error(f"no valid Kerberos ticket for {who} in {cache} to reach {options.peer} ({reason}); run "
                     f"`kinit` as the job's user before the query, where the clients run (a ticket cache is not "
                     f"renewed: when it runs out, run kinit again), or log in with a keytab: "
                     f"{options.keytab_login}", keytab.key)
    if host is not None:
        return error(f"Kerberos to {options.peer_one} {where} as {settings.service}/{host} failed ({reason}); "
                     f"check {options.service} and {options.principal}", options.service.key)
    if settings.keytab is None:
        cache = settings.ticket_cache or os.environ.get("KRB5CCNAME", "the default ticket cache")
        return error(f"the Kerberos login of {who} from the ticket cache {cache} to {options.peer} failed "
                     f"({reason}); run `kinit` as the job's user before the query (run kinit again when it "
                     f"runs out), or log in with a keytab: {options.keytab_login}", keytab.key)
    return error(f"the Kerberos login of {who} with keytab {settings.keytab!r} to {options.peer} failed ({reason}); "
                 f"check {options.principal}, {keytab} and KRB5_CONFIG (the realm's KDC)", keytab.key)

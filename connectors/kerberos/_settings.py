"""The one Kerberos settings type of both hops, and how each hop names its options.

Kafka (GSSAPI through kafka-python) and HBase (SASL/GSSAPI to the Thrift gateways) log
in the same way: a principal, a keytab or a ticket cache, a service principal
``<service>/<host>`` on the other side. They used to parse into two classes
(``Kerberos`` and ``KerberosSettings``) wrapped into a third (``Login``) for the login
they share; one value now travels from each hop's option parser to the login, the
security context and the error map. What differs between the hops is only the
vocabulary of their errors, :class:`LoginOptions`: the same refused login names
``kafka.sasl.jaas.config`` on one hop and ``hbase.thrift.kerberos.client.*`` on the
other.

Nothing here imports ``gssapi``: the options parse (and pickle to executors) on a
machine without it; the login (:mod:`._login`) says how to get it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["KerberosSettings", "LoginOptions", "OptionName", "Qop"]


class Qop(enum.IntEnum):
    """RFC 4752 SASL security layers, as bit masks; larger is stronger."""

    AUTH = 1
    AUTH_INT = 2
    AUTH_CONF = 4

    @property
    def label(self) -> str:
        return {Qop.AUTH: "auth", Qop.AUTH_INT: "auth-int", Qop.AUTH_CONF: "auth-conf"}[self]


@dataclass(frozen=True)
class KerberosSettings:
    """Who logs in, how, and to which service. Picklable; nothing secret inside (a
    principal, paths, names), so it ships to executors with the options.

    ``keytab``: log in from this keytab (read on every machine whose client logs in,
    driver and executors). Without one, the ticket cache: ``ticket_cache`` (an MIT cache
    name such as ``FILE:/path``) or the process's default. ``use_ticket_cache`` with a
    keytab tries the ticket cache first and the keytab when it holds no valid ticket
    (Java's order). ``principal`` None: whoever the ticket cache holds.

    ``service``: the primary of the peer's principal ``<service>/<host>@REALM``. Its
    default is HBase's (``hbase``) because this is the public constructor of the HBase
    hop (``KerberosSettings(principal=..., keytab=...)``); the Kafka hop always sets it
    from ``kafka.sasl.kerberos.service.name``.

    ``qops``: the SASL layers the user accepts; the HBase hop uses the strongest its
    gateway also offers. The Kafka hop always agrees on ``auth`` (Kafka's brokers offer
    no other layer), so only the default means anything there.
    """

    principal: str | None = None
    keytab: str | None = None
    service: str = "hbase"
    qops: frozenset[Qop] = frozenset(Qop)
    ticket_cache: str | None = None
    use_ticket_cache: bool = False

    @property
    def who(self) -> str:
        """The principal as messages name it."""
        return self.principal or "the ticket cache's principal"

    def describe_qops(self) -> str:
        return ",".join(q.label for q in sorted(self.qops, reverse=True))


@dataclass(frozen=True)
class OptionName:
    """An option as an error names it: ``key`` is the error's ``option``; ``part`` the field
    inside it, for options that hold several (the JAAS line's ``principal=``)."""

    key: str
    part: str = ""

    def __str__(self) -> str:
        return f"{self.part} in {self.key!r}" if self.part else repr(self.key)


@dataclass(frozen=True)
class LoginOptions:
    """How one hop names its login, so the shared error map names that hop's own fix.

    ``peer``: what the login is for, in messages ("the Kafka brokers"); ``peer_one``: one
    of them ("the broker"). ``enabled`` set to ``enabled_value`` asks for Kerberos (named
    when the ``gssapi`` package is missing). ``keytab_login``: how to switch this hop to
    a keytab login. ``keytab_word``: what the hop's option calls the keytab (Java's JAAS
    line says ``keyTab``). ``service``: the option of the peer's service name;
    ``service_fix``: how to fix a service principal the KDC does not know, in the hop's
    words (which host name the client must use, and where it is set).
    """

    peer: str
    peer_one: str
    principal: OptionName
    keytab: OptionName
    service: OptionName
    service_fix: str
    enabled: OptionName
    enabled_value: str
    keytab_login: str
    keytab_word: str = "keytab"

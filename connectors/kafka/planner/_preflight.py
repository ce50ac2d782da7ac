"""Driver, query start: can these options log in and see the topics? Fail fast if not.

Errors that cannot heal (a wrong password, an untrusted or misnamed certificate, a
topic the principal may not read) must fail the query at once with the server's
reason and the option to fix, not after the lookup retries that exist for a broker
restart (kafka-python 3 only logs a failed SASL login and goes on bootstrapping until
its timeout: 133 s for a wrong password, ending in "Unable to bootstrap").

So before the planner's first lookup, one metadata request goes out through
librdkafka (confluent-kafka, already a dependency, and the library the executors
read with), with exactly the security settings the query's clients use. librdkafka
reports authentication and TLS failures through ``error_cb`` within a second or two.
A broker that is merely unreachable is not judged here: the planner's bounded
retries (``fetchOffset.*``) handle that as before.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from ...._exceptions import ConfigError
from .._options import KafkaSourceOptions
from ..client._secrets import SecretScrubber
from ..reader._librdkafka import Err

if TYPE_CHECKING:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient, ClusterMetadata

__all__ = ["check_access"]

log = logging.getLogger(__name__)

_BUDGET_S = 15.0


class _Errors:
    def __init__(self, scrub: SecretScrubber) -> None:
        self.scrub = scrub
        self._lock = threading.Lock()
        self.auth: str | None = None
        self.tls: str | None = None

    def __call__(self, err: KafkaError) -> None:
        code, text = err.code(), self.scrub(err.str())
        with self._lock:
            if code in (Err.AUTHENTICATION, Err.SASL_AUTHENTICATION_FAILED):
                self.auth = self.auth or text
            elif code == Err.SSL:
                self.tls = self.tls or text


def _metadata(config: dict[str, object], errors: _Errors,
              budget_s: float) -> tuple[AdminClient, ClusterMetadata | None]:
    """Metadata, or None when the budget ran out or a login/TLS error came first."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({**config, "error_cb": errors})  # type: ignore[dict-item]  # stubs omit callbacks
    deadline = time.monotonic() + budget_s
    while time.monotonic() < deadline and not (errors.auth or errors.tls):
        try:
            return admin, admin.list_topics(timeout=min(2.0, max(0.1, deadline - time.monotonic())))
        except Exception as exc:  # noqa: BLE001 -- KafkaException: timeout, judged by the caller
            log.debug("barrier-kafka: preflight metadata request: %s", errors.scrub(exc))
            admin.poll(0)
    return admin, None


def _raise_tls(options: KafkaSourceOptions, reason: str, host: bool) -> None:
    option = ("kafka.ssl.endpoint.identification.algorithm" if host
              else options.security.truststore.option if options.security.truststore
              else "kafka.ssl.truststore.location")
    fix = ("the broker's certificate does not name the host in kafka.bootstrap.servers; "
           "connect by a name the certificate holds" if host else
           "the broker's certificate is not signed by a CA in the truststore; give the "
           "cluster's CA")
    raise ConfigError(f"TLS handshake with {options.bootstrap_servers} failed: {reason}; {fix} "
                      f"(option {option!r})", option=option)


def check_access(options: KafkaSourceOptions, topics: list[str] | tuple[str, ...] = ()) -> None:
    """Raise :class:`ConfigError` naming the option when the login or TLS handshake is
    refused, or when a named topic is not authorized; return otherwise (also when
    the brokers cannot be reached: that is for the lookups' retries to judge).

    GSSAPI: librdkafka cannot log in with Kerberos here, so the login is checked with
    the KDC instead (:mod:`..client._kerberos_check`) and, with SASL_SSL, the TLS handshake with
    Python's ``ssl`` (what kafka-python uses); kafka-python's metadata request follows.
    """
    if options.security.kerberos is not None:
        from ..client._kerberos_check import check_kerberos

        check_kerberos(options.security.kerberos, options.bootstrap_servers,
                       options.client_configs.get("sasl_kerberos_domain_name"))
        if options.security.tls:
            _check_tls_handshake(options)
        return
    settings = options.librdkafka_settings()
    scrub = SecretScrubber(settings, log, level=logging.DEBUG)  # librdkafka's lines: DEBUG
    errors = _Errors(scrub)
    keep = ("bootstrap.servers", "client.id", "socket.timeout.ms", "client.dns.lookup")
    config: dict[str, object] = {k: v for k, v in settings.items()
                                 if k in keep or k.startswith(("security.", "sasl.", "ssl."))}
    config["logger"] = scrub
    admin, metadata = _metadata(config, errors, _BUDGET_S)
    if errors.auth:
        who = f"user {options.security.username!r}" if options.security.username else "the client"
        raise ConfigError(
            f"Kafka at {options.bootstrap_servers} refused the login of {who} "
            f"({options.security.mechanism or options.security.protocol}): {errors.auth}; check "
            f"the credentials in 'kafka.sasl.jaas.config'", option="kafka.sasl.jaas.config")
    if errors.tls:
        # OpenSSL reports a name mismatch as a failed verification; ask again without the
        # name check to tell the two apart for the error message.
        host = False
        if options.security.check_hostname:
            retry = _Errors(scrub)
            _, unnamed = _metadata({**config, "ssl.endpoint.identification.algorithm": "none"},
                                   retry, 5.0)
            host = unnamed is not None and not retry.tls
        _raise_tls(options, errors.tls, host)
    if metadata is None:
        return
    for topic in topics:
        try:
            found = admin.list_topics(topic=topic, timeout=5.0).topics.get(topic)
        except Exception as exc:  # noqa: BLE001 -- KafkaException: the lookups judge it
            log.debug("barrier-kafka: preflight metadata of %r: %s", topic, scrub(exc))
            continue
        if found is not None and found.error is not None and \
                found.error.code() == Err.TOPIC_AUTHORIZATION_FAILED:
            who = options.security.username or "the client's principal"
            raise ConfigError(
                f"{who!s} may not read topic {topic!r} (TOPIC_AUTHORIZATION_FAILED from "
                f"{options.bootstrap_servers}); grant it READ and DESCRIBE on the topic, or "
                f"change 'subscribe'/'assign'", option="subscribe" if options.topics else "assign")


_HOSTNAME_MISMATCH = 62  # X509_V_ERR_HOSTNAME_MISMATCH


def _check_tls_handshake(options: KafkaSourceOptions) -> None:
    """A TLS handshake with each bootstrap server, with the query's CA, client
    certificate and hostname rule; a refused certificate fails like librdkafka's
    preflight. Unreachable servers are left to the lookups' retries."""
    import socket
    import ssl

    pem = options.security.pem()
    context = ssl.create_default_context(cafile=pem.cafile)
    context.check_hostname = options.security.check_hostname
    if pem.certfile is not None:
        context.load_cert_chain(pem.certfile, pem.keyfile, pem.key_password)
    for server in options.bootstrap_servers.split(","):
        host, _, port = server.strip().rpartition(":")
        host = host.strip("[]")
        try:
            with socket.create_connection((host, int(port)), timeout=10) as sock, \
                    context.wrap_socket(sock, server_hostname=host):
                pass
        except ssl.SSLCertVerificationError as exc:
            _raise_tls(options, exc.verify_message or str(exc),
                       exc.verify_code == _HOSTNAME_MISMATCH)
        except (OSError, ValueError) as exc:
            log.debug("barrier-kafka: preflight TLS handshake with %s: %s", server, exc)

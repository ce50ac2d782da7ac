"""The dev stack broker's secured side: TLS listeners, SCRAM users and ACLs.

Beside the PLAINTEXT listener every existing test and the demo use (unchanged, full
rights), the same KRaft process serves:

* ``SASL_SSL``  -- SCRAM-SHA-512 over TLS (the MSK / on-prem setup);
* ``MTLS``      -- TLS with required client certificates, the certificate's CN is the
  principal (``CN=reader`` is ``User:reader``);
* ``WRONGHOST`` -- SASL_SSL again, with a server certificate naming only
  ``wrong-host.invalid``: hostname verification must reject it.

Users (SCRAM, created when the storage is formatted; random passwords per start):
``admin`` (super user), ``reader`` (reads ``secure-*`` topics, uses ``secure-*`` groups),
``nogroup`` (reads the topics, no group rights), ``norights`` (nothing). Authorization
is KRaft's StandardAuthorizer; the PLAINTEXT and CONTROLLER listeners' principal
(``User:ANONYMOUS``) is a super user, so the unsecured side works as before.

Everything a test needs is in one JSON manifest (0600), named by
``SPARKBARRIER_KAFKA_SECURITY`` in ``devstack env``.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._exceptions import DevstackError
from . import _certs
from ._config import Port

__all__ = ["MANIFEST", "acls", "listener_settings", "manifest_path", "prepare", "probe",
           "scram_format_args"]

log = logging.getLogger(__name__)

MANIFEST = "kafka-security.json"
MECHANISM = "SCRAM-SHA-512"
USERS = ("admin", "reader", "nogroup", "norights")
TOPIC_PREFIX = "secure-"
GROUP_PREFIX = "secure-"
_WRONG_HOST = "wrong-host.invalid"


def manifest_path(tls_dir: Path) -> Path:
    return tls_dir / MANIFEST


def _material(tls_dir: Path, password: str, keytool: Path) -> dict[str, Any]:
    """Generate the CA, certificates and stores (every start: a second or two, never stale)."""
    d = _certs.private_dir(tls_dir)
    ca = _certs.make_ca(d, "ca")
    other = _certs.make_ca(d, "other-ca")
    server = _certs.issue(ca, d, "server", common_name="localhost", usage=_certs.Usage.SERVER,
                          dns=["localhost"], ips=["127.0.0.1"])
    wrong = _certs.issue(ca, d, "wrong-host", common_name=_WRONG_HOST,
                         usage=_certs.Usage.SERVER, dns=[_WRONG_HOST])
    client = _certs.issue(ca, d, "reader", common_name="reader", usage=_certs.Usage.CLIENT)
    truststore = _certs.write_truststore
    client_p12 = _certs.write_pkcs12(client, d / "client.p12", password)
    return {
        "ca": {"pem": ca.cert_pem,
               "pkcs12": truststore(ca.cert_pem, d / "ca.p12", password,
                                    store_type=_certs.StoreType.PKCS12, keytool=keytool),
               "jks": truststore(ca.cert_pem, d / "ca.jks", password,
                                 store_type=_certs.StoreType.JKS, keytool=keytool)},
        "other_ca": {"pem": other.cert_pem,
                     "jks": truststore(other.cert_pem, d / "other-ca.jks", password,
                                       store_type=_certs.StoreType.JKS, keytool=keytool)},
        "server": _certs.write_pkcs12(server, d / "server.p12", password),
        "wrong_host": _certs.write_pkcs12(wrong, d / "wrong-host.p12", password),
        "client": {"cn": "reader", "pkcs12": client_p12,
                   "jks": _certs.write_jks_keystore(client_p12, d / "client.jks", password,
                                                    keytool=keytool),
                   "cert_pem": client.cert_pem, "key_pem": client.key_pem},
    }


def prepare(tls_dir: Path, keytool: Path) -> dict[str, Any]:
    """Fresh key material and passwords; returns the manifest without endpoints (the
    ports are added by :func:`listener_settings`'s caller once chosen)."""
    store_password = secrets.token_urlsafe(18)
    material = _material(tls_dir, store_password, keytool)
    return {"version": 1, "mechanism": MECHANISM, "store_password": store_password,
            "users": {u: secrets.token_urlsafe(18) for u in USERS},
            "topic_prefix": TOPIC_PREFIX, "group_prefix": GROUP_PREFIX,
            **json.loads(json.dumps(material, default=str))}


def listener_settings(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """server.properties entries for the secured listeners (merged with the PLAINTEXT
    and CONTROLLER ones by the caller)."""
    password = manifest["store_password"]
    scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
    out: dict[str, Any] = {
        "sasl.enabled.mechanisms": MECHANISM,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS;User:admin",
        "allow.everyone.if.no.acl.found": "false",
    }
    stores = {"sasl_ssl": manifest["server"], "mtls": manifest["server"],
              "wronghost": manifest["wrong_host"]}
    for name, keystore in stores.items():
        prefix = f"listener.name.{name}."
        out.update({prefix + "ssl.keystore.location": keystore,
                    prefix + "ssl.keystore.type": "PKCS12",
                    prefix + "ssl.keystore.password": password,
                    prefix + "ssl.key.password": password})
        if name != "mtls":
            out[prefix + f"{MECHANISM.lower()}.sasl.jaas.config"] = scram
    out.update({"listener.name.mtls.ssl.client.auth": "required",
                "listener.name.mtls.ssl.truststore.location": manifest["ca"]["pkcs12"],
                "listener.name.mtls.ssl.truststore.type": "PKCS12",
                "listener.name.mtls.ssl.truststore.password": password,
                "listener.name.mtls.ssl.principal.mapping.rules":
                    "RULE:^.*CN=([^,]*).*$/$1/,DEFAULT"})
    return out


LISTENERS = {"SASL_SSL": (Port.KAFKA_SASL_SSL, "SASL_SSL"),
             "MTLS": (Port.KAFKA_MTLS, "SSL"),
             "WRONGHOST": (Port.KAFKA_WRONG_HOST, "SASL_SSL")}


def scram_format_args(manifest: Mapping[str, Any]) -> list[str]:
    """``StorageTool format`` arguments creating the SCRAM users with the storage."""
    args: list[str] = []
    for user, password in manifest["users"].items():
        args += ["--add-scram", f"{MECHANISM}=[name={user},password={password}]"]
    return args


def acls(plaintext: str) -> None:
    """Create the ACLs through the PLAINTEXT listener (its principal is a super user)."""
    from kafka import KafkaAdminClient
    from kafka.admin import (
        ACL,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        ResourcePattern,
        ResourceType,
    )

    def allow(user: str, kind: Any, prefix: str, op: Any) -> Any:
        return ACL(principal=f"User:{user}", host="*", operation=op,
                   permission_type=ACLPermissionType.ALLOW,
                   resource_pattern=ResourcePattern(kind, prefix, ACLResourcePatternType.PREFIXED))

    wanted = [allow(u, ResourceType.TOPIC, TOPIC_PREFIX, op) for u in ("reader", "nogroup")
              for op in (ACLOperation.READ, ACLOperation.DESCRIBE)]
    wanted += [allow("reader", ResourceType.GROUP, GROUP_PREFIX, op)
               for op in (ACLOperation.READ, ACLOperation.DESCRIBE)]
    admin = KafkaAdminClient(bootstrap_servers=plaintext, request_timeout_ms=30_000)
    try:
        result = admin.create_acls(wanted)
    finally:
        admin.close()
    failed = result.get("failed") or []
    if failed:
        raise DevstackError(f"kafka: {len(failed)} ACL(s) could not be created: {failed[0][1]!r}",
                            fix="read <home>/logs/kafka.log")


def _login(manifest: Mapping[str, Any], budget_s: float) -> None:
    from kafka import KafkaConsumer

    timeout = int(min(budget_s, 20.0) * 1000)
    common = {"request_timeout_ms": max(timeout, 5000) + 1000,
              "ssl_cafile": manifest["ca"]["pem"], "enable_auto_commit": False}
    for extra in ({"bootstrap_servers": manifest["sasl_ssl"], "security_protocol": "SASL_SSL",
                   "sasl_mechanism": MECHANISM, "sasl_plain_username": "reader",
                   "sasl_plain_password": manifest["users"]["reader"]},
                  {"bootstrap_servers": manifest["ssl"], "security_protocol": "SSL",
                   "ssl_certfile": manifest["client"]["cert_pem"],
                   "ssl_keyfile": manifest["client"]["key_pem"]}):
        consumer = KafkaConsumer(**common, **extra)
        try:
            consumer.topics()
        finally:
            consumer.close()


def probe(manifest_file: Path, *, deadline: float) -> None:
    """A SCRAM login over SASL_SSL and an mTLS connection both work; retried until
    ``deadline`` (``time.monotonic()``); raises ``DevstackError`` when it passes."""
    from kafka.errors import KafkaError

    manifest = json.loads(manifest_file.read_text())
    last: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            _login(manifest, max(5.0, deadline - time.monotonic()))
            return
        except (KafkaError, OSError) as exc:
            last = exc
            log.debug("kafka secured probe not yet successful: %r", exc)
            time.sleep(0.5)
    raise DevstackError(f"kafka's secured listeners did not accept the test logins in time "
                        f"(last error: {type(last).__name__}: {last})",
                        fix="read <home>/logs/kafka.log; then `python -m sparkbarrier.devstack "
                            "down` and `up`")


def write_manifest(path: Path, manifest: Mapping[str, Any]) -> Path:
    _certs.private_dir(path.parent)
    return _certs.write_private(path, json.dumps(manifest, indent=2, sort_keys=True))

"""Test certificates for the dev stack's TLS servers: a CA, server and client certs,
written as PEM, PKCS12 and JKS (the three forms users hand to Kafka clients).

Made with ``cryptography`` (a dependency of the source already) and, for JKS only,
the JDK's ``keytool``, which the stack's JVM servers bring anyway. Nothing here is
for production: keys are EC P-256, certificates live two years, passwords are random
per stack. Files are 0600 in a 0700 directory.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._exceptions import DevstackError

__all__ = ["Issued", "issue", "make_ca", "private_dir", "write_jks", "write_key_pem",
           "write_pem", "write_pkcs12", "write_truststore"]


@dataclass(frozen=True)
class Issued:
    """A certificate and its private key (``cryptography`` objects)."""

    cert: Any
    key: Any


def private_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def _write(path: Path, data: bytes) -> Path:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    return path


def _name(cn: str) -> Any:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "sparkbarrier devstack"),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _build(subject: str, key: Any, issuer: Issued | None, *, ca: bool,
           dns: Sequence[str] = (), ips: Sequence[str] = (), client: bool = False) -> Any:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID

    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder()
               .subject_name(_name(subject))
               .issuer_name(issuer.cert.subject if issuer else _name(subject))
               .public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(hours=1))
               .not_valid_after(now + datetime.timedelta(days=730))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
            key_encipherment=False, data_encipherment=False, key_agreement=False,
            encipher_only=False, decipher_only=False), critical=True)
    else:
        names = [x509.DNSName(d) for d in dns] + [x509.IPAddress(ipaddress.ip_address(i))
                                                  for i in ips]
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    signer = issuer.key if issuer else key
    return builder.sign(signer, hashes.SHA256())


def make_ca(cn: str) -> Issued:
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    return Issued(_build(cn, key, None, ca=True), key)


def issue(ca: Issued, cn: str, *, dns: Sequence[str] = (), ips: Sequence[str] = (),
          client: bool = False) -> Issued:
    """A leaf certificate signed by ``ca`` naming ``dns`` and ``ips`` (server) or for
    client authentication (``client=True``; the CN is the principal)."""
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    return Issued(_build(cn, key, ca, ca=False, dns=dns, ips=ips, client=client), key)


def write_pem(path: Path, *certs: Any) -> Path:
    from cryptography.hazmat.primitives import serialization

    return _write(path, b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs))


def write_key_pem(path: Path, issued: Issued, password: str | None = None) -> Path:
    from cryptography.hazmat.primitives import serialization

    enc = (serialization.BestAvailableEncryption(password.encode()) if password
           else serialization.NoEncryption())
    return _write(path, issued.key.private_bytes(serialization.Encoding.PEM,
                                                 serialization.PrivateFormat.PKCS8, enc))


def write_pkcs12(path: Path, issued: Issued, chain: Sequence[Any], password: str,
                 alias: str = "key") -> Path:
    """A PKCS12 keystore: ``issued``'s key and certificate, then ``chain``."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    return _write(path, pkcs12.serialize_key_and_certificates(
        alias.encode(), issued.key, issued.cert, list(chain),
        serialization.BestAvailableEncryption(password.encode())))


def _keytool(args: list[str], password: str, what: str) -> None:
    tool = shutil.which("keytool")
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.access(Path(java_home) / "bin" / "keytool", os.X_OK):
        tool = str(Path(java_home) / "bin" / "keytool")
    if tool is None:
        raise DevstackError("keytool not found (it ships with the JDK)",
                            fix="install a JDK 17 and put it on PATH or set JAVA_HOME")
    env = {**os.environ, "SB_STORE_PASS": password}
    result = subprocess.run([tool, *args], env=env, stdin=subprocess.DEVNULL,
                            capture_output=True, timeout=120, check=False)
    if result.returncode != 0:
        raise DevstackError(f"keytool could not write {what}: "
                            f"{result.stdout.decode(errors='replace')[-300:]}",
                            fix="check the JDK's keytool")


def write_truststore(path: Path, ca_pem: Path, password: str, store_type: str) -> Path:
    """A truststore (``JKS`` or ``PKCS12``) holding the CA in ``ca_pem``, as keytool makes it."""
    path.unlink(missing_ok=True)
    _keytool(["-importcert", "-noprompt", "-alias", "ca", "-file", str(ca_pem), "-keystore",
              str(path), "-storetype", store_type, "-storepass:env", "SB_STORE_PASS"],
             password, str(path))
    os.chmod(path, 0o600)
    return path


def write_jks(path: Path, pkcs12_path: Path, password: str) -> Path:
    """A JKS keystore converted from a PKCS12 one (same password for store and key)."""
    path.unlink(missing_ok=True)
    _keytool(["-importkeystore", "-noprompt", "-srckeystore", str(pkcs12_path),
              "-srcstoretype", "PKCS12", "-srcstorepass:env", "SB_STORE_PASS",
              "-destkeystore", str(path), "-deststoretype", "JKS",
              "-deststorepass:env", "SB_STORE_PASS", "-destkeypass:env", "SB_STORE_PASS"],
             password, str(path))
    os.chmod(path, 0o600)
    return path

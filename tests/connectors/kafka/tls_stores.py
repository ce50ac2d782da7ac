"""Test-only key material: a CA, a client certificate and its stores in every format.

Made with ``cryptography`` and the JDK's ``keytool`` (the same tools the conversion
uses in reverse), so the unit tests of the security options need no broker.
"""

from __future__ import annotations

import datetime
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

PASSWORD = "store-secret-123"


@dataclass(frozen=True)
class Stores:
    ca_pem: Path
    ca_p12: Path
    ca_jks: Path
    client_p12: Path
    client_jks: Path
    client_pem: Path  # certificate + encrypted key in one file
    ca_subject: str


def _cert(subject: str, key, issuer: str, issuer_key, *, ca: bool) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    return (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
            .sign(issuer_key, hashes.SHA256()))


def make_stores(directory: Path) -> Stores:
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert("unit-ca", ca_key, "unit-ca", ca_key, ca=True)
    key = ec.generate_private_key(ec.SECP256R1())
    client = _cert("reader", key, "unit-ca", ca_key, ca=False)
    pem = serialization.Encoding.PEM
    out = {name: directory / name for name in
           ("ca.pem", "ca.p12", "ca.jks", "client.p12", "client.jks", "client.pem")}
    out["ca.pem"].write_bytes(ca.public_bytes(pem))
    enc = serialization.BestAvailableEncryption(PASSWORD.encode())
    out["client.p12"].write_bytes(pkcs12.serialize_key_and_certificates(
        b"reader", key, client, [ca], enc))
    out["client.pem"].write_bytes(client.public_bytes(pem) + key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, enc))
    for store, kind in ((out["ca.jks"], "JKS"), (out["ca.p12"], "PKCS12")):
        subprocess.run(["keytool", "-importcert", "-noprompt", "-alias", "ca", "-file",
                        str(out["ca.pem"]), "-keystore", str(store), "-storetype", kind,
                        "-storepass", PASSWORD], check=True, capture_output=True, timeout=60)
    subprocess.run(["keytool", "-importkeystore", "-noprompt", "-srckeystore",
                    str(out["client.p12"]), "-srcstoretype", "PKCS12", "-srcstorepass", PASSWORD,
                    "-destkeystore", str(out["client.jks"]), "-deststoretype", "JKS",
                    "-deststorepass", PASSWORD, "-destkeypass", PASSWORD],
                   check=True, capture_output=True, timeout=60)
    return Stores(out["ca.pem"], out["ca.p12"], out["ca.jks"], out["client.p12"],
                  out["client.jks"], out["client.pem"], "unit-ca")

"""Test certificate authorities, certificates and key stores for the dev stack's TLS.

Why shell out instead of a Python library: every machine that runs the stack already
has Debian's ``openssl`` and the JDK's ``keytool`` (the servers need a JDK), so TLS
material costs no new dependency and no download. ``openssl`` makes keys,
certificates and PKCS12 files; ``keytool`` only writes what needs Java's own
formats (JKS, and PKCS12 *truststores*, whose trusted-certificate entries openssl
3.0 cannot mark the way Java reads them).

Secrets never reach a command line (visible to every user in ``ps``): store
passwords go to the tools through the environment (``-passout env:``,
``-storepass:env``). Every file is written 0600 inside a directory made 0700; the
generated keys are unencrypted PKCS#8 PEM, so that directory is what protects them.

The API is generic (used for Kafka's listeners and HBase Thrift's TLS):
``make_ca`` → ``issue(ca, ..., dns=..., ips=...)`` → ``write_pkcs12`` /
``write_jks_keystore`` / ``write_truststore``. Not thread-safe per directory.
"""

from __future__ import annotations

import enum
import os
import re
import secrets
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .._exceptions import DevstackError

__all__ = [
    "Issued",
    "StoreType",
    "Usage",
    "find_openssl",
    "issue",
    "keytool_of",
    "make_ca",
    "private_dir",
    "subject_alt_names",
    "valid_for",
    "write_jks_keystore",
    "write_pkcs12",
    "write_truststore",
]

DEFAULT_DAYS = 825  # longest leaf validity Apple/Chrome accept; irrelevant to Java
_PASSWORD_ENV = "SPARKBARRIER_CERTS_STORE_PASSWORD"
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.\-_ ]{0,62}$")
_OPENSSL_HINT = "install Debian's openssl (`apt-get install openssl`); ./dev does this"


class Usage(enum.Enum):
    """What a leaf certificate is for (its extendedKeyUsage)."""

    SERVER = "serverAuth,clientAuth"  # brokers also connect to each other as clients
    CLIENT = "clientAuth"


class StoreType(enum.Enum):
    """Key store formats Java clients accept as ``*.type``."""

    JKS = "JKS"
    PKCS12 = "PKCS12"


@dataclass(frozen=True)
class Issued:
    """A certificate and its private key as PEM files; ``chain`` is the issuing CA's
    certificate (None for a self-signed CA), appended when a key store is written."""

    name: str
    cert_pem: Path
    key_pem: Path
    chain: Path | None = None


def find_openssl() -> Path:
    """The ``openssl`` on PATH; ``DevstackError`` naming the package when missing."""
    found = shutil.which("openssl")
    if found is None:
        raise DevstackError("openssl not found on PATH", fix=_OPENSSL_HINT)
    return Path(found)


def keytool_of(java_executable: Path) -> Path:
    """The ``keytool`` next to a checked ``java`` (same JDK, so the same formats)."""
    keytool = Path(java_executable).resolve().parent / "keytool"
    if not os.access(keytool, os.X_OK):
        raise DevstackError(f"no keytool next to {java_executable}",
                            fix="install a full JDK 17+ (openjdk-17-jdk-headless)")
    return keytool


def private_dir(path: Path) -> Path:
    """Create ``path`` (and parents) and make it 0700; return it."""
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o700)
    return path


def write_private(path: Path, text: str) -> Path:
    """Write ``text`` to ``path``, readable by this user only from the first byte (0600):
    the devstack's server configs and manifests hold store passwords."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    return path


def make_ca(directory: Path, name: str, *, days: int = DEFAULT_DAYS) -> Issued:
    """A self-signed CA (``CN=<name>``) as ``<name>.pem`` + ``<name>.key`` in
    ``directory``. Overwrites existing files of that name."""
    ca = _paths(directory, name)
    config = _config(name, [
        "basicConstraints = critical,CA:TRUE,pathlen:0",
        "keyUsage = critical,keyCertSign,cRLSign",
        "subjectKeyIdentifier = hash",
    ])
    with _TempConfig(directory, name, config) as cfg:
        _run(find_openssl(), "req", "-x509", "-new", "-newkey", "rsa:2048", "-nodes",
             "-sha256", "-days", str(days), "-keyout", str(ca.key_pem),
             "-out", str(ca.cert_pem), "-config", str(cfg), "-extensions", "ext")
    _protect(ca.cert_pem, ca.key_pem)
    return ca


def issue(
    ca: Issued,
    directory: Path,
    name: str,
    *,
    common_name: str,
    usage: Usage,
    dns: Sequence[str] = (),
    ips: Sequence[str] = (),
    days: int = DEFAULT_DAYS,
) -> Issued:
    """A key + certificate ``CN=<common_name>`` signed by ``ca``, naming ``dns`` and
    ``ips`` as subjectAltNames (what hostname verification checks; the CN is not).
    Written as ``<name>.pem`` / ``<name>.key``; overwrites them."""
    leaf = _paths(directory, name)
    alt = [f"DNS:{d}" for d in dns] + [f"IP:{i}" for i in ips]
    for entry in alt:
        if not re.fullmatch(r"(DNS|IP):[A-Za-z0-9.:*\-]+", entry):
            raise ValueError(f"not a DNS name or IP address: {entry!r}")
    extensions = [
        "basicConstraints = critical,CA:FALSE",
        "keyUsage = critical,digitalSignature,keyEncipherment",
        f"extendedKeyUsage = {usage.value}",
        "subjectKeyIdentifier = hash",
        "authorityKeyIdentifier = keyid",
    ]
    if alt:
        extensions.append("subjectAltName = " + ",".join(alt))
    openssl = find_openssl()
    csr = directory / f"{name}.csr"
    with _TempConfig(directory, name, _config(common_name, extensions)) as cfg:
        try:
            _run(openssl, "req", "-new", "-newkey", "rsa:2048", "-nodes", "-sha256",
                 "-keyout", str(leaf.key_pem), "-out", str(csr), "-config", str(cfg))
            _run(openssl, "x509", "-req", "-in", str(csr), "-CA", str(ca.cert_pem),
                 "-CAkey", str(ca.key_pem), "-set_serial", "0x" + secrets.token_hex(16),
                 "-sha256", "-days", str(days), "-extfile", str(cfg), "-extensions", "ext",
                 "-out", str(leaf.cert_pem))
        finally:
            csr.unlink(missing_ok=True)
    _protect(leaf.cert_pem, leaf.key_pem)
    return Issued(name=name, cert_pem=leaf.cert_pem, key_pem=leaf.key_pem, chain=ca.cert_pem)


def write_pkcs12(issued: Issued, path: Path, password: str) -> Path:
    """Key + certificate (+ CA chain) as a PKCS12 key store, alias ``issued.name``.

    Java, Python's ``cryptography`` and librdkafka all open it (AES-256 + PBKDF2, the
    openssl 3 default; Java reads it since 8u301/11.0.12)."""
    args = ["pkcs12", "-export", "-in", str(issued.cert_pem), "-inkey", str(issued.key_pem),
            "-name", issued.name, "-out", str(path), "-passout", f"env:{_PASSWORD_ENV}"]
    if issued.chain is not None:
        args += ["-certfile", str(issued.chain)]
    _run(find_openssl(), *args, password=password)
    _protect(path)
    return path


def write_jks_keystore(pkcs12: Path, path: Path, password: str, *, keytool: Path) -> Path:
    """Convert a PKCS12 key store written by ``write_pkcs12`` (same password) to JKS;
    the key password equals the store password, as Java clients assume by default."""
    path.unlink(missing_ok=True)
    _run(keytool, "-importkeystore", "-noprompt",
         "-srckeystore", str(pkcs12), "-srcstoretype", "PKCS12",
         "-srcstorepass:env", _PASSWORD_ENV,
         "-destkeystore", str(path), "-deststoretype", "JKS",
         "-deststorepass:env", _PASSWORD_ENV, password=password)
    _protect(path)
    return path


def write_truststore(ca_pem: Path, path: Path, password: str, *, store_type: StoreType,
                     keytool: Path, alias: str = "ca") -> Path:
    """A trust store holding one trusted CA certificate (JKS or PKCS12)."""
    path.unlink(missing_ok=True)
    _run(keytool, "-importcert", "-noprompt", "-alias", alias, "-file", str(ca_pem),
         "-keystore", str(path), "-storetype", store_type.value,
         "-storepass:env", _PASSWORD_ENV, password=password)
    _protect(path)
    return path


def subject_alt_names(cert_pem: Path) -> tuple[str, ...]:
    """The certificate's subjectAltNames as ``DNS:x`` / ``IP Address:y`` strings."""
    out = _run(find_openssl(), "x509", "-noout", "-ext", "subjectAltName",
               "-in", str(cert_pem))
    lines = out.splitlines()[1:]  # first line is the extension's title
    return tuple(n.strip() for line in lines for n in line.split(",") if n.strip())


def valid_for(cert_pem: Path, seconds: int, *, ca: Path | None = None) -> bool:
    """True when ``cert_pem`` exists, parses, is valid ``seconds`` from now and (with
    ``ca``) verifies against it: the test for reusing material made by an earlier run."""
    if not cert_pem.is_file() or (ca is not None and not ca.is_file()):
        return False
    openssl = find_openssl()
    try:
        _run(openssl, "x509", "-noout", "-checkend", str(seconds), "-in", str(cert_pem))
        if ca is not None and ca != cert_pem:
            _run(openssl, "verify", "-CAfile", str(ca), str(cert_pem))
    except DevstackError:
        return False
    return True


def _paths(directory: Path, name: str) -> Issued:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._\-]*", name):
        raise ValueError(f"not a file stem: {name!r}")
    return Issued(name=name, cert_pem=directory / f"{name}.pem",
                  key_pem=directory / f"{name}.key")


def _config(common_name: str, extensions: Sequence[str]) -> str:
    if not _SAFE_NAME.fullmatch(common_name):
        raise ValueError(f"common name must be letters, digits, '.-_ ': {common_name!r}")
    return ("[req]\ndistinguished_name = dn\nprompt = no\n"
            f"[dn]\nCN = {common_name}\n[ext]\n" + "\n".join(extensions) + "\n")


class _TempConfig:
    """An openssl config file beside the outputs, removed afterwards."""

    def __init__(self, directory: Path, name: str, text: str) -> None:
        self.path = directory / f".{name}.{secrets.token_hex(4)}.cnf"
        self.text = text

    def __enter__(self) -> Path:
        self.path.write_text(self.text)
        return self.path

    def __exit__(self, *exc: object) -> None:
        self.path.unlink(missing_ok=True)


def _protect(*paths: Path) -> None:
    for path in paths:
        path.chmod(0o600)


def _run(tool: Path, *args: str, password: str | None = None) -> str:
    """Run a tool with a 0077 umask (nothing it writes is ever group/world readable);
    the password, if any, only in the child's environment. Returns stdout."""
    env = dict(os.environ)
    env.pop(_PASSWORD_ENV, None)
    if password is not None:
        env[_PASSWORD_ENV] = password
    old = os.umask(0o077)
    try:
        result = subprocess.run([str(tool), *args], env=env, stdin=subprocess.DEVNULL,
                                capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DevstackError(f"cannot run {Path(tool).name} {args[0]}: {exc}",
                            fix=_OPENSSL_HINT) from exc
    finally:
        os.umask(old)
    if result.returncode != 0:
        # Tool output names files and subjects, never the password (it is not an arg).
        tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
        raise DevstackError(f"{Path(tool).name} {args[0]} failed (exit {result.returncode}): "
                            + " | ".join(tail), fix="read the message; check the files named")
    return result.stdout

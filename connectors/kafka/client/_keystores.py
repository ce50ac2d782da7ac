"""Java truststores and keystores -> the PEM files the Python Kafka clients read.

Spark users name JKS, PKCS12 or PEM stores (``kafka.ssl.truststore.*``,
``kafka.ssl.keystore.*``), as Kafka's Java client takes them. kafka-python (Python's
``ssl``) and librdkafka (OpenSSL) both read PEM: a CA bundle, a certificate chain and
a private key. This module converts once per process and store, on the machine whose
client needs it, reading the same local path the JVM source would (so users
distribute stores as today: ``--files`` or a path present on every node).

Why these libraries:

* PKCS12 and PEM: ``cryptography`` (pyca), the maintained binding to OpenSSL that
  Python's own TLS stack trusts; it checks the store's integrity with its password.
* JKS: the JDK's ``keytool -importkeystore`` turns it into PKCS12 first. A JVM is on
  every node that runs Spark, keytool ships with it, and it is the reference reader of
  the format; the pure-Python JKS readers are unmaintained. Passwords reach keytool
  through its environment (``-storepass:env``), never its command line.

What is written: a private directory (0700) per process, files 0600, the private key
encrypted with a random per-process passphrase that only this process holds; removed
at exit. Nothing converted is readable by other users.
"""

from __future__ import annotations

import atexit
import enum
import os
import secrets
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ...._exceptions import ConfigError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
    from cryptography.hazmat.primitives.serialization.pkcs12 import PKCS12KeyAndCertificates
    from cryptography.x509 import Certificate

__all__ = ["PemFiles", "Store", "StoreType", "pem_files"]


class StoreType(str, enum.Enum):
    """``ssl.truststore.type`` / ``ssl.keystore.type``; Java's default is JKS."""

    JKS = "JKS"
    PKCS12 = "PKCS12"
    PEM = "PEM"


@dataclass(frozen=True)
class Store:
    """One truststore or keystore as the user named it (nothing read yet).

    ``option`` is the option the user wrote for its location (or inline content), so
    every error names it. Either ``location`` or ``inline`` is set.
    """

    option: str
    password_option: str
    type: StoreType
    location: str | None = None
    inline: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class PemFiles:
    """What a client needs: CA bundle, certificate chain, key and its passphrase."""

    cafile: str | None = None
    certfile: str | None = None
    keyfile: str | None = None
    key_password: str | None = field(default=None, repr=False)


_lock = threading.Lock()
_cache: dict[tuple[object, ...], PemFiles] = {}
_dir: Path | None = None
_passphrase = secrets.token_urlsafe(24)


def _private_dir() -> Path:
    global _dir
    if _dir is None:
        _dir = Path(tempfile.mkdtemp(prefix="sparkbarrier-kafka-tls-"))  # mode 0700
        atexit.register(shutil.rmtree, _dir, True)
    return _dir


def _write(name: str, data: bytes) -> str:
    path = _private_dir() / name
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    return str(path)


def _read(store: Store) -> bytes:
    if store.inline is not None:
        return store.inline.encode()
    try:
        return Path(store.location or "").read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"option {store.option!r}: cannot read {store.location!r} ({exc.strerror}); the "
            f"file must exist at that path on the driver and on every executor (ship it "
            f"with --files or put it on a shared path)", option=store.option) from None


def _keytool(store: Store) -> str:
    java_home = os.environ.get("JAVA_HOME")
    candidates = [str(Path(java_home) / "bin" / "keytool")] if java_home else []
    found = shutil.which("keytool")
    if found:
        candidates.append(found)
    java = shutil.which("java")
    if java:
        candidates.append(str(Path(os.path.realpath(java)).parent / "keytool"))
    for path in candidates:
        if os.access(path, os.X_OK):
            return path
    raise ConfigError("a JKS store needs the JDK's keytool to be read, and none was found "
                      "(JAVA_HOME, PATH); set JAVA_HOME, or give the store as PKCS12 or PEM",
                      option=store.option)


def _keytool_run(store: Store, args: list[str], env: dict[str, str]) -> tuple[int, str]:
    result = subprocess.run([_keytool(store), *args], env=env, stdin=subprocess.DEVNULL,
                            capture_output=True, timeout=60, check=False)
    return result.returncode, (result.stdout + result.stderr).decode(errors="replace")


def _jks_to_pkcs12(store: Store, data: bytes, key_password: str | None) -> tuple[bytes, str]:
    """keytool -importkeystore into a private PKCS12 file; returns its bytes and password.

    A key whose password differs from the store's (``ssl.key.password``) can only be
    exported by alias, so that case lists the store first to find its key entry.
    """
    src = _write(f"src-{secrets.token_hex(4)}.jks", data)
    dst = str(_private_dir() / f"dst-{secrets.token_hex(4)}.p12")
    dst_password = secrets.token_urlsafe(18)
    env = {**os.environ, "SB_SRC_PASS": store.password or "", "SB_DST_PASS": dst_password,
           "SB_KEY_PASS": key_password or ""}
    command = ["-importkeystore", "-noprompt", "-srckeystore", src, "-srcstoretype", "JKS",
               "-srcstorepass:env", "SB_SRC_PASS", "-destkeystore", dst,
               "-deststoretype", "PKCS12", "-deststorepass:env", "SB_DST_PASS"]
    try:
        if key_password and key_password != store.password:
            code, text = _keytool_run(store, ["-list", "-keystore", src, "-storetype", "JKS",
                                       "-storepass:env", "SB_SRC_PASS"], env)
            aliases = [line.split(",")[0] for line in text.splitlines()
                       if "PrivateKeyEntry" in line]
            if code == 0 and aliases:
                command += ["-srcalias", aliases[0], "-srckeypass:env", "SB_KEY_PASS",
                            "-destkeypass:env", "SB_DST_PASS"]
        code, text = _keytool_run(store, command, env)
    finally:
        os.unlink(src)
    try:
        if code != 0:
            wrong_password = "password" in text.lower()
            raise ConfigError(
                f"option {store.option!r}: cannot open the JKS store ("
                f"{'a password is wrong' if wrong_password else 'keytool cannot read it as JKS'}"
                f"); check {store.password_option!r}, 'kafka.ssl.key.password' and the "
                f"store's type",
                option=store.password_option if wrong_password else store.option)
        return Path(dst).read_bytes(), dst_password
    finally:
        if os.path.exists(dst):
            os.unlink(dst)


def _load_pkcs12(store: Store, data: bytes, password: str | None) -> PKCS12KeyAndCertificates:
    from cryptography.hazmat.primitives.serialization import pkcs12

    try:
        return pkcs12.load_pkcs12(data, password.encode() if password else None)
    except ValueError:
        raise ConfigError(f"option {store.option!r}: cannot open the PKCS12 store (wrong "
                          f"password, or not PKCS12); check {store.password_option!r} and "
                          f"the store's type", option=store.password_option) from None


def _certificates_and_key(store: Store,
                          key_password: str | None) -> tuple[list[Certificate], PrivateKeyTypes | None]:
    """(certificates, private key or None), leaf first, from any store type."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    data = _read(store)
    if store.type is StoreType.PEM:
        try:
            certs = x509.load_pem_x509_certificates(data) if b"CERTIFICATE-----" in data else []
        except ValueError:
            raise ConfigError(f"option {store.option!r}: not a PEM certificate file",
                              option=store.option) from None
        key: PrivateKeyTypes | None = None
        if b"PRIVATE KEY-----" in data:
            try:
                key = serialization.load_pem_private_key(
                    data, key_password.encode() if key_password else None)
            except (ValueError, TypeError):
                raise ConfigError(f"option {store.option!r}: cannot read the PEM private key "
                                  f"(wrong or missing 'kafka.ssl.key.password')",
                                  option="kafka.ssl.key.password") from None
        return certs, key
    password = store.password
    if store.type is StoreType.JKS:
        data, password = _jks_to_pkcs12(store, data, key_password)
    loaded = _load_pkcs12(store, data, password)
    certs = [c.certificate for c in ([loaded.cert] if loaded.cert else [])]
    certs += [c.certificate for c in loaded.additional_certs]
    return certs, loaded.key


def _stat(store: Store) -> tuple[int, int] | None:
    if store.location is None:
        return None
    try:
        st = os.stat(store.location)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def pem_files(truststore: Store | None, keystore: Store | None,
              key_password: str | None) -> PemFiles:
    """PEM files for these stores, converted once per process (again if a file changes).

    Raises :class:`ConfigError` naming the option when a store cannot be read or opened,
    so the driver, which calls this at query start, fails before the first batch.
    """
    cache_key = (truststore, _stat(truststore) if truststore else None,
                 keystore, _stat(keystore) if keystore else None, key_password)
    with _lock:
        found = _cache.get(cache_key)
        if found is not None:
            return found
        found = _convert(truststore, keystore, key_password)
        _cache[cache_key] = found
        return found


def _convert(truststore: Store | None, keystore: Store | None,
             key_password: str | None) -> PemFiles:
    from cryptography.hazmat.primitives import serialization

    tag = secrets.token_hex(4)
    cafile = certfile = keyfile = None
    if truststore is not None:
        if truststore.type is StoreType.PEM and truststore.location is not None:
            _read(truststore)  # fail at query start if unreadable; clients read it as is
            cafile = truststore.location
        else:
            certs, _ = _certificates_and_key(truststore, None)
            if not certs:
                raise ConfigError(f"option {truststore.option!r}: the truststore holds no "
                                  f"certificate", option=truststore.option)
            cafile = _write(f"ca-{tag}.pem", b"".join(
                c.public_bytes(serialization.Encoding.PEM) for c in certs))
    if keystore is not None:
        certs, key = _certificates_and_key(keystore, key_password)
        if key is None or not certs:
            raise ConfigError(f"option {keystore.option!r}: the keystore must hold a private "
                              f"key and its certificate (for client authentication)",
                              option=keystore.option)
        certfile = _write(f"client-{tag}.pem", b"".join(
            c.public_bytes(serialization.Encoding.PEM) for c in certs))
        keyfile = _write(f"client-{tag}.key", key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(_passphrase.encode())))
        return PemFiles(cafile, certfile, keyfile, _passphrase)
    return PemFiles(cafile=cafile)

"""devstack/_certs.py against the real openssl and keytool (no servers): names, chains,
file modes, and that every store opens with its password and not without it."""

from __future__ import annotations

import ssl
import stat
import subprocess
from pathlib import Path

import pytest

from sparkbarrier.devstack import DevstackError
from sparkbarrier.devstack._certs import (
    StoreType,
    Usage,
    issue,
    keytool_of,
    make_ca,
    private_dir,
    subject_alt_names,
    valid_for,
    write_jks_keystore,
    write_pkcs12,
    write_truststore,
)
from sparkbarrier.devstack._jvm import find_java

PASSWORD = "s3cret-Store-pw"


def _keytool_list(keytool: Path, store: Path, store_type: str, password: str) -> str:
    result = subprocess.run(
        [str(keytool), "-list", "-keystore", str(store), "-storetype", store_type,
         "-storepass:env", "PW"],
        env={"PW": password}, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0 or password != PASSWORD, result.stdout + result.stderr
    return result.stdout if result.returncode == 0 else ""


def test_server_cert_names_and_stores_open_with_the_password(tmp_path: Path) -> None:
    keytool = keytool_of(find_java().executable)
    home = private_dir(tmp_path / "tls")
    ca = make_ca(home, "test-ca")
    server = issue(ca, home, "server", common_name="localhost", usage=Usage.SERVER,
                   dns=["localhost"], ips=["127.0.0.1"])
    client = issue(ca, home, "client", common_name="reader", usage=Usage.CLIENT)
    other = make_ca(home, "other-ca")

    assert set(subject_alt_names(server.cert_pem)) == {"DNS:localhost", "IP Address:127.0.0.1"}
    assert valid_for(server.cert_pem, 86400, ca=ca.cert_pem)
    assert not valid_for(server.cert_pem, 86400, ca=other.cert_pem)
    assert not valid_for(server.cert_pem, 900 * 86400)  # expires before that

    # Python's own TLS accepts the pair and the CA (what kafka-python will load).
    context = ssl.create_default_context(cafile=str(ca.cert_pem))
    context.load_cert_chain(str(client.cert_pem), str(client.key_pem))

    p12 = write_pkcs12(client, home / "client.p12", PASSWORD)
    jks = write_jks_keystore(p12, home / "client.jks", PASSWORD, keytool=keytool)
    trust_jks = write_truststore(ca.cert_pem, home / "ca.jks", PASSWORD,
                                 store_type=StoreType.JKS, keytool=keytool)
    trust_p12 = write_truststore(ca.cert_pem, home / "ca.p12", PASSWORD,
                                 store_type=StoreType.PKCS12, keytool=keytool)
    assert "PrivateKeyEntry" in _keytool_list(keytool, p12, "PKCS12", PASSWORD)
    assert "PrivateKeyEntry" in _keytool_list(keytool, jks, "JKS", PASSWORD)
    assert "trustedCertEntry" in _keytool_list(keytool, trust_jks, "JKS", PASSWORD)
    assert "trustedCertEntry" in _keytool_list(keytool, trust_p12, "PKCS12", PASSWORD)
    assert _keytool_list(keytool, jks, "JKS", "wrong-password") == ""

    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    leftovers = sorted(p.name for p in home.iterdir())
    assert all(not n.endswith((".csr", ".cnf")) for n in leftovers), leftovers
    for path in home.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_a_bad_name_is_refused_before_any_tool_runs(tmp_path: Path) -> None:
    ca = make_ca(private_dir(tmp_path), "ca")
    with pytest.raises(ValueError, match="not a DNS name"):
        issue(ca, tmp_path, "x", common_name="x", usage=Usage.SERVER, dns=["a,DNS:evil"])
    with pytest.raises(ValueError, match="common name"):
        issue(ca, tmp_path, "y", common_name="a\nCN=b", usage=Usage.CLIENT)


def test_a_tool_failure_names_the_tool_not_the_password(tmp_path: Path) -> None:
    missing = make_ca(private_dir(tmp_path), "ca")
    missing.key_pem.unlink()
    with pytest.raises(DevstackError, match="openssl pkcs12 failed") as info:
        write_pkcs12(missing, tmp_path / "x.p12", PASSWORD)
    assert PASSWORD not in str(info.value)

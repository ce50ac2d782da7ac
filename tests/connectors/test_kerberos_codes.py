"""Every status code the one Kerberos error map names, reproduced against the real MIT KDC.

The map (``connectors/kerberos/_errors.py``) classifies refusals by gssapi's major and
minor status codes, never by message text; each case here makes MIT produce its code
for real (the session's private KDC, ``kdc`` in tests/conftest.py: a stale keytab, a
deleted principal, no such service, a dead KDC, an expired ticket, a skewed clock ...),
then checks the code, the refusal, and the option the error names on each hop. Nothing
touches the session's default ticket cache: every cache is a file under ``tmp_path``.
"""

from __future__ import annotations

import os
import struct
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from sparkbarrier import KerberosError
from sparkbarrier.connectors.kerberos import _login as _kerberos_login
from sparkbarrier.connectors.kerberos._errors import _K5G, _KRB5, MINOR_CODES, Refusal, refusal
from sparkbarrier.connectors.kerberos._login import credentials, security_context
from sparkbarrier.connectors.kerberos._settings import KerberosSettings
from sparkbarrier.connectors.hbase.client._sasl import LOGIN_OPTIONS as HBASE
from sparkbarrier.connectors.kafka.client._kerberos import LOGIN_OPTIONS as KAFKA

pytestmark = pytest.mark.timeout(120)

KDC_UNREACH, REALM_UNKNOWN = _KRB5 + 156, _KRB5 + 154


def _login_refused(settings: KerberosSettings, options: Any = HBASE) -> KerberosError:
    with pytest.raises(KerberosError) as info:
        credentials(settings, options)
    return info.value


def _ticket_refused(settings: KerberosSettings, host: str = "localhost", options: Any = HBASE) -> KerberosError:
    with pytest.raises(KerberosError) as info:
        security_context(settings, host, options)
    return info.value


def _kinit(kdc: Any, role: str, cache: Path, *extra: str) -> None:
    principal, keytab = kdc.keytab(role)
    subprocess.run(["kinit", *extra, "-k", "-t", keytab, principal], check=True, timeout=30,
                   env={**os.environ, "KRB5CCNAME": f"FILE:{cache}"})


def test_the_map_names_only_codes_reproduced_here() -> None:
    """Signed as krb5.h spells them; the table is what this file reproduces, no more."""
    signed = {code - 2**32 if code >= 2**31 else code for code in MINOR_CODES}
    assert signed == {-1765328378, -1765328377, -1765328360, -1765328352, -1765328347, -1765328243,
                      -1765328230, -1765328228, -1765328189, _K5G}


@pytest.mark.parametrize(("options", "option"), [(KAFKA, "kafka.sasl.jaas.config"),
                                                  (HBASE, "hbase.thrift.kerberos.client.keytab")])
def test_stale_keytab_is_preauth_failed(kdc, options: Any, option: str) -> None:
    principal, keytab = kdc.keytab("stale")
    err = _login_refused(KerberosSettings(principal, keytab), options)
    assert err.code == _KRB5 + 24 and err.option == option and "export a current keytab" in str(err)


@pytest.mark.parametrize(("options", "option"), [(KAFKA, "kafka.sasl.jaas.config"),
                                                  (HBASE, "hbase.thrift.kerberos.client.principal")])
def test_deleted_principal_is_client_principal_unknown(kdc, options: Any, option: str) -> None:
    principal, keytab = kdc.keytab("unknown")
    err = _login_refused(KerberosSettings(principal, keytab), options)
    assert err.code == _KRB5 + 6 and err.option == option
    assert f"does not know the principal {principal}" in str(err)


def test_a_keytab_without_the_principals_key_is_fcc_nofile_and_says_so(kdc) -> None:
    """MIT looks for a ticket cache when the keytab has no key: KRB5_FCC_NOFILE, not KRB5_KT_NOTFOUND."""
    principal, _ = kdc.keytab("client")
    other_keytab = kdc.keytab("hbase")[1]
    err = _login_refused(KerberosSettings(principal, other_keytab))
    assert err.code == _KRB5 + 195 and err.option == "hbase.thrift.kerberos.client.keytab"
    assert f"holds no key for {principal}" in str(err)


def test_a_missing_ticket_cache_is_fcc_nofile(kdc, tmp_path: Path) -> None:
    err = _login_refused(KerberosSettings(ticket_cache=f"FILE:{tmp_path / 'none.cc'}"), KAFKA)
    assert err.code == _KRB5 + 195 and "no valid Kerberos ticket" in str(err) and "run kinit" in str(err)
    assert err.option == "kafka.sasl.jaas.config"


def test_an_empty_default_cache_is_cc_notfound(kdc, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path / 'default.cc'}")
    err = _login_refused(KerberosSettings())
    assert err.code == _KRB5 + 141 and "run `kinit`" in str(err)


def test_a_cache_of_another_principal_is_ccache_nomatch(kdc, tmp_path: Path) -> None:
    cache = tmp_path / "hbase.cc"
    _kinit(kdc, "hbase", cache)
    err = _login_refused(KerberosSettings(kdc.keytab("client")[0], ticket_cache=f"FILE:{cache}"))
    assert err.code == _K5G and "no valid Kerberos ticket" in str(err)


def test_an_expired_ticket_is_credentials_expired_then_tkt_expired(kdc, tmp_path: Path) -> None:
    cache = tmp_path / "short.cc"
    _kinit(kdc, "client", cache, "-l", "1s")
    time.sleep(2.5)
    settings = KerberosSettings(ticket_cache=f"FILE:{cache}", service="kafka")
    at_login = _login_refused(settings, KAFKA)  # major GSS_S_CREDENTIALS_EXPIRED, minor no krb5 code
    assert at_login.code is not None and "credential has expired" in str(at_login) and "run kinit" in str(at_login)

    import gssapi  # past the login check: the service ticket request says KRB5KRB_AP_ERR_TKT_EXPIRED

    creds = gssapi.Credentials(usage="initiate", store={"ccache": f"FILE:{cache}"})
    with pytest.raises(gssapi.exceptions.GSSError) as raw:
        gssapi.SecurityContext(name=gssapi.Name("kafka@localhost", gssapi.NameType.hostbased_service),
                               creds=creds, usage="initiate").step()
    assert raw.value.min_code == _KRB5 + 32 and refusal(raw.value, settings) is Refusal.NO_TICKET


@pytest.mark.parametrize(("options", "option", "host", "words"), [
    (KAFKA, "kafka.sasl.kerberos.service.name", "127.0.0.1", "kafka.bootstrap.servers"),
    (HBASE, "hbase.thrift.kerberos.service", "localhost", "hbase.thrift.kerberos.principal")])
def test_no_service_principal_is_s_principal_unknown(kdc, options: Any, option: str, host: str,
                                                     words: str) -> None:
    principal, keytab = kdc.keytab("client")
    service = "kafka" if options is KAFKA else "hbasex"
    err = _ticket_refused(KerberosSettings(principal, keytab, service=service), host, options)
    assert err.code == _KRB5 + 7 and err.option == option
    assert f"{service}/{host}" in str(err) and words in str(err)


@pytest.mark.parametrize(("port", "code"), [("dead", KDC_UNREACH), (None, REALM_UNKNOWN)])
def test_no_kdc_is_kdc_unreach_or_realm_unknown(kdc, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                port: str | None, code: int) -> None:
    import socket

    conf = tmp_path / "krb5.conf"
    if port:
        with socket.socket() as sock:  # a port nobody listens on once closed
            sock.bind(("127.0.0.1", 0))
            dead = sock.getsockname()[1]
        conf.write_text(Path(kdc.krb5_conf).read_text().replace(kdc.kdc, f"127.0.0.1:{dead}"))
    else:  # the realm has no kdc entry at all
        conf.write_text(f"[libdefaults]\n default_realm = {kdc.realm}\n dns_lookup_kdc = false\n")
    monkeypatch.setenv("KRB5_CONFIG", str(conf))
    monkeypatch.setattr(_kerberos_login, "_keytab_creds", {})  # no login of this process reused
    principal, keytab = kdc.keytab("client")
    copy = tmp_path / "client.keytab"  # another path: another MEMORY cache, not one holding a ticket
    copy.write_bytes(Path(keytab).read_bytes())
    err = _login_refused(KerberosSettings(principal, str(copy)))
    assert err.code == code and "no KDC answered" in str(err) and str(conf) in str(err)


def test_a_skewed_clock_is_ap_err_skew(kdc, tmp_path: Path) -> None:
    """A cache whose header says the KDC's clock is an hour ahead (MIT's kdc_timesync offset):
    the service ticket request then carries a time an hour off, which the KDC refuses."""
    cache = tmp_path / "skewed.cc"
    _kinit(kdc, "client", cache)
    data = cache.read_bytes()
    version, header = struct.unpack(">HH", data[:4])
    assert version == 0x0504  # FILE cache format 4: a header of tagged fields
    cache.write_bytes(struct.pack(">HHHHii", version, 12, 1, 8, 3600, 0) + data[4 + header:])
    err = _ticket_refused(KerberosSettings(ticket_cache=f"FILE:{cache}", service="kafka"), "localhost", KAFKA)
    assert err.code == _KRB5 + 37 and err.option is None
    assert "clock" in str(err) and "NTP" in str(err)

"""The login both hops share (``connectors/kerberos/_login.py``), without a KDC.

One settings type, one error map (``connectors/kerberos/_errors.py``, by status code), two
vocabularies: the same refused login names ``kafka.sasl.jaas.config``
on the Kafka hop and ``hbase.thrift.kerberos.client.*`` on the HBase hop. The credential
cache (per process, renewed near expiry, never the default ticket cache) is checked
against a stand-in for ``gssapi.Credentials`` that records what it was asked; the
logins themselves run against the devstack's KDC in tests/connectors/kafka/
test_kerberos_source.py and tests/connectors/hbase/test_sasl.py.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from sparkbarrier import ConfigError, KerberosError
from sparkbarrier.connectors.kerberos import _login as shared
from sparkbarrier.connectors.kerberos._errors import gss_reason, kerberos_error
from sparkbarrier.connectors.hbase import KerberosSettings
from sparkbarrier.connectors.hbase.client._sasl import LOGIN_OPTIONS as HBASE
from sparkbarrier.connectors.kafka.client._kerberos import LOGIN_OPTIONS as KAFKA

JAAS = "kafka.sasl.jaas.config"
PRINCIPAL = "hbase.thrift.kerberos.client.principal"
KEYTAB = "hbase.thrift.kerberos.client.keytab"
_BASE = 2529638912  # MIT's krb5 error table


class _GSSError(Exception):
    """What the gssapi package raises: ``gen_message`` and the mechanism's ``min_code``."""

    def __init__(self, minor: str, min_code: int) -> None:
        super().__init__(minor)
        self.min_code = min_code
        self._minor = minor

    def gen_message(self) -> str:
        return (f"Major (851968): Unspecified GSS failure.  Minor code may provide more "
                f"information, Minor ({self.min_code}): {self._minor}")


# MIT's codes for each case, as the devstack's KDC gives them (tests/connectors/test_kerberos_codes.py).
STALE = _GSSError("Preauthentication failed", _BASE + 24)
UNKNOWN = _GSSError("Client 'x@EXAMPLE.COM' not found in Kerberos database", _BASE + 6)
NO_KDC = _GSSError("Cannot contact any KDC for realm 'EXAMPLE.COM'", _BASE + 156)
NO_TICKET = _GSSError("No Kerberos credentials available (default cache: FILE:/tmp/krb5cc_0)",
                      _BASE + 141)
KEYTAB_LOGIN = KerberosSettings(principal="etl@EXAMPLE.COM", keytab="/secure/etl.keytab")
CACHE_LOGIN = KerberosSettings(principal="etl@EXAMPLE.COM")


@pytest.mark.parametrize(("options", "option", "named"), [
    (KAFKA, JAAS, f"keyTab= in {JAAS!r}"), (HBASE, KEYTAB, repr(KEYTAB))])
def test_a_stale_keytab_names_the_hops_keytab_option(options, option: str, named: str) -> None:
    err = kerberos_error(KEYTAB_LOGIN, STALE, options)
    assert isinstance(err, KerberosError) and err.option == option
    assert "Preauthentication failed" in str(err) and named in str(err)
    assert "'/secure/etl.keytab'" in str(err) and "export a current keytab" in str(err)


@pytest.mark.parametrize(("options", "option", "named"), [
    (KAFKA, JAAS, f"principal= in {JAAS!r}"), (HBASE, PRINCIPAL, repr(PRINCIPAL))])
def test_an_unknown_principal_names_the_hops_principal_option(options, option: str,
                                                               named: str) -> None:
    err = kerberos_error(KEYTAB_LOGIN, UNKNOWN, options)
    assert err.option == option and named in str(err)
    assert "does not know the principal etl@EXAMPLE.COM" in str(err)
    assert "not found in Kerberos database" in str(err)


@pytest.mark.parametrize(("options", "option", "fix"), [
    (KAFKA, JAAS, 'useKeyTab=true keyTab="..."'), (HBASE, KEYTAB, f"give {PRINCIPAL!r} and {KEYTAB!r}")])
def test_no_ticket_says_kinit_and_the_hops_keytab_login(options, option: str, fix: str) -> None:
    err = kerberos_error(CACHE_LOGIN, NO_TICKET, options)
    assert err.option == option and fix in str(err)
    # Both wordings the hops' server tests check: "run kinit" (Kafka), "run `kinit`" (HBase).
    assert "no valid Kerberos ticket" in str(err) and "run kinit" in str(err)
    assert "run `kinit`" in str(err) and "No Kerberos credentials available" in str(err)
    assert options.peer in str(err)


def test_the_named_ticket_cache_is_the_one_in_the_message() -> None:
    login = KerberosSettings(principal="etl@EXAMPLE.COM", ticket_cache="FILE:/jobs/etl.cc",
                             use_ticket_cache=True)
    assert "in FILE:/jobs/etl.cc" in str(kerberos_error(login, NO_TICKET, KAFKA))


@pytest.mark.parametrize("options", [KAFKA, HBASE])
def test_no_kdc_names_the_krb5_conf(options, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KRB5_CONFIG", "/etc/job/krb5.conf")
    err = kerberos_error(KEYTAB_LOGIN, NO_KDC, options)
    assert "no KDC answered" in str(err) and "/etc/job/krb5.conf" in str(err)
    assert err.option == options.keytab.key


def test_any_other_refusal_names_both_options_and_the_reason() -> None:
    # KRB5KDC_ERR_POLICY: a code the map does not name (a clock skew has its own case now).
    err = kerberos_error(KEYTAB_LOGIN, _GSSError("KDC policy rejects request", _BASE + 12), HBASE)
    assert err.option == KEYTAB and "KDC policy rejects request" in str(err)
    assert repr(PRINCIPAL) in str(err) and repr(KEYTAB) in str(err)


def test_the_reason_is_the_minor_message_else_the_major_one() -> None:
    import gssapi

    assert gss_reason(STALE) == "Preauthentication failed"
    assert gss_reason(gssapi.exceptions.ExpiredCredentialsError(0x000B0000, 0)) == \
        "The referenced credential has expired"
    assert gss_reason(RuntimeError("No Kerberos\n credentials")) == "No Kerberos credentials"


@pytest.mark.parametrize(("options", "word"), [(KAFKA, "keyTab"), (HBASE, "keytab")])
def test_a_keytab_missing_on_this_node_says_ship_it(options, word: str, tmp_path: Path) -> None:
    login = KerberosSettings(principal="etl@R", keytab=str(tmp_path / "gone.keytab"))
    with pytest.raises(KerberosError, match=f"cannot read {word} .*--files") as err:
        shared.check_keytab(login, options)
    assert isinstance(err.value, ConfigError) and err.value.option == options.keytab.key


def test_a_file_that_is_not_a_keytab_is_refused_without_showing_it(tmp_path: Path) -> None:
    secret = tmp_path / "jaas.conf"
    secret.write_text("password=hunter2")
    with pytest.raises(KerberosError, match="is not a Kerberos keytab") as err:
        shared.check_keytab(KerberosSettings(principal="etl@R", keytab=str(secret)), HBASE)
    assert "hunter2" not in str(err.value) and err.value.option == KEYTAB


@pytest.mark.parametrize(("options", "option"), [(KAFKA, "kafka.sasl.mechanism"),
                                                  (HBASE, "hbase.thrift.authentication")])
def test_without_the_gssapi_package_the_hops_switch_is_named(
        options, option: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gssapi", None)  # import gssapi raises ImportError
    with pytest.raises(ConfigError, match=r"sparkbarrier\[kerberos\]") as err:
        shared.credentials(KEYTAB_LOGIN, options)
    assert err.value.option == option and type(err.value) is ConfigError


def test_both_hops_parse_into_the_one_settings_type() -> None:
    """Kafka's JAAS line and HBase's options give the same value, apart from the service."""
    from sparkbarrier.connectors.hbase._options import parse_sink_options
    from sparkbarrier.connectors.kafka.client._kerberos import parse_krb5_jaas

    kafka = parse_krb5_jaas({"useKeyTab": "true", "keyTab": "/k/etl.keytab", "principal": "etl@R"}, "kafka")
    hbase = parse_sink_options({"table": "t", "rowkey": "id", "hbase.thrift2.port": "9095",
                                "hbase.thrift.authentication": "kerberos",
                                PRINCIPAL: "etl@R", KEYTAB: "/k/etl.keytab"}).kerberos
    assert type(kafka) is type(hbase) is KerberosSettings
    assert kafka == KerberosSettings("etl@R", "/k/etl.keytab", service="kafka")
    assert hbase == KerberosSettings("etl@R", "/k/etl.keytab", service="hbase")
    cache_first = parse_krb5_jaas({"useKeyTab": "true", "keyTab": "/k/etl.keytab", "principal": "etl@R",
                                   "useTicketCache": "true", "ticketCache": "FILE:/c"}, "kafka")
    assert cache_first == KerberosSettings("etl@R", "/k/etl.keytab", service="kafka", ticket_cache="FILE:/c",
                                           use_ticket_cache=True)


def test_the_private_cache_is_in_memory_per_process_and_principal(
        monkeypatch: pytest.MonkeyPatch) -> None:
    name = shared.ticket_cache(KEYTAB_LOGIN)
    assert name.startswith("MEMORY:") and str(os.getpid()) in name
    assert shared.ticket_cache(KerberosSettings("other@R", KEYTAB_LOGIN.keytab)) != name
    monkeypatch.setattr(os, "getpid", lambda: 1)  # a forked worker
    assert shared.ticket_cache(KEYTAB_LOGIN) != name


class _Recorder:
    """Stands in for ``gssapi.Credentials``: records each acquisition; ``lifetime`` as set."""

    calls: list[dict[str, Any]] = []
    lifetime_s: int | None = 3600

    def __init__(self, *, name: Any, usage: str, store: Any) -> None:
        self.store = store
        self.lifetime = _Recorder.lifetime_s
        _Recorder.calls.append({"name": name, "usage": usage, "store": store})


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):  # noqa: ANN201
    import gssapi

    monkeypatch.setattr(gssapi, "Credentials", _Recorder)
    monkeypatch.setattr(shared, "_keytab_creds", {})
    monkeypatch.setattr(_Recorder, "calls", [])
    monkeypatch.setattr(_Recorder, "lifetime_s", 3600)
    keytab = tmp_path / "etl.keytab"
    keytab.write_bytes(b"\x05\x02" + bytes(30))
    return KerberosSettings(principal="etl@EXAMPLE.COM", keytab=str(keytab))


def test_a_keytab_login_is_reused_in_the_process_and_never_uses_the_default_cache(recorder) -> None:
    env = dict(os.environ)
    first = shared.credentials(recorder, KAFKA)
    assert shared.credentials(recorder, HBASE) is first  # one login per process, both hops
    (call,) = _Recorder.calls
    assert call["usage"] == "initiate"
    assert call["store"] == {"client_keytab": recorder.keytab, "ccache": shared.ticket_cache(recorder)}
    assert dict(os.environ) == env


def test_a_keytab_login_near_its_end_logs_in_again(recorder) -> None:
    _Recorder.lifetime_s = 30  # under a minute left
    shared.credentials(recorder, KAFKA)
    shared.credentials(recorder, KAFKA)
    assert len(_Recorder.calls) == 2


def test_a_forked_worker_logs_in_under_its_own_cache(recorder, monkeypatch: pytest.MonkeyPatch) -> None:
    shared.credentials(recorder, KAFKA)
    monkeypatch.setattr(os, "getpid", lambda: 1)
    shared.credentials(recorder, KAFKA)
    first, second = (call["store"]["ccache"] for call in _Recorder.calls)
    assert first != second and second == shared.ticket_cache(recorder)  # this pid's name


def test_a_ticket_cache_is_read_afresh_and_an_expired_one_is_an_error(recorder) -> None:
    login = KerberosSettings(principal=recorder.principal)
    shared.credentials(login, HBASE)
    shared.credentials(login, HBASE)
    assert [call["store"] for call in _Recorder.calls] == [None, None]  # the default cache, read
    _Recorder.lifetime_s = 0
    with pytest.raises(KerberosError, match="credential has expired.*run `kinit`") as err:
        shared.credentials(login, HBASE)
    assert err.value.option == KEYTAB


def test_ticket_cache_first_then_the_keytab(recorder, monkeypatch: pytest.MonkeyPatch) -> None:
    import gssapi

    login = KerberosSettings(recorder.principal, recorder.keytab, ticket_cache="FILE:/c", use_ticket_cache=True)
    shared.credentials(login, KAFKA)
    assert [call["store"] for call in _Recorder.calls] == [{"ccache": "FILE:/c"}]

    class _EmptyCacheThenKeytab(_Recorder):
        def __init__(self, *, name: Any, usage: str, store: Any) -> None:
            super().__init__(name=name, usage=usage, store=store)
            if "client_keytab" not in store:
                raise gssapi.exceptions.GSSError(0x70000, 0)

    monkeypatch.setattr(gssapi, "Credentials", _EmptyCacheThenKeytab)
    shared.credentials(login, KAFKA)
    assert [call["store"] for call in _Recorder.calls][1:] == [
        {"ccache": "FILE:/c"}, {"client_keytab": recorder.keytab, "ccache": shared.ticket_cache(login)}]


def test_a_forked_worker_keeps_no_login_of_its_parent(recorder, monkeypatch: pytest.MonkeyPatch) -> None:
    shared.credentials(recorder, KAFKA)
    monkeypatch.setattr(os, "getpid", lambda: 1)
    shared.credentials(recorder, KAFKA)
    assert [key[0] for key in shared._keytab_creds] == [1]


def test_a_missing_keytab_is_reported_where_the_login_happens(recorder, tmp_path: Path) -> None:
    gone = KerberosSettings(recorder.principal, str(tmp_path / "not-shipped.keytab"))
    with pytest.raises(KerberosError, match="cannot read keytab .*--files"):
        shared.credentials(gone, HBASE)
    assert _Recorder.calls == []

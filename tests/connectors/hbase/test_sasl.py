"""The SASL/GSSAPI client (``connectors/hbase/client/_sasl.py``): framing on its own, then against the
real Kerberized gateways (``kerberos_hbase``: a private KDC, HBase 2.6 with Kerberos)."""

from __future__ import annotations

import os
import struct
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from hbase_clients import thrift1, thrift2_admin

from sparkbarrier._exceptions import ConfigError, SinkError
from sparkbarrier.connectors.hbase import KerberosError, KerberosSettings, Qop
from sparkbarrier.connectors.hbase.client._connection import HBaseConnection, connection_options
from sparkbarrier.connectors.hbase._options import parse_sink_options
from sparkbarrier.connectors.hbase.client._sasl import GssapiSaslClient, parse_qops


# ----------------------------------------------------------------------------- unit: framing
@dataclass
class _Token:
    message: bytes
    encrypted: bool = False


class _FakeContext:
    """Stands in for a GSS context in the framing tests: wrap = marker byte + payload."""

    complete = True

    def wrap(self, data: bytes, encrypt: bool) -> _Token:
        return _Token((b"C" if encrypt else b"I") + data)

    def unwrap(self, token: bytes) -> _Token:
        return _Token(token[1:], encrypted=token[:1] == b"C")


def _client(qops: frozenset[Qop], offer_mask: int, server_max: int = 65536) -> GssapiSaslClient:
    client = GssapiSaslClient("gw", KerberosSettings(principal="p@R", keytab="/k", qops=qops), 9090)
    client._ctx = _FakeContext()
    answer = client.step(_FakeContext().wrap(bytes([offer_mask]) + struct.pack(">I", server_max)[1:], False).message)
    assert answer[0]
    return client


def test_layer_choice_is_the_strongest_the_option_allows_and_the_server_offers() -> None:
    assert _client(frozenset(Qop), 0b111).qop is Qop.AUTH_CONF
    assert _client(frozenset(Qop), 0b011).qop is Qop.AUTH_INT
    assert _client(frozenset({Qop.AUTH, Qop.AUTH_INT}), 0b111).qop is Qop.AUTH_INT
    assert _client(frozenset({Qop.AUTH}), 0b001).qop is Qop.AUTH


def test_layer_answer_names_the_qop_and_our_receive_limit() -> None:
    client = GssapiSaslClient("gw", KerberosSettings(qops=frozenset({Qop.AUTH})), 9090)
    client._ctx = _FakeContext()
    _, answer = client.step(b"I" + bytes([1, 0, 0, 0]))
    assert answer == b"I" + bytes([1, 0, 0, 0])  # auth: no layer, size 0
    client = GssapiSaslClient("gw", KerberosSettings(qops=frozenset({Qop.AUTH_CONF})), 9090)
    client._ctx = _FakeContext()
    _, answer = client.step(b"I" + bytes([4, 0, 1, 0]))
    assert answer == b"I" + bytes([4, 0xFF, 0xFF, 0xFF])


def test_no_common_layer_is_an_error_naming_the_option_and_both_sides() -> None:
    with pytest.raises(KerberosError, match=r"offers qop auth \(its hbase.thrift.security.qop\).*"
                                            r"'hbase.thrift.security.qop' allows only auth-conf") as info:
        _client(frozenset({Qop.AUTH_CONF}), 0b001)
    assert info.value.option == "hbase.thrift.security.qop" and info.value.gateway == "gw:9090"


def test_auth_frames_pass_through_unchanged() -> None:
    client = _client(frozenset({Qop.AUTH}), 0b001)
    assert client.encode(b"thrift bytes") == (True, b"thrift bytes")
    assert client.decode(b"\0\0\0\x05hello") == (True, b"hello")


@pytest.mark.parametrize("qop,marker", [(Qop.AUTH_INT, b"I"), (Qop.AUTH_CONF, b"C")])
def test_protected_frames_are_wrapped_with_length_headers(qop: Qop, marker: bytes) -> None:
    client = _client(frozenset({qop}), int(qop))
    ok, frame = client.encode(b"payload")
    assert ok and frame == struct.pack(">I", 8) + marker + b"payload"
    assert client.decode(frame) == (True, b"payload")


def test_large_writes_are_split_to_the_servers_maximum() -> None:
    client = _client(frozenset({Qop.AUTH_CONF}), 4, server_max=4096)
    data = bytes(range(256)) * 100  # 25,600 bytes
    _, out = client.encode(data)
    frames, rest = [], out
    while rest:
        (n,) = struct.unpack(">I", rest[:4])
        frames.append(rest[4:4 + n])
        rest = rest[4 + n:]
    assert all(len(f) <= 4096 for f in frames) and len(frames) > 1
    assert b"".join(client.decode(struct.pack(">I", len(f)) + f)[1] for f in frames) == data


def test_an_unsealed_frame_is_refused_once_auth_conf_was_agreed() -> None:
    client = _client(frozenset({Qop.AUTH_CONF}), 4)
    ok, _ = client.decode(struct.pack(">I", 3) + b"Iab")
    assert not ok and "not encrypted" in client.getError()


def test_qop_option_accepts_hadoop_and_hbase_names_and_refuses_others() -> None:
    assert parse_qops("auth-conf, integrity") == {Qop.AUTH_CONF, Qop.AUTH_INT}
    assert parse_qops("privacy,authentication") == {Qop.AUTH_CONF, Qop.AUTH}
    with pytest.raises(ConfigError, match="'hbase.thrift.security.qop'"):
        parse_qops("auth-secret")


def _opts(**extra: str) -> dict[str, str]:
    return {"table": "t", "rowkey": "id", "hbase.thrift2.port": "9095", **extra}


def test_kerberos_options_parse_into_settings_with_sane_defaults() -> None:
    opts = parse_sink_options(_opts(**{"hbase.thrift.authentication": "kerberos"}))
    assert opts.kerberos == KerberosSettings(principal=None, keytab=None, service="hbase", qops=frozenset(Qop))
    assert parse_sink_options(_opts()).kerberos is None
    opts = parse_sink_options(_opts(**{"hbase.thrift.authentication": "kerberos",
                                       "hbase.thrift.kerberos.client.principal": "etl@R",
                                       "hbase.thrift.kerberos.client.keytab": "etl.keytab",
                                       "hbase.thrift.security.qop": "privacy"}))
    assert (opts.kerberos.principal, opts.kerberos.keytab, opts.kerberos.qops) == ("etl@R", "etl.keytab",
                                                                                   {Qop.AUTH_CONF})


@pytest.mark.parametrize("extra,match", [
    ({"hbase.thrift.kerberos.client.keytab": "k"}, "needs 'hbase.thrift.authentication' = kerberos"),
    ({"hbase.thrift.authentication": "kerberos", "hbase.thrift.kerberos.client.keytab": "k"},
     "needs 'hbase.thrift.kerberos.client.principal'"),
    ({"hbase.thrift.authentication": "kerberos", "hbase.thrift.tls": "true"}, "SPNEGO"),
    ({"hbase.thrift.authentication": "kerberos", "hbase.thrift.transport": "framed"}, "SASL layer frames"),
    ({"hbase.thrift.authentication": "ldap"}, "hbase.thrift.authentication"),
])
def test_kerberos_options_that_would_be_ignored_or_cannot_work_are_refused(extra: dict[str, str],
                                                                           match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        parse_sink_options(_opts(**extra))


# ----------------------------------------------------------------------------- real gateways
kerberos = pytest.mark.hbase


def _settings(kdc, role: str = "client", **kw) -> KerberosSettings:
    principal, keytab = kdc.keytab(role)
    return KerberosSettings(principal=principal, keytab=keytab, **kw)


def _roundtrip(conn: HBaseConnection, table: str, value: bytes) -> bytes:
    conn.call(lambda c: c.create_table(table, {"f": {}}))
    try:
        conn.call(lambda c: c.table(table).put(b"r", {b"f:q": value}))
        return conn.call(lambda c: c.table(table).row(b"r"))[b"f:q"]
    finally:
        conn.call(lambda c: c.delete_table(table, disable=True))


@kerberos
@pytest.mark.parametrize("gateway,qop", [("thrift", Qop.AUTH), ("thrift_int", Qop.AUTH_INT),
                                         ("thrift_conf", Qop.AUTH_CONF)])
def test_each_qop_round_trips_through_its_gateway(kdc, kerberos_hbase, unique_name: Callable[[str], str],
                                                  gateway: str, qop: Qop) -> None:
    host, port = getattr(kerberos_hbase, gateway)
    conn = thrift1(host, port, timeout_ms=30_000, kerberos=_settings(kdc))
    try:
        value = os.urandom(300_000)  # larger than the server's 64 KiB SASL buffer: split frames
        assert _roundtrip(conn, unique_name("sasl"), value) == value
        assert conn.connection.transport.qop is qop
        from thriftpy2.transport.cybase import CyTransportBase

        assert isinstance(conn.connection.transport, CyTransportBase), "the fast (Cython) SASL path"
    finally:
        conn.close()


@kerberos
@pytest.mark.parametrize("gateway", ["thrift", "thrift_conf"])
def test_pure_python_fallback_transport_round_trips(kdc, kerberos_hbase, gateway: str) -> None:
    """Where thriftpy2 has no Cython build, the pure-Python SASL transport and protocol serve."""
    from happybase.connection import Hbase
    from thriftpy2.thrift import TClient

    from sparkbarrier.connectors.hbase.client._sasl import sasl_protocol, sasl_transport

    host, port = getattr(kerberos_hbase, gateway)
    transport = sasl_transport(host, port, 30_000, _settings(kdc), cython=False)
    transport.open()
    try:
        client = TClient(Hbase, sasl_protocol("binary", transport))
        assert isinstance(client.getTableNames(), list)
        assert transport.qop is (Qop.AUTH if gateway == "thrift" else Qop.AUTH_CONF)
    finally:
        transport.close()


@kerberos
def test_failover_skips_a_dead_gateway_to_a_kerberized_one(kdc, kerberos_hbase) -> None:
    import socket

    from sparkbarrier.connectors.hbase.client._gateways import Gateway

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        dead = probe.getsockname()[1]
    live = kerberos_hbase.thrift_int
    conn = HBaseConnection(connection_options({"hbase.thrift.host": f"localhost:{dead},{live[0]}:{live[1]}",
                                               "hbase.thrift.timeout": "30000", "hbase.thrift.failover.rounds": "1"},
                                              kerberos=_settings(kdc)))
    try:
        assert isinstance(conn.call(lambda c: c.tables()), list)
        assert conn.gateway == Gateway(*live) and conn.connection.transport.qop is Qop.AUTH_INT
    finally:
        conn.close()


@kerberos
def test_thrift2_admin_speaks_sasl(kdc, kerberos_hbase) -> None:
    with thrift2_admin(*kerberos_hbase.thrift2, timeout_ms=30_000, kerberos=_settings(kdc)) as admin:
        assert admin.table_exists("hbase:meta")


@kerberos
def test_two_principals_in_one_process_leave_the_default_ticket_cache_alone(kdc, kerberos_hbase) -> None:
    default_cache = Path(os.environ["KRB5CCNAME"].removeprefix("FILE:"))
    default_cache.unlink(missing_ok=True)
    for role in ("client", "hbase"):  # hbase/localhost is a valid client principal too
        conn = thrift1(*kerberos_hbase.thrift, timeout_ms=30_000, kerberos=_settings(kdc, role))
        try:
            conn.call(lambda c: c.tables())
        finally:
            conn.close()
    assert not default_cache.exists()


def _refused(settings: KerberosSettings, gateway: tuple[str, int]) -> tuple[KerberosError, float]:
    started = time.monotonic()
    conn = thrift1(*gateway, timeout_ms=30_000, kerberos=settings, rounds=3, backoff_ms=1000)
    with pytest.raises(KerberosError) as info:
        conn.call(lambda c: c.tables())
    return info.value, time.monotonic() - started


@kerberos
def test_stale_keytab_is_refused_at_once_naming_the_keytab_option(kdc, kerberos_hbase) -> None:
    exc, took = _refused(_settings(kdc, "stale"), kerberos_hbase.thrift)
    assert "Preauthentication failed" in str(exc) and "'hbase.thrift.kerberos.client.keytab'" in str(exc)
    assert took < 5, "a refused login must not be retried or failed over"


@kerberos
def test_unknown_client_principal_is_refused_naming_the_principal_option(kdc, kerberos_hbase) -> None:
    exc, took = _refused(_settings(kdc, "unknown"), kerberos_hbase.thrift)
    assert "not found in Kerberos database" in str(exc) and exc.option == "hbase.thrift.kerberos.client.principal"
    assert took < 5


@kerberos
def test_unknown_service_principal_names_the_service_option_and_host(kdc, kerberos_hbase) -> None:
    exc, took = _refused(_settings(kdc, service="hbasex"), kerberos_hbase.thrift)
    assert "hbasex/localhost" in str(exc) and exc.option == "hbase.thrift.kerberos.service"
    assert took < 5


@kerberos
def test_missing_keytab_file_says_how_to_ship_it(kdc, kerberos_hbase, tmp_path: Path) -> None:
    principal, _ = kdc.keytab("client")
    exc, _ = _refused(KerberosSettings(principal=principal, keytab=str(tmp_path / "gone.keytab")),
                      kerberos_hbase.thrift)
    assert "--files" in str(exc) and exc.option == "hbase.thrift.kerberos.client.keytab"


@kerberos
def test_no_ticket_and_no_keytab_says_kinit(kdc, kerberos_hbase) -> None:
    Path(os.environ["KRB5CCNAME"].removeprefix("FILE:")).unlink(missing_ok=True)  # kdestroy
    exc, took = _refused(KerberosSettings(), kerberos_hbase.thrift)
    assert "run `kinit`" in str(exc) and "No Kerberos credentials available" in str(exc)
    assert took < 5


@kerberos
def test_ticket_cache_login_works_and_an_expired_ticket_says_kinit(kdc, kerberos_hbase) -> None:
    cache = Path(os.environ["KRB5CCNAME"].removeprefix("FILE:"))
    principal, keytab = kdc.keytab("client")
    env = dict(os.environ)
    subprocess.run(["kinit", "-k", "-t", keytab, principal], env=env, check=True, timeout=30)
    try:
        conn = thrift1(*kerberos_hbase.thrift, timeout_ms=30_000, kerberos=KerberosSettings())
        try:
            assert isinstance(conn.call(lambda c: c.tables()), list)
        finally:
            conn.close()
        # A ticket that has run out (lifetime 1 s): the cache exists but holds nothing usable.
        subprocess.run(["kinit", "-l", "1s", "-k", "-t", keytab, principal], env=env, check=True, timeout=30)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and subprocess.run(["klist", "-s"], env=env).returncode == 0:
            time.sleep(0.2)  # klist -s: exit 0 while the cache holds an unexpired ticket
        exc, took = _refused(KerberosSettings(principal=principal), kerberos_hbase.thrift)
        assert "run `kinit`" in str(exc) and took < 5
    finally:
        cache.unlink(missing_ok=True)


@kerberos
def test_kerberos_client_against_a_plain_gateway_fails_fast_and_says_so(kdc, kerberos_hbase, hbase_thrift) -> None:
    # The plain devstack gateway, reached as localhost so the service principal exists.
    settings = _settings(kdc, service="hbase")
    started = time.monotonic()
    conn = thrift1("localhost", hbase_thrift[1], timeout_ms=60_000, kerberos=settings)  # one pass
    with pytest.raises(SinkError, match="does not look Kerberized.*hbase.thrift.authentication=none"):
        conn.call(lambda c: c.tables())
    assert time.monotonic() - started < 15, "bounded by the handshake timeout, not hbase.thrift.timeout"


def test_kerberos_page_has_the_generated_option_table() -> None:
    from sparkbarrier.connectors.hbase import hbase_kerberos_options_table

    page = Path(__file__).resolve().parents[3] / "docs" / "hbase-kerberos.md"
    assert hbase_kerberos_options_table() in page.read_text(), "regenerate the table in docs/hbase-kerberos.md"


def test_one_kerberos_error_in_the_documented_tree_for_both_hops() -> None:
    """The same refused login was a ConfigError on the Kafka hop and a SinkError outside
    the documented tree on the HBase hop; now one KerberosError (a ConfigError) on both."""
    import sparkbarrier
    from sparkbarrier import ConfigError
    from sparkbarrier.connectors.kerberos._errors import kerberos_error
    from sparkbarrier.connectors.kafka.client import _kerberos_check

    assert KerberosError is sparkbarrier.KerberosError and issubclass(KerberosError, ConfigError)
    assert "KerberosError" in (sparkbarrier._exceptions.__doc__ or "")
    err = kerberos_error(KerberosSettings(principal="etl@EXAMPLE.COM", keytab=None, service="kafka"),
                         RuntimeError("No Kerberos credentials available"), _kerberos_check.LOGIN_OPTIONS)
    assert isinstance(err, KerberosError) and err.option == _kerberos_check.JAAS

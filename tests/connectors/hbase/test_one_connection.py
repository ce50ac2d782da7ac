"""One connection layer: the sink's ``hbase.*`` options reach every reader and the CLI.

Against the devstack's TLS gateway (Thrift over HTTPS, a certificate naming ``localhost``):
``read_committed``, ``lineage``, ``sink_status`` and ``python -m sparkbarrier status|lineage``
take the same option map the sink took, parsed by the same specs, so TLS (and Kerberos,
gateway lists, failover) works for each of them; a wrong or unknown option is refused
naming it, before any socket opens.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from sparkbarrier.__main__ import main
from sparkbarrier._exceptions import ConfigError, SinkError
from sparkbarrier.connectors.hbase import lineage, read_committed, sink_status
from sparkbarrier.connectors.hbase.client._connection import connection_options
from sparkbarrier.connectors.hbase.client._tls import TlsSettings

pytestmark = [pytest.mark.hbase, pytest.mark.timeout(180)]

SCHEMA = pa.schema([("id", pa.string()), ("v", pa.string())])


def test_keywords_and_options_are_one_parse_and_a_setting_given_twice_is_refused() -> None:
    opts = connection_options({"hbase.thrift.tls": "true", "hbase.thrift.tls.ca": "/ca.pem"},
                              host="h1:9443,h2", port=9443)
    assert [str(g) for g in opts.gateways] == ["h1:9443", "h2:9443"]
    assert opts.tls == TlsSettings(ca_file="/ca.pem")
    with pytest.raises(ConfigError, match="'hbase.thrift.host' is given twice") as info:
        connection_options({"HBASE.THRIFT.HOST": "a"}, host="b")
    assert info.value.option == "hbase.thrift.host"
    with pytest.raises(ConfigError, match="tls= and option 'hbase.thrift.tls'"):
        connection_options({"hbase.thrift.tls": "true"}, tls=TlsSettings())
    with pytest.raises(ConfigError, match="unknown option.*hbase.thrift.tls.cafile|hbase.thrift.tls.cafile"):
        connection_options({"hbase.thrift.tls.cafile": "/ca.pem"})


@pytest.fixture
def tls_sink(make_sink, tls_gateway, tls2_gateway) -> Any:
    host, port, ca = tls_gateway
    sink = make_sink(SCHEMA, **{"hbase.thrift.host": host, "hbase.thrift.port": str(port),
                                "hbase.thrift2.host": tls2_gateway, "hbase.thrift.tls": "true",
                                "hbase.thrift.tls.ca": ca})
    sink.commit([sink.task([{"id": "k1", "v": "one"}, {"id": "k2", "v": "two"}], batch=0)], 0)
    return sink


def _options(tls_gateway: tuple[str, int, str]) -> dict[str, str]:
    host, port, ca = tls_gateway
    return {"hbase.thrift.host": f"{host}:{port}", "hbase.thrift.tls": "true", "hbase.thrift.tls.ca": ca}


def test_every_reader_takes_the_sinks_tls_options(tls_sink, tls_gateway) -> None:
    options = _options(tls_gateway)
    opts = tls_sink.opts
    view = read_committed(None, None, opts.table, sink_id=opts.sink_id, commit_table=opts.commit_table,
                          options=options)
    assert sorted((r["id"], r["v"]) for r in view.to_pylist()) == [("k1", "one"), ("k2", "two")]
    cells = lineage(None, None, opts.table, "k1", sink_id=opts.sink_id, commit_table=opts.commit_table,
                    options=options)
    assert [(c.value, c.batch_id) for c in cells] == [(b"one", 0)]
    status = sink_status(None, None, opts.sink_id, opts.commit_table, options=options)
    assert (status.table, status.batch_id) == (opts.table, 0)


def test_the_cli_takes_the_sinks_options_from_flags_and_from_a_file(tls_sink, tls_gateway, tmp_path: Path,
                                                                     capsys) -> None:
    host, port, ca = tls_gateway
    opts = tls_sink.opts
    flags = ["--hbase", f"{host}:{port}", "--hbase-option", "hbase.thrift.tls=true",
             "--hbase-option", f"hbase.thrift.tls.ca={ca}", "--commit-table", opts.commit_table]
    assert main(["status", "--sink-id", opts.sink_id, "--json", *flags]) == 0
    assert json.loads(capsys.readouterr().out)["sink"]["batch_id"] == 0
    config = tmp_path / "hbase.properties"
    config.write_text(f"# the sink's options\nhbase.thrift.host={host}:{port}\nhbase.thrift.tls=true\n"
                      f"hbase.thrift.tls.ca={ca}\n")
    assert main(["lineage", "--table", opts.table, "--row", "k2", "--sink-id", opts.sink_id, "--json",
                 "--commit-table", opts.commit_table, "--hbase-config", str(config)]) == 0
    assert [c["value"] for c in json.loads(capsys.readouterr().out)] == [b"two".hex()]


def test_without_the_tls_options_the_cli_fails_naming_them(tls_sink, tls_gateway, capsys) -> None:
    host, port, _ = tls_gateway
    # TLS on, the system trust store: the devstack's own CA is not in it.
    assert main(["status", "--sink-id", tls_sink.opts.sink_id, "--hbase", f"{host}:{port}",
                 "--hbase-option", "hbase.thrift.tls=true", "--commit-table", tls_sink.opts.commit_table]) == 1
    err = capsys.readouterr().err
    assert "certificate verify failed" in err and "hbase.thrift.tls.ca" in err


@pytest.mark.parametrize("flags, named", [
    (["--hbase-option", "hbase.thrift.tls.cafile=/x.pem"], "hbase.thrift.tls.cafile"),
    (["--hbase-option", "hbase.thrift.tls.ca=/x.pem"], "hbase.thrift.tls.ca"),
    (["--hbase-option", "no-equals-sign"], "KEY=VALUE"),
    (["--hbase", "h:notaport"], "hbase.thrift.host"),
])
def test_a_bad_hbase_option_is_a_usage_error_before_any_connection(flags: list[str], named: str, capsys) -> None:
    assert main(["status", "--sink-id", "s", "--hbase", "localhost:1", *flags]) == 2
    assert named in capsys.readouterr().err


def test_a_refused_read_is_one_line_from_the_one_error_map(tls_gateway) -> None:
    """A missing commit table through TLS: the server's refusal, in one line, no stack trace."""
    with pytest.raises(SinkError) as info:
        sink_status(None, None, "nobody", "no_such_commit_table", options=_options(tls_gateway))
    assert "no_such_commit_table" in str(info.value) and "\n" not in str(info.value)

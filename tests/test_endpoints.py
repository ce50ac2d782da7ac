"""Endpoint variables, ``host:port`` and the commit-table name: one owner each.

``sparkbarrier._endpoints`` owns the variable names and ``parse_hostport``;
``connectors.hbase.DEFAULT_COMMIT_TABLE`` owns the commit table's default name. The
scan below keeps copies from coming back in the package and the demo.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkbarrier import ConfigError
from sparkbarrier._endpoints import HBASE_ENV, HBASE_THRIFT2_ENV, KAFKA_ENV, parse_hostport

ROOT = Path(__file__).resolve().parents[1]
# Package and demo code; tests may spell a variable to set it for a child process, and the
# examples are user code that spells what a user's own program would (no private import).
SKIP_DIRS = {".venv", "build", "benchmarks", ".git", "node_modules", "tests", "examples"}


@pytest.mark.parametrize("host,port", [("127.0.0.1", 9090), ("hbase.example", 1), ("[::1]", 65535)])
def test_hostport_round_trips(host: str, port: int) -> None:
    assert parse_hostport(f"{host}:{port}") == (host, port)


@pytest.mark.parametrize("bad", ["localhost", ":9090", "h:", "h:x", "h:0", "h:65536"])
def test_bad_hostport_is_a_config_error_naming_its_source(bad: str) -> None:
    with pytest.raises(ConfigError, match="--hbase must be host:port") as info:
        parse_hostport(bad, "--hbase")
    assert info.value.option == "--hbase"


def test_devstack_env_uses_the_owned_names() -> None:
    from sparkbarrier.devstack import Endpoints

    env = Endpoints("127.0.0.1:9092", ("127.0.0.1", 9090), ("127.0.0.1", 9095)).env()
    assert set(env) == {KAFKA_ENV, HBASE_ENV, HBASE_THRIFT2_ENV}
    assert parse_hostport(env[HBASE_ENV]) == ("127.0.0.1", 9090)


def test_cli_defaults_to_the_sinks_commit_table() -> None:
    from sparkbarrier.__main__ import _commit_table, _parser
    from sparkbarrier.connectors.hbase import DEFAULT_COMMIT_TABLE

    for command in (["status", "--group", "g"], ["lineage", "--table", "t", "--row", "r"]):
        # resolved when the command runs, so --help need not import the connector
        assert _commit_table(_parser().parse_args(command)) == DEFAULT_COMMIT_TABLE


def _python_sources() -> list[Path]:
    return [p for p in ROOT.rglob("*.py")
            if not SKIP_DIRS & set(p.relative_to(ROOT).parts)]


@pytest.mark.parametrize("literal,owner", [
    ('"sparkbarrier_commits"', "connectors/hbase/_options.py"),
    ('"SPARKBARRIER_KAFKA_BOOTSTRAP"', "_endpoints.py"),
    ('"SPARKBARRIER_HBASE_THRIFT"', "_endpoints.py"),
    ('"SPARKBARRIER_HBASE_THRIFT2"', "_endpoints.py"),
    ('"SPARKBARRIER_HBASE_THRIFT_GATEWAYS"', "_endpoints.py"),
    ('"SPARKBARRIER_HBASE_THRIFT_TLS"', "_endpoints.py"),
    ('"SPARKBARRIER_HBASE_THRIFT2_TLS"', "_endpoints.py"),
])
def test_literal_has_one_owner(literal: str, owner: str) -> None:
    copies = [str(p.relative_to(ROOT)) for p in _python_sources() if literal in p.read_text()]
    assert copies == [owner]

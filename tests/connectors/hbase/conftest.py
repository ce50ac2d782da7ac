"""Helpers for the barrier-hbase tests (the servers come from tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

from hbase_tasks import Sink


@pytest.fixture
def make_sink(servers: Any, unique_name: Callable[[str], str]) -> Callable[..., Sink]:
    def make(schema: pa.Schema, *, table: str | None = None, **extra: str) -> Sink:
        return Sink(servers.hbase_thrift, servers.hbase_thrift2, table or unique_name("t"), schema, **extra)

    return make


@pytest.fixture(scope="module")
def tls_gateway(every_gateway: Any) -> tuple[str, int, str]:
    """``(host, port, CA file)`` of the devstack's TLS Thrift1 gateway (Thrift over HTTPS)."""
    servers = every_gateway
    assert servers.hbase_tls is not None and servers.hbase_tls_ca, "no TLS gateway (SPARKBARRIER_HBASE_THRIFT_TLS)"
    return (*servers.hbase_tls, servers.hbase_tls_ca)


@pytest.fixture(scope="module")
def tls2_gateway(every_gateway: Any) -> str:
    """``host:port`` of the devstack's TLS Thrift2 gateway (same CA as :func:`tls_gateway`), for
    ``hbase.thrift2.host``: exactly once over TLS needs it."""
    servers = every_gateway
    assert servers.hbase_tls2 is not None, "no TLS Thrift2 gateway (SPARKBARRIER_HBASE_THRIFT2_TLS)"
    return "%s:%d" % servers.hbase_tls2

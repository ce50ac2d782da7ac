"""Driver lookups ride out a broker that is briefly away, then fail with the options to tune.

The fault suite restarts the real broker mid-stream; this pins the bounded end: with
nothing listening on the bootstrap port, lookups are retried ``fetchOffset.numRetries``
times and then fail with SourceError naming both options -- never a bare client error.
"""

from __future__ import annotations

import logging
import socket

import pytest

from sparkbarrier import SourceError
from sparkbarrier.connectors.kafka.planner._cluster import ClusterView
from sparkbarrier.connectors.kafka import parse_source_options


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.timeout(60)
def test_lookups_retry_then_fail_naming_the_retry_options(caplog: pytest.LogCaptureFixture) -> None:
    options = parse_source_options({
        "kafka.bootstrap.servers": f"127.0.0.1:{_closed_port()}", "subscribe": "t",
        "commitOffsets": "false", "fetchOffset.numRetries": "2", "fetchOffset.retryIntervalMs": "20",
        "kafka.request.timeout.ms": "2000", "kafka.bootstrap.timeout.ms": "500"})
    caplog.set_level(logging.WARNING)
    view = ClusterView(options)
    with pytest.raises(SourceError, match=r"cannot list the topics' partitions from 127.0.0.1:\d+ "
                                          r"after 3 attempts \(fetchOffset.numRetries=2, "
                                          r"fetchOffset.retryIntervalMs=20\)"):
        view.discover()
    view.close()
    assert caplog.text.count("retrying") == 2


def test_retry_options_are_validated() -> None:
    from sparkbarrier import ConfigError

    base = {"kafka.bootstrap.servers": "h:1", "subscribe": "t", "commitOffsets": "false"}
    assert parse_source_options(base).fetch_offset_retries == 3
    with pytest.raises(ConfigError, match="fetchOffset.retryIntervalMs"):
        parse_source_options({**base, "fetchOffset.retryIntervalMs": "0"})
    with pytest.raises(ConfigError, match="fetchOffset.numRetries"):
        parse_source_options({**base, "fetchOffset.numRetries": "-1"})

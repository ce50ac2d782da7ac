"""A checkpointed sink and the barrier-* sources share one Python worker daemon.

Spark keys its Python worker daemons by a function's interpreter and environment; a data
source it discovers on its own (``pyspark_barrier_*``) carries another environment than
one registered from Python, so barrier-kafka feeding a sink registered from Python
started a second daemon on the first batch (0.6-1.0 s, benchmarks/RESULTS.md).
"""

from __future__ import annotations

from typing import Any

import pytest

import sparkbarrier
from sparkbarrier.barrier import CheckpointedSink

pytestmark = [pytest.mark.spark]


def _daemon_key(spark: Any, name: str) -> tuple[str, dict[str, str]]:
    """What Spark keys a data source's Python workers by: interpreter and environment."""
    function = spark._jsparkSession.sessionState().dataSourceManager().lookupDataSource(name).dataSourceCls()
    return function.pythonExec(), dict(function.envVars())


def test_a_checkpointed_sink_runs_in_the_daemon_of_the_barrier_sources(spark, unique_name) -> None:
    name = unique_name("sink").replace("_", "-")
    sparkbarrier.checkpointed_sink(spark, name, CheckpointedSink)
    assert _daemon_key(spark, "barrier-kafka") == _daemon_key(spark, name) == _daemon_key(spark, "barrier-hbase")

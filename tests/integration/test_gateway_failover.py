"""A Thrift1 gateway killed in the middle of a query: the query finishes through the other one.

The pipeline of the fault suite (barrier-kafka → parse → barrier-hbase, exactly-once)
writes through both gateways of a private devstack (``hbase.thrift.host`` = the list;
write task ``i`` starts at gateway ``i mod 2``). After the first commit, the second
gateway is SIGKILLed (a crash, no graceful shutdown); the tasks that were using it
fail over mid-batch to the first one and the query completes in the same run. Then
the committed view, the plain scan and the version history are exact
(``Scenario.check_complete``): a flush retried on the other gateway rewrote the same
cells at the same timestamps. The killed gateway is started again at the end, so the
private stack stays whole for the other tests.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from fault_kit import PipelineConfig, Scenario, wait_for
from server_restart import kill_server

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.kafka, pytest.mark.hbase]


@pytest.mark.timeout(300)
def test_query_rides_through_a_gateway_killed_mid_run(tmp_path: Path, unique_name,
                                                      private_stack_every_gateway) -> None:
    home, endpoints = private_stack_every_gateway
    name = unique_name("gwfail")
    gateways = tuple(tuple(g) for g in endpoints.hbase_thrift_gateways)
    assert len(gateways) == 2
    sc = Scenario(PipelineConfig(bootstrap=endpoints.kafka_bootstrap, thrift=gateways[0],
                                 thrift2=tuple(endpoints.hbase_thrift2), topic=name, group=f"{name}_group",
                                 table=name, sink_id=f"{name}_sink", checkpoint=str(tmp_path / "checkpoint"),
                                 max_offsets=15, gateways=gateways), tmp_path)
    sc.fill_topic(300)
    restart: list[Callable[[float], None]] = []

    def kill(alive: Callable[[], bool]) -> None:
        wait_for(lambda: sc.commit_record() or not alive(), 120, "a first sink commit")
        restart.append(kill_server(home, "hbase-thrift-b"))

    try:
        run = sc.run(during=kill, timeout=240)
    finally:
        if restart:
            restart[0](120.0)
    assert restart, "the gateway was not killed"
    assert run.returncode == 0, run.log[-3000:]
    # The failing-over tasks name the dead gateway in their warning.
    assert f"gateway {gateways[1][0]}:{gateways[1][1]} failed" in run.log, run.log[-3000:]
    sc.check_complete()

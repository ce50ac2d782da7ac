"""The devstack against real servers: idempotent up, status, env, down/up cycles.

Tests on the shared stack (default home) only ever call ``up``/``status``/``env``;
anything that stops servers runs in a throw-away home on free ports. The shared stack's
on-demand gateways (second Thrift1, TLS Thrift1, TLS Thrift2) may or may not run, as other tests asked.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sparkbarrier.devstack import Devstack, DevstackError, Port
from sparkbarrier.devstack import _stack as stack_module
from sparkbarrier.devstack._process import choose_ports

from devstack_helpers import run_cli, stack_pids

pytestmark = [pytest.mark.slow, pytest.mark.kafka, pytest.mark.hbase, pytest.mark.timeout(300)]

_EXPORT = re.compile(
    r"export SPARKBARRIER_KAFKA_BOOTSTRAP=127\.0\.0\.1:(\d+)\n"
    r"export SPARKBARRIER_HBASE_THRIFT=127\.0\.0\.1:(\d+)\n"
    r"export SPARKBARRIER_HBASE_THRIFT2=127\.0\.0\.1:(\d+)\n"
    r"export SPARKBARRIER_HBASE_THRIFT_GATEWAYS=127\.0\.0\.1:\2(?:,127\.0\.0\.1:(\d+))?\n"
    r"(?:export SPARKBARRIER_HBASE_THRIFT_TLS=localhost:(\d+)\n"
    r"export SPARKBARRIER_HBASE_THRIFT_TLS_CA=/\S+/sparkbarrier-thrift-ca\.pem\n"
    r"export SPARKBARRIER_HBASE_THRIFT2_TLS=localhost:(\d+)\n)?"
    r"export SPARKBARRIER_KAFKA_SECURITY=(/\S+/kafka-security\.json)\n"
    r"(?:export SPARKBARRIER_KAFKA_CLUSTER_BOOTSTRAP=127\.0\.0\.1:\d+,127\.0\.0\.1:\d+,127\.0\.0\.1:\d+\n)?"
    r"(?:export SPARKBARRIER_HDFS=hdfs://127\.0\.0\.1:\d+\nexport SPARKBARRIER_WEBHDFS=http://127\.0\.0\.1:\d+\n)?"
)  # the last line while the optional 3-node cluster runs (`cluster up`, fixture kafka_cluster)
_DEFAULT = ["kafka", "hbase-master", "hbase-thrift", "hbase-thrift2"]  # what `up` starts
_ON_DEMAND = ["hbase-thrift-b", "hbase-thrift-tls", "hbase-thrift2-tls"]  # what `up --all` adds
_PROCESSES = _DEFAULT + _ON_DEMAND


@pytest.fixture(scope="module")
def shared() -> Devstack:
    """The shared stack (default home), started if needed and left running."""
    stack = Devstack()
    stack.up()
    return stack


def test_up_twice_keeps_the_same_servers(shared: Devstack) -> None:
    before = {p.name: p.pid for p in shared.status().processes}
    started = time.monotonic()
    first = shared.up()
    second = Devstack().up()
    assert first == second
    assert {p.name: p.pid for p in shared.status().processes} == before
    assert time.monotonic() - started < 60


def test_status_reports_every_process_with_pid_and_ports(shared: Devstack) -> None:
    status = shared.status()
    assert status.running
    assert [p.name for p in status.processes] == _PROCESSES
    assert [p.name for p in status.processes if p.optional] == _ON_DEMAND
    assert all(p.pid and p.alive and p.serving and p.ports for p in status.processes if not p.optional)
    result = run_cli("status")
    assert result.returncode == 0
    for name in _DEFAULT:
        assert re.search(rf"{name}\s+up\s+pid=\d+", result.stdout), result.stdout
    for name in _ON_DEMAND:  # as other tests asked for them
        assert re.search(rf"{name}\s+(up\s+pid=\d+|off \(up --all\)\s+pid=-)", result.stdout), result.stdout
    thrift2 = next(p for p in status.processes if p.name == "hbase-thrift2")
    assert set(thrift2.ports) == {"hbase_thrift2"}
    assert thrift2.log.endswith("hbase-thrift2.log")


def test_env_output_evaluates_in_a_shell(shared: Devstack) -> None:
    endpoints = shared.endpoints()
    assert endpoints is not None
    result = run_cli("env")
    assert result.returncode == 0
    match = _EXPORT.fullmatch(result.stdout)
    assert match, result.stdout
    script = (f'eval "$({sys.executable} -m sparkbarrier.devstack env)"; '
              'echo "$SPARKBARRIER_KAFKA_BOOTSTRAP $SPARKBARRIER_HBASE_THRIFT '
              '$SPARKBARRIER_HBASE_THRIFT2"')
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                         timeout=60, check=True).stdout.split()
    host, port = endpoints.hbase_thrift
    host2, port2 = endpoints.hbase_thrift2
    assert out == [endpoints.kafka_bootstrap, f"{host}:{port}", f"{host2}:{port2}"]
    assert port2 != port


def test_env_names_the_kafka_cluster_while_it_runs(shared: Devstack, kafka_cluster) -> None:
    result = run_cli("env")
    assert result.returncode == 0
    assert f"export SPARKBARRIER_KAFKA_CLUSTER_BOOTSTRAP={kafka_cluster.bootstrap}\n" in result.stdout
    endpoints = shared.endpoints()
    assert endpoints is not None and endpoints.kafka_cluster_bootstrap == kafka_cluster.bootstrap


def test_cli_up_on_running_stack_prints_env_on_stdout_only(shared: Devstack) -> None:
    result = run_cli("up")
    assert result.returncode == 0
    assert _EXPORT.fullmatch(result.stdout), result.stdout
    assert "already running" in result.stderr


def test_tls_thrift2_gateway_answers_thrift2_over_https_with_the_ca_verified(every_gateway) -> None:
    """``hbase-thrift2-tls`` (``up --all``): the thrift2 server in HTTP mode with TLS, the TLS
    Thrift1 gateway's certificate (DNS:localhost) and CA; what exactly-once over TLS needs."""
    from sparkbarrier._exceptions import SinkError
    from sparkbarrier.connectors.hbase.client._connection import connection_options
    from sparkbarrier.connectors.hbase.client._thrift2 import Thrift2Admin

    assert every_gateway.hbase_tls2 is not None and every_gateway.hbase_tls_ca, (
        "no TLS Thrift2 gateway (SPARKBARRIER_HBASE_THRIFT2_TLS)")
    host, port = every_gateway.hbase_tls2
    tls = {"hbase.thrift.tls": "true", "hbase.thrift.tls.ca": every_gateway.hbase_tls_ca,
           "hbase.thrift.timeout": "20000", "hbase.thrift.failover.rounds": "1"}
    assert host == "localhost" and (host, port) != every_gateway.hbase_tls
    with Thrift2Admin(connection_options({**tls, "hbase.thrift2.host": f"{host}:{port}"})) as admin:
        assert admin.table_exists("hbase:meta")
        assert not admin.table_exists("sparkbarrier_no_such_table")
    # The CA is really verified, host name included: the certificate names localhost only.
    # (HTTPS connects at the first call, not in the constructor.)
    by_address = connection_options({**tls, "hbase.thrift2.host": f"127.0.0.1:{port}"})
    with Thrift2Admin(by_address) as admin, pytest.raises(SinkError, match="CERTIFICATE_VERIFY_FAILED"):
        admin.table_exists("hbase:meta")


def _running(home: Path) -> dict[str, int]:
    return {p.name: p.pid for p in Devstack(home).status().processes if p.alive and p.pid}


@pytest.mark.timeout(480)  # a start, three gateways, an HBase restart: 3.5 min on two loaded cores
def test_up_starts_the_default_set_and_up_all_adds_the_gateways_beside_it(
        scratch_home: Path, scratch_env: dict[str, str], shared: Devstack) -> None:
    # One throw-away stack for every step (each start of it costs a minute on two cores).
    stack = Devstack(scratch_home)
    endpoints = stack.up()
    shared_endpoints = shared.endpoints()
    assert shared_endpoints is not None
    assert endpoints.kafka_bootstrap != shared_endpoints.kafka_bootstrap
    assert endpoints.hbase_thrift != shared_endpoints.hbase_thrift
    assert endpoints.hbase_thrift2 != shared_endpoints.hbase_thrift2
    # `up`: what the demo uses, nothing else.
    default = _running(scratch_home)
    assert sorted(default) == sorted(_DEFAULT)
    assert len(stack_pids(scratch_home)) == 4
    assert endpoints.hbase_thrift_gateways == (endpoints.hbase_thrift,)
    assert endpoints.hbase_thrift_tls is None and endpoints.hbase_thrift_tls_ca is None
    assert stack.status().running
    status = run_cli("status", env=scratch_env)
    assert status.returncode == 0, status.stderr
    for name in _ON_DEMAND:
        assert re.search(rf"{name}\s+off \(up --all\)\s+pid=-", status.stdout), status.stdout
    env = run_cli("env", env=scratch_env)
    assert "SPARKBARRIER_HBASE_THRIFT_TLS" not in env.stdout
    assert endpoints.hbase_thrift2_tls is None and "SPARKBARRIER_HBASE_THRIFT2_TLS" not in env.stdout
    assert f"SPARKBARRIER_HBASE_THRIFT_GATEWAYS=127.0.0.1:{endpoints.hbase_thrift[1]}\n" in env.stdout

    # `up --all`: the three gateways start beside the running servers, which stay as they were.
    result = run_cli("up", "--all", env=scratch_env)
    assert result.returncode == 0, result.stderr
    every = stack.endpoints()
    assert every is not None and _EXPORT.fullmatch(result.stdout), result.stdout
    assert len(every.hbase_thrift_gateways) == 2 and every.hbase_thrift_gateways[0] == endpoints.hbase_thrift
    assert every.hbase_thrift_tls is not None and every.hbase_thrift_tls_ca
    assert f"export SPARKBARRIER_HBASE_THRIFT_TLS=localhost:{every.hbase_thrift_tls[1]}\n" in result.stdout
    assert every.hbase_thrift2_tls is not None and every.hbase_thrift2_tls != every.hbase_thrift_tls
    assert f"export SPARKBARRIER_HBASE_THRIFT2_TLS=localhost:{every.hbase_thrift2_tls[1]}\n" in result.stdout
    all_seven = _running(scratch_home)
    assert sorted(all_seven) == sorted(_PROCESSES)
    assert {n: all_seven[n] for n in _DEFAULT} == default

    # A plain `up` leaves running gateways alone (another session may be using them).
    assert stack.up() == every
    assert _running(scratch_home) == all_seven

    # A restarted HBase takes them along: they would serve a master that is gone.
    os.kill(all_seven["hbase-master"], signal.SIGKILL)
    restarted = stack.up()
    after = _running(scratch_home)
    assert sorted(after) == sorted(_DEFAULT)
    assert after["kafka"] == default["kafka"] and after["hbase-master"] != default["hbase-master"]
    assert restarted.hbase_thrift_tls is None and len(restarted.hbase_thrift_gateways) == 1
    assert restarted.hbase_thrift2_tls is None
    assert [p.name for p in stack.status().processes if p.optional and p.pid is None] == _ON_DEMAND

    assert sorted(stack.down()) == sorted(_DEFAULT)
    assert stack_pids(scratch_home) == []
    assert stack.endpoints() is None
    assert not stack.status().running
    assert shared.status().running  # the shared stack never noticed


def test_server_dying_at_start_stops_everything_started(
    scratch_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Fault injection: hand HBase a ZooKeeper port someone else holds, so the
    # master exits at start ("Could not start ZK at requested port").
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        zk_port = squatter.getsockname()[1]

        def ports_with_busy_zk(requests: dict[Port, int | None]) -> dict[Port, int]:
            chosen = choose_ports(requests)
            if Port.HBASE_ZOOKEEPER in chosen:
                chosen[Port.HBASE_ZOOKEEPER] = zk_port
            return chosen

        monkeypatch.setattr(stack_module, "choose_ports", ports_with_busy_zk)
        with pytest.raises(DevstackError) as info:
            Devstack(scratch_home, start_timeout_s=120).up()
    assert "hbase-master exited during start" in info.value.cause
    assert info.value.log_tail
    assert stack_pids(scratch_home) == []
    assert not list((scratch_home / "run").glob("*.json"))


def test_a_port_taken_before_its_server_binds_it_is_chosen_again(
    scratch_home: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The race a busy machine runs (CI, 2026-12-02: a throw-away stack's Kafka exited with
    "Address already in use" on the free port chosen for it): the first choice hands Kafka a
    port someone else holds; ``up`` stops what it started, chooses again and comes up."""
    import logging

    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        calls = []

        def first_kafka_port_taken(requests: dict[Port, int | None]) -> dict[Port, int]:
            chosen = choose_ports(requests)
            calls.append(chosen)
            if len(calls) == 1 and Port.KAFKA in chosen:
                chosen[Port.KAFKA] = taken
            return chosen

        monkeypatch.setattr(stack_module, "choose_ports", first_kafka_port_taken)
        stack = Devstack(scratch_home, start_timeout_s=180)
        try:
            with caplog.at_level(logging.WARNING, logger=stack_module.__name__):
                endpoints = stack.up()
            assert len(calls) == 2
            assert endpoints.kafka_bootstrap != f"127.0.0.1:{taken}"
            assert any("choosing ports again" in r.getMessage() for r in caplog.records)
        finally:
            stack.down()
    assert stack_pids(scratch_home) == []

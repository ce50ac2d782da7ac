"""Pure tests of paths, port requests/choice and the endpoints' shell form (no servers)."""

from __future__ import annotations

import contextlib
import re
import socket
from pathlib import Path

import pytest

import sparkbarrier.devstack as devstack
from sparkbarrier.devstack import DevstackError, Endpoints, Port
from sparkbarrier.devstack._config import Paths, port_requests
from sparkbarrier.devstack._process import choose_ports, port_is_free


def test_public_surface_is_exported() -> None:
    for name in devstack.__all__:
        assert hasattr(devstack, name), name


def test_home_override_keeps_the_shared_jar_cache(tmp_path: Path) -> None:
    default = Paths.resolve(environ={})
    moved = Paths.resolve(environ={"SPARKBARRIER_DEVSTACK_HOME": str(tmp_path)})
    assert moved.home == tmp_path
    assert moved.cache == default.cache
    assert moved.run == tmp_path / "run"


def test_cache_is_configurable_apart(tmp_path: Path) -> None:
    paths = Paths.resolve(environ={"SPARKBARRIER_DEVSTACK_CACHE": str(tmp_path / "c")})
    assert paths.cache == tmp_path / "c"


def test_explicit_port_argument_wins_over_env() -> None:
    env = {Port.KAFKA.env: "19999"}
    assert port_requests({Port.KAFKA: 18888}, env)[Port.KAFKA] == 18888
    assert port_requests(None, env)[Port.KAFKA] == 19999
    assert port_requests(None, {})[Port.KAFKA] is None


def test_port_env_that_is_not_a_number_is_rejected() -> None:
    with pytest.raises(DevstackError, match="not a port number"):
        port_requests(None, {Port.HBASE_THRIFT.env: "ninety"})


def test_busy_default_port_is_replaced_by_a_free_one() -> None:
    with contextlib.ExitStack() as stack:
        if port_is_free(Port.KAFKA.default):  # else it is busy already, as wanted
            holder = stack.enter_context(socket.socket())
            holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            holder.bind(("127.0.0.1", Port.KAFKA.default))
            holder.listen()
        chosen = choose_ports({Port.KAFKA: None, Port.KAFKA_CONTROLLER: None})
    assert chosen[Port.KAFKA] != Port.KAFKA.default
    assert chosen[Port.KAFKA] != chosen[Port.KAFKA_CONTROLLER]


def test_busy_explicit_port_is_an_error_naming_flag_and_env() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        with pytest.raises(DevstackError) as info:
            choose_ports({Port.HBASE_THRIFT: taken})
    message = str(info.value)
    assert f"port {taken} requested for hbase_thrift is already in use" in message
    assert "--hbase-thrift-port" in message and Port.HBASE_THRIFT.env in message


def test_same_explicit_port_twice_is_rejected() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    with pytest.raises(DevstackError, match="already in use"):
        choose_ports({Port.KAFKA: free, Port.KAFKA_CONTROLLER: free})


def test_thrift2_port_has_its_own_default_flag_and_env() -> None:
    assert Port.HBASE_THRIFT2.default == 9095
    assert Port.HBASE_THRIFT2.flag == "--hbase-thrift2-port"
    assert Port.HBASE_THRIFT2.env == "SPARKBARRIER_DEVSTACK_HBASE_THRIFT2_PORT"
    assert port_requests(None, {Port.HBASE_THRIFT2.env: "19095"})[Port.HBASE_THRIFT2] == 19095


def test_exports_are_eval_friendly_lines() -> None:
    text = Endpoints("127.0.0.1:9092", ("127.0.0.1", 9090), ("127.0.0.1", 9095)).exports()
    assert text.splitlines() == [
        "export SPARKBARRIER_KAFKA_BOOTSTRAP=127.0.0.1:9092",
        "export SPARKBARRIER_HBASE_THRIFT=127.0.0.1:9090",
        "export SPARKBARRIER_HBASE_THRIFT2=127.0.0.1:9095",
    ]
    assert all(re.fullmatch(r"export [A-Z0-9_]+=[0-9.:]+", line) for line in text.splitlines())


def test_cluster_nodes_form_one_quorum_that_keeps_acked_records(tmp_path: Path) -> None:
    from sparkbarrier.devstack._kafka_cluster_nodes import server_properties

    ports = {1: (19092, 19192), 2: (19093, 19193), 3: (19094, 19194)}
    props = _properties(server_properties(2, tmp_path, ports))
    assert props["node.id"] == "2" and props["process.roles"] == "broker,controller"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:19192,2@127.0.0.1:19193,3@127.0.0.1:19194"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:19093,CONTROLLER://127.0.0.1:19193"
    assert [props[k] for k in ("default.replication.factor", "min.insync.replicas",
                               "offsets.topic.replication.factor", "transaction.state.log.min.isr")] == ["3", "2", "3", "2"]
    assert props["auto.create.topics.enable"] == props["unclean.leader.election.enable"] == "false"


def _properties(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if not line.startswith("#"))


def test_cluster_broker_defaults_profile_keeps_durability_but_kafkas_failover_timings(tmp_path: Path) -> None:
    from sparkbarrier.devstack._kafka_cluster_nodes import profile_of, server_properties

    ports = {1: (19092, 19192), 2: (19093, 19193), 3: (19094, 19194)}
    fast, defaults = (server_properties(1, tmp_path, ports, p) for p in ("devstack", "broker-defaults"))
    assert (profile_of(fast), profile_of(defaults), profile_of("node.id=1\n")) == ("devstack", "broker-defaults", None)
    assert _properties(fast)["broker.session.timeout.ms"] == "4000"
    timings = ("broker.session.timeout.ms", "broker.heartbeat.interval.ms", "replica.lag.time.max.ms")
    assert not any(k in _properties(defaults) for k in timings)  # Kafka's own: 9 s, 2 s, 30 s
    durability = ("default.replication.factor", "min.insync.replicas", "unclean.leader.election.enable")
    assert [_properties(defaults)[k] for k in durability] == [_properties(fast)[k] for k in durability]


def test_cluster_export_line_and_ports_stay_out_of_up() -> None:
    from sparkbarrier.devstack.__main__ import _parser
    from sparkbarrier.devstack._kafka_cluster import CLUSTER_PORTS, KafkaCluster

    assert KafkaCluster.exports("127.0.0.1:1,127.0.0.1:2,127.0.0.1:3") == (
        "export SPARKBARRIER_KAFKA_CLUSTER_BOOTSTRAP=127.0.0.1:1,127.0.0.1:2,127.0.0.1:3\n")
    env = Endpoints("127.0.0.1:9092", ("127.0.0.1", 9090), ("127.0.0.1", 9095),
                    kafka_cluster_bootstrap="127.0.0.1:1,127.0.0.1:2,127.0.0.1:3").env()
    assert env["SPARKBARRIER_KAFKA_CLUSTER_BOOTSTRAP"] == "127.0.0.1:1,127.0.0.1:2,127.0.0.1:3"
    up_help = _parser().parse_args(["up"])
    assert not any(hasattr(up_help, p.key) for p in CLUSTER_PORTS)
    cluster = _parser().parse_args(["cluster", "up", CLUSTER_PORTS[0].flag, "29092"])
    assert getattr(cluster, CLUSTER_PORTS[0].key) == 29092

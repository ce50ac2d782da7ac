"""The Kafka server of the dev stack: one KRaft node that is broker and controller.

Settings are those of a single-node test cluster: replication factors and min ISR
of every internal topic at 1 (transactions and consumer groups work on one node),
no initial rebalance delay, topics auto-created with one partition. The quorum is
static (``controller.quorum.voters``), so ``StorageTool format`` needs no
``--standalone`` and the data dir can be formatted afresh on every start.
"""

from __future__ import annotations

import base64
import logging
import secrets
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .._exceptions import DevstackError
from . import _certs, _kafka_security
from ._config import Port
from ._jvm import Java, write_log4j_config
from ._maven import Classpath
from ._process import log_tail

__all__ = ["KAFKA_MAIN", "NAME", "STORAGE_TOOL", "prepare", "probe", "security_manifest"]

log = logging.getLogger(__name__)

NAME = "kafka"
KAFKA_MAIN = "kafka.Kafka"
STORAGE_TOOL = "kafka.tools.StorageTool"
HEAP = "1g"
PROBE_TOPIC = "__sparkbarrier_devstack_probe"
_NODE_ID = 1

# C1 only: see _hbase._COMMON_OPTIONS.
_JVM_OPTIONS = (
    "-Xms256m",
    "-XX:TieredStopAtLevel=1",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-Djava.awt.headless=true",
)


def _server_properties(data_dir: Path, ports: Mapping[Port, int],
                       security: Mapping[str, Any]) -> str:
    broker, controller = ports[Port.KAFKA], ports[Port.KAFKA_CONTROLLER]
    secured = {name: f"{name}://127.0.0.1:{ports[port]}"
               for name, (port, _) in _kafka_security.LISTENERS.items()}
    settings = {
        "process.roles": "broker,controller",
        "node.id": _NODE_ID,
        "controller.quorum.voters": f"{_NODE_ID}@127.0.0.1:{controller}",
        "listeners": ",".join([f"PLAINTEXT://127.0.0.1:{broker}",
                               f"CONTROLLER://127.0.0.1:{controller}", *secured.values()]),
        "advertised.listeners": ",".join([f"PLAINTEXT://127.0.0.1:{broker}",
                                          *secured.values()]),
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": ",".join(
            ["PLAINTEXT:PLAINTEXT", "CONTROLLER:PLAINTEXT",
             *(f"{name}:{proto}" for name, (_, proto) in _kafka_security.LISTENERS.items())]),
        "log.dirs": data_dir / "logs",
        "num.partitions": 1,
        "default.replication.factor": 1,
        "auto.create.topics.enable": "true",
        "offsets.topic.replication.factor": 1,
        "offsets.topic.num.partitions": 10,
        "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1,
        "transaction.state.log.num.partitions": 10,
        "share.coordinator.state.topic.replication.factor": 1,
        "share.coordinator.state.topic.min.isr": 1,
        "group.initial.rebalance.delay.ms": 0,
        "log.retention.hours": 24,
        "log.segment.bytes": 64 * 1024 * 1024,
        **_kafka_security.listener_settings(security),
    }
    return "".join(f"{key}={value}\n" for key, value in settings.items())


def _cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding (as
    ``StorageTool random-uuid`` prints, minus one JVM start); never starts with '-'."""
    while True:
        text = base64.urlsafe_b64encode(secrets.token_bytes(16))
        value = text.decode().rstrip("=")
        if not value.startswith("-"):
            return value


def prepare(
    java: Java,
    classpath: Classpath,
    *,
    marker: str,
    data_dir: Path,
    ports: Mapping[Port, int],
    log_path: Path,
) -> list[str]:
    """Wipe ``data_dir``, write configs and key material, format the storage (with the
    SCRAM users); return the server command.

    Formatting runs ``kafka.tools.StorageTool format`` (a short JVM run); its output
    is appended to ``log_path``. Raises ``DevstackError`` if formatting fails. The
    secured listeners' manifest is written to ``security_manifest(data_dir)``.
    """
    shutil.rmtree(data_dir, ignore_errors=True)
    data_dir.mkdir(parents=True)
    security = _kafka_security.prepare(data_dir / "tls", _certs.keytool_of(java.executable))
    security.update({"plaintext": f"127.0.0.1:{ports[Port.KAFKA]}",
                     "sasl_ssl": f"127.0.0.1:{ports[Port.KAFKA_SASL_SSL]}",
                     "ssl": f"127.0.0.1:{ports[Port.KAFKA_MTLS]}",
                     "sasl_ssl_wrong_host": f"127.0.0.1:{ports[Port.KAFKA_WRONG_HOST]}"})
    _kafka_security.write_manifest(security_manifest(data_dir), security)
    config = data_dir / "server.properties"
    _certs.write_private(config, _server_properties(data_dir, ports, security))  # store passwords
    log4j = write_log4j_config(data_dir)
    options = (*_JVM_OPTIONS, f"-Dlog4j2.configurationFile={log4j}")
    fmt = java.command(
        marker="-Dsparkbarrier.devstack.tool=kafka-storage-format",
        heap="256m",
        classpath=classpath.as_arg(),
        main=STORAGE_TOOL,
        args=("format", "-t", _cluster_id(), "-c", str(config), "--ignore-formatted",
              *_kafka_security.scram_format_args(security)),
        options=options,
    )
    with open(log_path, "ab") as out:
        try:
            result = subprocess.run(fmt, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, timeout=120, check=False)
        except subprocess.TimeoutExpired as exc:
            raise DevstackError("kafka storage format hung for 120s",
                                fix=f"see {log_path}", log_path=str(log_path)) from exc
    if result.returncode != 0:
        raise DevstackError(
            f"kafka storage format failed (exit {result.returncode}; log: {log_path})",
            fix="read the log tail above",
            log_path=str(log_path),
            log_tail=log_tail(log_path),
        )
    return java.command(marker=marker, heap=HEAP, classpath=classpath.as_arg(),
                        main=KAFKA_MAIN, args=(str(config),), options=options)


def security_manifest(data_dir: Path) -> Path:
    """The secured listeners' manifest of the broker whose data lives in ``data_dir``."""
    return _kafka_security.manifest_path(data_dir / "tls")


class _NotYet(Exception):
    """The probe record has not come back yet."""


def probe(bootstrap: str, *, deadline: float, check: Callable[[], None] | None = None) -> None:
    """Produce one record, consume it back and commit a group offset, retrying until
    ``deadline`` (``time.monotonic()``); raises ``DevstackError`` when it passes.
    ``check`` runs before every attempt and may raise to abort (server died).

    The group commit also creates ``__consumer_offsets``, so the first real test
    does not pay for it.
    """
    from kafka.errors import KafkaError

    last: BaseException | None = None
    while time.monotonic() < deadline:
        if check is not None:
            check()
        try:
            _roundtrip(bootstrap, max(5.0, deadline - time.monotonic()))
            return
        except (KafkaError, OSError, _NotYet) as exc:
            last = exc
            log.debug("kafka probe not yet successful: %r", exc)
            time.sleep(0.5)
    raise DevstackError(
        f"kafka at {bootstrap} accepts connections but a produce/consume round trip "
        f"did not succeed in time (last error: {last!r})",
        fix="read <home>/logs/kafka.log; then `python -m sparkbarrier.devstack down` and `up`",
    )


def _roundtrip(bootstrap: str, budget_s: float) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    token = secrets.token_hex(8).encode()
    timeout_ms = int(min(budget_s, 30.0) * 1000)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all",
                             max_block_ms=timeout_ms, request_timeout_ms=timeout_ms)
    try:
        sent = producer.send(PROBE_TOPIC, value=token).get(timeout=timeout_ms / 1000)
    finally:
        producer.close(timeout=5)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id="sparkbarrier-devstack-probe",
                             enable_auto_commit=False, request_timeout_ms=max(timeout_ms, 31000))
    try:
        partition = TopicPartition(PROBE_TOPIC, sent.partition)
        consumer.assign([partition])
        consumer.seek(partition, sent.offset)
        end = time.monotonic() + timeout_ms / 1000
        while time.monotonic() < end:
            batch = consumer.poll(timeout_ms=500)
            if any(r.value == token for rs in batch.values() for r in rs):
                consumer.commit()
                return
        raise _NotYet("probe record not consumed back")
    finally:
        consumer.close()

"""A local Kafka + HBase for tests and the demo, without Docker.

``python -m sparkbarrier.devstack up | down | status | env`` or, from Python::

    from sparkbarrier.devstack import Devstack
    endpoints = Devstack().up()          # idempotent; starts what is not running
    endpoints.kafka_bootstrap            # "127.0.0.1:9092"
    endpoints.hbase_thrift               # ("127.0.0.1", 9090)
    endpoints.hbase_thrift2              # ("127.0.0.1", 9095)

Kafka (KRaft, one broker+controller) and HBase (standalone master + Thrift1 + Thrift2) run
as plain JVMs on 127.0.0.1; their jars come from Maven Central once (cached, see
``_config`` for locations and environment variables). Servers outlive the caller
until ``down``.

Optional: a private MIT Kerberos KDC (``python -m sparkbarrier.devstack kdc up``,
``Kdc().up()``; see ``_kdc`` and docs/kerberos-devstack.md), and a 3-node Kafka cluster
whose brokers failover tests kill and restart (``python -m sparkbarrier.devstack
cluster up``; ``_kafka_cluster.KafkaCluster``, the tests' ``kafka_cluster`` fixture).
"""

from __future__ import annotations

from .._exceptions import DevstackError
from ._config import ENV_CACHE, ENV_HOME, ENV_MAVEN_REPO, ENV_MAVEN_SETTINGS, Port
from ._kdc import KDC_ENV, Kdc, KdcManifest
from ._stack import (
    HBASE_ENV,
    HBASE_GATEWAYS_ENV,
    HBASE_THRIFT2_ENV,
    KAFKA_ENV,
    Devstack,
    Endpoints,
    ProcessStatus,
    StackStatus,
)

__all__ = [
    "Devstack",
    "Endpoints",
    "Kdc",
    "KdcManifest",
    "KDC_ENV",
    "StackStatus",
    "ProcessStatus",
    "Port",
    "DevstackError",
    "KAFKA_ENV",
    "HBASE_ENV",
    "HBASE_GATEWAYS_ENV",
    "HBASE_THRIFT2_ENV",
    "ENV_HOME",
    "ENV_CACHE",
    "ENV_MAVEN_REPO",
    "ENV_MAVEN_SETTINGS",
]

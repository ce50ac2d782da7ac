"""A local Kafka + HBase for tests and the demo, without Docker.

``python -m sparkbarrier.devstack up | down | status | env`` or, from Python::

    from sparkbarrier.devstack import Devstack
    endpoints = Devstack().up()          # idempotent; starts what is not running
    endpoints.kafka_bootstrap            # "127.0.0.1:9092"
    endpoints.hbase_thrift               # ("127.0.0.1", 9090)
    endpoints.hbase_thrift2              # ("127.0.0.1", 9095)

Kafka (KRaft, one broker+controller) and HBase (standalone master + Thrift1 + Thrift2) run
as plain JVMs on 127.0.0.1; ``up(all_gateways=True)`` (``up --all``) adds a second Thrift1
gateway and TLS Thrift1 and Thrift2 ones, for the tests that use them; their jars come from
Maven Central once (cached, see ``_config`` for locations and environment variables). Servers outlive the caller
until ``down``.

Optional: a private MIT Kerberos KDC (``python -m sparkbarrier.devstack kdc up``,
``Kdc().up()``; see ``_kdc`` and docs/kerberos-devstack.md), and a 3-node Kafka cluster
whose brokers failover tests kill and restart (``python -m sparkbarrier.devstack
cluster up``; ``_kafka_cluster.KafkaCluster``, the tests' ``kafka_cluster`` fixture).

Also the rest of the test machinery: ``faults`` (what an armed fault point does; the
product keeps only the hook ``sparkbarrier._faults``) and ``jvm_kafka`` (the jars of
Spark's own Kafka source). All of it is the distribution ``sparkbarrier-devstack``
(``devstack/pyproject.toml``), which adds this subpackage to an installed sparkbarrier and
never ships in the product wheel; ``./dev`` installs both.
"""

from __future__ import annotations

from .._exceptions import DevstackError
from .._lazy import lazy_exports as _lazy_exports

# Re-exported lazily (as the product's ``__init__`` does its status readers): the
# submodules ``faults`` and ``jvm_kafka`` are imported where the servers' code is not
# wanted -- the product's fault hook imports ``faults`` inside a Spark worker, and an
# eager import of ``_stack`` here would pull in the HBase connector it probes the gateway
# with, and so close an import circle back to the hook.
_LAZY = {
    "ENV_CACHE": "_config",
    "ENV_HOME": "_config",
    "ENV_MAVEN_REPO": "_config",
    "ENV_MAVEN_SETTINGS": "_config",
    "Port": "_config",
    "KDC_ENV": "_kdc",
    "Kdc": "_kdc",
    "KdcManifest": "_kdc",
    "HBASE_ENV": "_stack",
    "HBASE_GATEWAYS_ENV": "_stack",
    "HBASE_THRIFT2_ENV": "_stack",
    "KAFKA_ENV": "_stack",
    "Devstack": "_stack",
    "Endpoints": "_stack",
    "ProcessStatus": "_stack",
    "StackStatus": "_stack",
}


__getattr__, __dir__ = _lazy_exports(__name__, globals(), {name: f".{module}" for name, module in _LAZY.items()})


__all__ = [
    "ENV_CACHE",
    "ENV_HOME",
    "ENV_MAVEN_REPO",
    "ENV_MAVEN_SETTINGS",
    "HBASE_ENV",
    "HBASE_GATEWAYS_ENV",
    "HBASE_THRIFT2_ENV",
    "KAFKA_ENV",
    "KDC_ENV",
    "Devstack",
    "DevstackError",
    "Endpoints",
    "Kdc",
    "KdcManifest",
    "Port",
    "ProcessStatus",
    "StackStatus",
]

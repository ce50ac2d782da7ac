"""Where the dev stack keeps things and which ports it asks for.

Two locations, configurable apart so throw-away stacks (tests) still share the
jars fetched once:

* ``home`` (``SPARKBARRIER_DEVSTACK_HOME``, default ``~/.cache/sparkbarrier/devstack``):
  one stack's run state: pid records, logs, server configs and data.
* ``cache`` (``SPARKBARRIER_DEVSTACK_CACHE``, default
  ``~/.cache/sparkbarrier/devstack/classpath`` whatever ``home`` is): the resolved
  Kafka/HBase classpaths. The jars themselves live in Maven's local repository
  (``~/.m2`` unless ``SPARKBARRIER_DEVSTACK_MAVEN_REPO`` names another).

Ports: every port has a default; a port given explicitly (argument or
``SPARKBARRIER_DEVSTACK_<NAME>_PORT``) must be free, a default that is taken is
silently replaced by a free one.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar, cast

from .._exceptions import DevstackError

__all__ = [
    "DEFAULT_ROOT",
    "ENV_CACHE",
    "ENV_HOME",
    "ENV_MAVEN_REPO",
    "ENV_MAVEN_SETTINGS",
    "Paths",
    "Port",
    "PortSpec",
    "port_requests",
]

ENV_HOME = "SPARKBARRIER_DEVSTACK_HOME"
ENV_CACHE = "SPARKBARRIER_DEVSTACK_CACHE"
ENV_MAVEN_REPO = "SPARKBARRIER_DEVSTACK_MAVEN_REPO"
ENV_MAVEN_SETTINGS = "SPARKBARRIER_DEVSTACK_MAVEN_SETTINGS"

DEFAULT_ROOT = Path("~/.cache/sparkbarrier/devstack")


class PortSpec:
    """What every devstack port enum shares: a key, a default, and how to request it
    explicitly (argument, else ``SPARKBARRIER_DEVSTACK_<KEY>_PORT``). A mixin, so other
    components (the HDFS) declare their ports in their own enum with the same rules."""

    key: str
    default: int

    def __init__(self, key: str, default: int) -> None:
        self.key = key
        self.default = default

    @property
    def env(self) -> str:
        """Environment variable that requests this port explicitly."""
        return f"SPARKBARRIER_DEVSTACK_{self.key.upper()}_PORT"

    @property
    def flag(self) -> str:
        """CLI flag that requests this port explicitly."""
        return "--" + self.key.replace("_", "-") + "-port"


P = TypeVar("P", bound=PortSpec)


class Port(PortSpec, enum.Enum):
    """Every port the stack listens on (all bound to 127.0.0.1), with its default."""

    KAFKA = ("kafka", 9092)
    KAFKA_CONTROLLER = ("kafka_controller", 9093)
    KAFKA_SASL_SSL = ("kafka_sasl_ssl", 9094)
    KAFKA_MTLS = ("kafka_mtls", 9096)
    KAFKA_WRONG_HOST = ("kafka_wrong_host", 9097)
    HBASE_THRIFT = ("hbase_thrift", 9090)
    HBASE_THRIFT2 = ("hbase_thrift2", 9095)
    HBASE_THRIFT_B = ("hbase_thrift_b", 9091)  # the second Thrift1 gateway
    HBASE_THRIFT_TLS = ("hbase_thrift_tls", 9443)  # a Thrift1 gateway serving Thrift over HTTPS
    HBASE_THRIFT2_TLS = ("hbase_thrift2_tls", 9444)  # a Thrift2 gateway serving Thrift over HTTPS
    HBASE_ZOOKEEPER = ("hbase_zookeeper", 2181)
    HBASE_MASTER = ("hbase_master", 16000)
    HBASE_REGIONSERVER = ("hbase_regionserver", 16020)
    KDC = ("kdc", 18088)  # optional: `python -m sparkbarrier.devstack kdc up` (TCP only)
    # optional: the 3-node KRaft cluster (`python -m sparkbarrier.devstack cluster up`)
    KAFKA_CLUSTER_1 = ("kafka_cluster_1", 19092)
    KAFKA_CLUSTER_2 = ("kafka_cluster_2", 19093)
    KAFKA_CLUSTER_3 = ("kafka_cluster_3", 19094)
    KAFKA_CLUSTER_CONTROLLER_1 = ("kafka_cluster_controller_1", 19192)
    KAFKA_CLUSTER_CONTROLLER_2 = ("kafka_cluster_controller_2", 19193)
    KAFKA_CLUSTER_CONTROLLER_3 = ("kafka_cluster_controller_3", 19194)


@dataclass(frozen=True)
class Paths:
    """Resolved directories of one stack; nothing is created until ``ensure``."""

    home: Path
    cache: Path
    maven_repo: Path | None = None
    maven_settings: Path | None = None

    @classmethod
    def resolve(
        cls,
        home: str | os.PathLike[str] | None = None,
        cache: str | os.PathLike[str] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> Paths:
        """Arguments win over environment variables, which win over the defaults."""
        env = os.environ if environ is None else environ
        root = DEFAULT_ROOT.expanduser()
        home_dir = _path(home) or _path(env.get(ENV_HOME)) or root
        cache_dir = _path(cache) or _path(env.get(ENV_CACHE)) or root / "classpath"
        return cls(
            home=home_dir.absolute(),
            cache=cache_dir.absolute(),
            maven_repo=_path(env.get(ENV_MAVEN_REPO)),
            maven_settings=_path(env.get(ENV_MAVEN_SETTINGS)),
        )

    @property
    def run(self) -> Path:
        """Pid records (``<process>.json``) and the lock file."""
        return self.home / "run"

    @property
    def logs(self) -> Path:
        return self.home / "logs"

    def data(self, component: str) -> Path:
        """Per-component configs and data; wiped whenever the component (re)starts."""
        return self.home / "data" / component

    def ensure(self) -> None:
        for directory in (self.run, self.logs, self.cache):
            directory.mkdir(parents=True, exist_ok=True)


def port_requests(
    explicit: Mapping[P, int | None] | None = None,
    environ: Mapping[str, str] | None = None,
    ports: Iterable[P] | None = None,
) -> dict[P, int | None]:
    """Port → explicitly requested number (argument, else env), or None for "default".

    ``ports``: the enum to read (default :class:`Port`, the stack's). Raises
    ``DevstackError`` for a value that is not a port number.
    """
    env = os.environ if environ is None else environ
    given = dict(explicit or {})
    result: dict[P, int | None] = {}
    members = ports if ports is not None else cast("Iterable[P]", Port)
    for port in members:
        value = given.get(port)
        if value is None and env.get(port.env):
            raw = env[port.env]
            if not raw.isdigit():
                raise DevstackError(
                    f"{port.env}={raw!r} is not a port number",
                    fix=f"set {port.env} to a number in 1..65535 or unset it",
                )
            value = int(raw)
        if value is not None and not 0 < value < 65536:
            raise DevstackError(
                f"port {value} for {port.key} is out of range",
                fix=f"pass {port.flag} a number in 1..65535",
            )
        result[port] = value
    return result


def _path(value: str | os.PathLike[str] | None) -> Path | None:
    if value is None or str(value) == "":
        return None
    return Path(value).expanduser()

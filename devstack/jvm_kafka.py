"""Spark's own Kafka source (``format("kafka")``) for a session's ``spark.jars``: tests, demo, benchmark.

The working set (spark-sql-kafka 4.2.0, token provider 4.0.0, kafka-clients 3.9.2,
commons-pool2 2.12.0) is taken from the local Maven repository the devstack uses
(``SPARKBARRIER_DEVSTACK_MAVEN_REPO`` or ``~/.m2/repository``) and fetched from Maven
Central into it when missing, so a fresh machine needs nothing installed by hand.
"""

from __future__ import annotations

import os
import urllib.request
from pathlib import Path

CENTRAL = "https://repo1.maven.org/maven2"
JARS = [
    ("org.apache.spark", "spark-sql-kafka-0-10_2.13", "4.2.0"),
    ("org.apache.spark", "spark-token-provider-kafka-0-10_2.13", "4.0.0"),
    ("org.apache.kafka", "kafka-clients", "3.9.2"),
    ("org.apache.commons", "commons-pool2", "2.12.0"),
]


def jvm_kafka_jars() -> str:
    """Comma-separated local paths for ``spark.jars`` (downloads what is missing)."""
    repo = Path(os.environ.get("SPARKBARRIER_DEVSTACK_MAVEN_REPO")
                or Path.home() / ".m2" / "repository")
    paths = []
    for group, artifact, version in JARS:
        rel = f"{group.replace('.', '/')}/{artifact}/{version}/{artifact}-{version}.jar"
        path = repo / rel
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".part")
            with urllib.request.urlopen(f"{CENTRAL}/{rel}", timeout=120) as resp:
                tmp.write_bytes(resp.read())
            tmp.replace(path)
        paths.append(str(path))
    return ",".join(paths)

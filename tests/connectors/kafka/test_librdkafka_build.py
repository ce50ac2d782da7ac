"""Which librdkafka the compiled reader builds and runs on (docs/librdkafka.md).

Chosen on purpose: the one the pinned confluent-kafka wheel bundles, so the native and
confluent paths share one librdkafka per process and SCRAM works against Kafka 4
(librdkafka before 2.6.1 computes a proof those brokers reject).
"""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import version
from pathlib import Path

import confluent_kafka

ROOT = Path(__file__).resolve().parents[3]


def test_the_native_module_runs_on_confluent_kafkas_librdkafka_2_6_1_or_newer() -> None:
    from sparkbarrier.connectors.kafka.reader._native_reader import available, librdkafka_version

    assert available() is None
    from sparkbarrier.connectors.kafka.reader import _rdkafka_arrow

    assert _rdkafka_arrow.librdkafka_version_int >= 0x020601FF
    assert _rdkafka_arrow.min_librdkafka_version_int == 0x020601FF
    assert (librdkafka_version(), _rdkafka_arrow.librdkafka_version_int) == \
        confluent_kafka.libversion()


def test_one_librdkafka_is_loaded_in_the_process() -> None:
    from sparkbarrier.connectors.kafka.reader._native_reader import available

    assert available() is None
    maps = Path("/proc/self/maps").read_text().splitlines()
    loaded = {line.split()[-1] for line in maps if "librdkafka" in line}
    assert len(loaded) == 1, loaded
    assert "confluent_kafka.libs" in next(iter(loaded))


def test_confluent_kafka_is_pinned_alike_for_the_build_and_the_runtime() -> None:
    """setup.py links the wheel the build environment got; it must be the one users run."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    pins = [r for r in project["build-system"]["requires"] + project["project"]["dependencies"]
            if re.match(r"confluent-kafka\b", r)]
    assert len(pins) == 2 and pins[0] == pins[1] and "==" in pins[0], pins
    assert pins[0].split("==")[1] == version("confluent-kafka")

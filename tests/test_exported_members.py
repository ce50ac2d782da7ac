"""Every package's public surface, pinned (after httpx's ``tests/test_exported_members.py``).

For each package: ``__all__`` is exactly the intended list, every name in it exists, and
no public-looking name (no leading underscore) is reachable outside it -- so an internal
such as an option spec list or a wire-format version cannot become public by accident.
Internals stay importable from their private module (``..._offsets.SourceOffset``).
"""

from __future__ import annotations

import importlib
import types

import pytest

INTENDED: dict[str, list[str]] = {
    "sparkbarrier": [
        "CheckpointLogStatus", "ConfigError", "CorruptStateError", "DataLossError",
        "FencedError", "FileSystemError", "FlushError", "GroupStatus", "KerberosError", "PartitionStatus", "ProtocolError",
        "SinkError", "SinkStatus", "SourceError", "SparkBarrierError", "StateCompatibilityError",
        "__version__", "checkpoint_log_status", "checkpointed_sink", "commit_kafka_offsets",
        "group_status", "hbase_batch_writer", "register",
        "sink_status", "starting_offsets_from_sink",
    ],
    "sparkbarrier.barrier": [
        "AbortReason", "BarrierHandler", "CancelCheckpointMarker", "CheckpointBarrier",
        "CheckpointBarrierAligner", "CheckpointBarrierTracker", "CheckpointListener",
        "CheckpointTarget", "CheckpointedFunction", "CheckpointedSink",
        "CompletedCheckpoint", "DeliveryGuarantee", "Downstream", "EndOfPartition", "InitializationContext",
        "InputProcessor", "MARKER_COLUMNS", "MAX_CHECKPOINTS_TO_TRACK", "Marker", "MarkerKind",
        "SinkContext", "TwoPhaseCommitSink", "has_marker_columns", "marker_batch",
        "split_markers", "with_marker_columns",
    ],
    "sparkbarrier.state": ["CheckpointLock", "PendingCheckpoint", "PendingCheckpoints"],
    "sparkbarrier.connectors": ["starting_offsets_from_sink"],
    "sparkbarrier.connectors.kafka": [
        "BarrierKafkaDataSource", "CheckpointLogStatus", "CommittedOffset", "GroupStatus",
        "KafkaOffsetCommits", "KafkaSourceOptions", "PartitionStatus", "SparkBatch",
        "TopicPartition", "checkpoint_log_status", "client_settings", "commit_kafka_offsets",
        "committed_offsets", "group_status", "kafka_options_table",
        "parse_source_options", "register", "source_schema",
    ],
    "sparkbarrier.connectors.hbase": [
        "BarrierHBaseDataSource", "CellLineage", "DEFAULT_COMMIT_TABLE", "DeliveryGuarantee",
        "HBaseConnectionOptions", "HBaseSinkOptions", "KerberosError", "KerberosSettings", "Qop", "SinkStatus",
        "hbase_batch_writer", "hbase_options_table", "hbase_read_options_table", "hbase_kerberos_options_table",
        "keep_markers", "lineage", "parse_connection_options", "parse_sink_options", "read_committed", "register",
        "sink_status",
    ],
    "sparkbarrier.connectors.checkpointed": [
        "CheckpointedSink", "CompletedCheckpoint", "SinkContext", "TwoPhaseCommitSink",
        "keep_markers", "sink_data_source",
    ],
    "sparkbarrier.devstack": [
        "Devstack", "DevstackError", "ENV_CACHE", "ENV_HOME", "ENV_MAVEN_REPO",
        "ENV_MAVEN_SETTINGS", "Endpoints", "HBASE_ENV", "HBASE_GATEWAYS_ENV", "HBASE_THRIFT2_ENV", "KAFKA_ENV", "Port",
        "ProcessStatus", "StackStatus", "Kdc", "KdcManifest", "KDC_ENV",
    ],
}


def _public_looking(module: types.ModuleType) -> set[str]:
    """Names a user would take for public: no underscore, not a submodule, not typing glue."""
    return {
        name for name, value in vars(module).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and name != "annotations"  # from __future__ import annotations
        and getattr(value, "__module__", None) != "typing"
    }


@pytest.mark.parametrize("package", sorted(INTENDED))
def test_all_is_the_intended_surface(package: str) -> None:
    module = importlib.import_module(package)
    assert sorted(module.__all__) == sorted(INTENDED[package])
    assert len(set(module.__all__)) == len(module.__all__), "duplicate names in __all__"


@pytest.mark.parametrize("package", sorted(INTENDED))
def test_every_exported_name_exists(package: str) -> None:
    module = importlib.import_module(package)
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert not missing


@pytest.mark.parametrize("package", sorted(INTENDED))
def test_no_public_name_outside_all(package: str) -> None:
    module = importlib.import_module(package)
    for name in module.__all__:
        getattr(module, name)  # resolve lazy re-exports first
    assert _public_looking(module) - set(module.__all__) == set()


def test_root_reexports_are_the_owning_packages_objects() -> None:
    import sparkbarrier
    from sparkbarrier.connectors import hbase, kafka

    assert sparkbarrier.group_status is kafka.group_status
    assert sparkbarrier.checkpoint_log_status is kafka.checkpoint_log_status
    assert sparkbarrier.sink_status is hbase.sink_status


def test_importing_the_root_does_not_import_pyspark() -> None:
    import subprocess
    import sys

    code = "import sys, sparkbarrier, sparkbarrier.barrier, sparkbarrier.state; print('pyspark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"

"""The checkpointed-sink adapter without Spark: task runner and the applied-checkpoint ledger."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from sparkbarrier._exceptions import ConfigError, StateCompatibilityError
from sparkbarrier.barrier import (
    CheckpointBarrier,
    DeliveryGuarantee,
    CompletedCheckpoint,
    SinkContext,
    TwoPhaseCommitSink,
    marker_batch,
    with_marker_columns,
)
from sparkbarrier.connectors.checkpointed._driver_commit import Completion, check_state_directory, state_directory
from sparkbarrier.connectors.checkpointed._task import run_task

KAFKA = pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("v", pa.int64())])


class Recorder(TwoPhaseCommitSink[list]):
    """Keeps every call; a transaction is the list of values written into it."""

    def __init__(self) -> None:
        self.calls: list[Any] = []

    def begin_transaction(self) -> list:
        return []

    def write(self, txn: list, batch: pa.RecordBatch) -> None:
        txn.extend(batch.column("v").to_pylist())

    def pre_commit(self, txn: list) -> tuple:
        self.calls.append(("pre_commit", tuple(txn)))
        return tuple(txn)

    def commit(self, handles: Any, completed: CompletedCheckpoint) -> None:
        self.calls.append(("commit", completed.batch_id, tuple(handles), dict(completed.source_offsets)))

    def abort(self, handles: Any, batch_id: int) -> None:
        self.calls.append(("abort", batch_id, tuple(handles)))


def _stream(rows: list[tuple[str, int, int]], barriers: list[tuple[str, int, int]]) -> pa.RecordBatch:
    schema = with_marker_columns(KAFKA)
    data = pa.RecordBatch.from_pylist([{"topic": t, "partition": p, "v": v} for t, p, v in rows], schema=schema)
    marks = marker_batch([CheckpointBarrier(cid, 0, ch, nxt) for ch, cid, nxt in barriers], schema)
    return pa.concat_batches([data, marks]) if hasattr(pa, "concat_batches") else pa.Table.from_batches(
        [data, marks]).combine_chunks().to_batches()[0]


def _ctx(batch: int = 5) -> SinkContext:
    return SinkContext("rec", "q", batch, 0, 0, {})


@pytest.mark.parametrize("mode", list(DeliveryGuarantee))
def test_coalesced_partitions_snapshot_once_aligned_with_every_row(mode: DeliveryGuarantee) -> None:
    fn = Recorder()
    batches = [_stream([("t", 0, 1), ("t", 0, 2)], [("t:0", 9, 2)]), _stream([("t", 1, 3)], [("t:1", 9, 1)])]
    msg = run_task(fn, _ctx(), iter(batches), guarantee=mode)
    assert [v for h in msg.handles for v in h] == [1, 2, 3]
    assert msg.source_offsets == {"t:0": 2, "t:1": 1} and msg.source_checkpoints[0] == 9 and msg.rows == 3


def test_the_sink_snapshots_its_batch_id_at_each_source_checkpoint() -> None:
    """The bridge between the two ids (docs/ids.md): the InputProcessor snapshots at source
    checkpoints 9 and 10; the sink is asked for Spark batch 5 both times, and the source
    checkpoint ids reach the driver only as ``source_checkpoints``."""

    class Ids(Recorder):
        def snapshot_state(self, batch_id: int) -> Any:
            self.calls.append(("snapshot_state", batch_id))
            return super().snapshot_state(batch_id)

    fn = Ids()
    batches = [_stream([("t", 0, 1)], [("t:0", 9, 1)]), _stream([("t", 0, 2)], [("t:0", 10, 2)])]
    msg = run_task(fn, _ctx(batch=5), iter(batches), guarantee=DeliveryGuarantee.EXACTLY_ONCE)
    assert [c for c in fn.calls if c[0] == "snapshot_state"] == [("snapshot_state", 5), ("snapshot_state", 5)]
    assert msg.batch_id == 5 and msg.source_checkpoints == [9, 10] and msg.handles == [(1,), (2,)]


def test_input_without_channel_columns_is_one_channel() -> None:
    fn = Recorder()
    schema = with_marker_columns(pa.schema([("v", pa.int64())]))
    data = pa.RecordBatch.from_pylist([{"v": 7}], schema=schema)
    marks = marker_batch([CheckpointBarrier(3, 0, "t:0", 1), CheckpointBarrier(3, 0, "t:1", 4)], schema)
    msg = run_task(fn, _ctx(), iter([data, marks]), guarantee=DeliveryGuarantee.EXACTLY_ONCE)
    assert msg.handles == [(7,)] and msg.source_offsets == {"t:0": 1, "t:1": 4}


def test_ledger_applies_each_batch_once_and_discards_replays(tmp_path: Path) -> None:
    fn = Recorder()
    msg = run_task(Recorder(), _ctx(), iter([_stream([("t", 0, 1)], [("t:0", 1, 1)])]),
                   guarantee=DeliveryGuarantee.EXACTLY_ONCE)
    done = Completion(fn, {"sink": "rec"}, tmp_path, allow_mismatch=False)
    assert done.commit([msg], 5) is True
    again = Completion(fn, {"sink": "rec"}, tmp_path, allow_mismatch=False)  # a replay after a crash
    assert again.commit([msg], 5) is False
    assert fn.calls == [("commit", 5, ((1,),), {"t:0": 1}), ("abort", 5, ((1,),))]
    with pytest.raises(StateCompatibilityError):
        Completion(fn, {"sink": "other"}, tmp_path, allow_mismatch=False).commit([msg], 6)


def test_state_directory_follows_the_checkpoint_location(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SPARKBARRIER_WEBHDFS", "http://127.0.0.1:1")  # no NameNode there
    monkeypatch.setenv("SPARKBARRIER_WEBHDFS_RETRY_SECONDS", "0")  # and none is coming: one try
    assert state_directory({"checkpointLocation": f"file://{tmp_path}"}, "s") == tmp_path / "sparkbarrier" / "s"
    assert state_directory({"checkpoint.state.location": "/x"}, "s") == Path("/x")
    # On HDFS (or an object store) the ledger stays beside the checkpoint, on its file system.
    remote = state_directory({"checkpointLocation": "hdfs://127.0.0.1:1/ckpt"}, "s")
    assert remote.location == "hdfs://127.0.0.1:1/ckpt/sparkbarrier/s"
    # One the driver cannot reach fails the query start, naming the option.
    with pytest.raises(ConfigError, match="HADOOP_CONF_DIR") as err:
        check_state_directory({"checkpointLocation": "hdfs://127.0.0.1:1/ckpt"}, "s", remote)
    assert "http://127.0.0.1:1 (from SPARKBARRIER_WEBHDFS): connection refused" in str(err.value)
    assert err.value.option == "checkpointLocation"


def test_query_start_says_when_kafka_offsets_cannot_be_learned(caplog: pytest.LogCaptureFixture,
                                                                monkeypatch) -> None:
    monkeypatch.setenv("SPARKBARRIER_WEBHDFS", "http://127.0.0.1:1")  # no NameNode there
    monkeypatch.setenv("SPARKBARRIER_WEBHDFS_RETRY_SECONDS", "0")  # and none is coming: one try
    from pyspark.sql.types import LongType, StructField, StructType

    from sparkbarrier.connectors.checkpointed._source import _warn_if_offsets_unrecordable

    schema = StructType([StructField("v", LongType())])
    with caplog.at_level("WARNING"):
        _warn_if_offsets_unrecordable("s", schema, "/local/ckpt")      # offset log readable
        _warn_if_offsets_unrecordable("s", schema, "hdfs://127.0.0.1:1/ckpt")  # no markers, log unreachable
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1 and "barrierMarkers" in warned[0] and "hdfs://127.0.0.1:1/ckpt" in warned[0]


class _HoldsBack(Recorder):
    """Asks for a last snapshot at the end of the input even without new data."""

    def end_of_input(self) -> bool:
        self.calls.append(("end_of_input",))
        return True

    def snapshot_state(self, batch_id: int) -> Any:
        self.calls.append(("snapshot", batch_id))
        return super().snapshot_state(batch_id)


def test_end_of_input_asking_for_it_gets_a_last_snapshot_without_new_data() -> None:
    schema = with_marker_columns(KAFKA)
    data = pa.RecordBatch.from_pylist([{"topic": "t", "partition": 0, "v": 1}], schema=schema)
    marks = marker_batch([CheckpointBarrier(9, 0, "t:0", 1)], schema)
    plain, holds = Recorder(), _HoldsBack()
    for fn in (plain, holds):
        run_task(fn, _ctx(), iter([data, marks]), guarantee=DeliveryGuarantee.EXACTLY_ONCE)
    assert plain.calls == [("pre_commit", (1,))]  # the default hooks: no extra snapshot
    assert holds.calls == [("snapshot", 5), ("pre_commit", (1,)), ("end_of_input",), ("snapshot", 5)]


def test_a_sink_that_does_not_subclass_checkpointed_sink_is_a_config_error() -> None:
    from pyspark.sql.types import StructType

    from sparkbarrier._exceptions import ConfigError
    from sparkbarrier.connectors.checkpointed._source import CheckpointedStreamWriter

    class Duck:
        def invoke(self, batch: Any) -> None:
            pass

    with pytest.raises(ConfigError, match="not a subclass of sparkbarrier.barrier.CheckpointedSink"):
        CheckpointedStreamWriter("duck", Duck, {}, StructType([]))


def test_delivery_guarantee_is_the_adapter_option_and_checkpoint_mode_names_it() -> None:
    from sparkbarrier._exceptions import ConfigError
    from sparkbarrier.connectors.checkpointed._source import _adapter_options

    assert _adapter_options({"delivery.guarantee": "at-least-once", "x": "1"}, "rec")[
        "delivery.guarantee"] is DeliveryGuarantee.AT_LEAST_ONCE
    with pytest.raises(ConfigError, match="'checkpoint.mode' .* is now 'delivery.guarantee'"):
        _adapter_options({"checkpoint.mode": "exactly-once"}, "rec")

"""InputProcessor: buffering, ordered replay, snapshots at the right cut, byte limit."""

from __future__ import annotations

import pyarrow as pa
import pytest
from barrier_script import RecordingFunction

from sparkbarrier import ProtocolError
from sparkbarrier.barrier import (
    AbortReason,
    CancelCheckpointMarker,
    CheckpointBarrier,
    DeliveryGuarantee,
    EndOfPartition,
    InitializationContext,
    InputProcessor,
    marker_batch,
    with_marker_columns,
)


def rows(*values: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"v": pa.array(values, pa.int64())})


def B(cid: int) -> CheckpointBarrier:
    return CheckpointBarrier(cid, 1000 + cid)


def make(channels=("a", "b"), **kw):
    fn = RecordingFunction()

    def downstream(channel, batch):
        fn.events.append(("data", channel, batch.column("v").to_pylist()))

    return InputProcessor(list(channels), fn, downstream, **kw), fn


def test_initialize_state_receives_context_before_any_data():
    ctx = InitializationContext(restored_checkpoint_id=4)
    _, fn = make(context=ctx)
    assert fn.context is ctx and fn.context.is_restored and fn.events == []


def test_blocked_channel_records_are_buffered_not_processed():
    proc, fn = make()
    proc.process_all([("a", rows(1)), ("a", B(1)), ("a", rows(2)), ("b", rows(10))])
    assert fn.events == [("data", "a", [1]), ("data", "b", [10])]
    assert proc.buffered_bytes == rows(2).nbytes


def test_snapshot_precedes_replay_of_buffered_records_in_arrival_order_per_channel():
    proc, fn = make(("a", "b", "c"))
    proc.process_all([
        ("a", B(1)), ("a", rows(1)), ("c", B(1)), ("c", rows(30)), ("a", rows(2)), ("b", rows(20)),
        ("b", B(1)), ("b", rows(21)),
    ])
    assert fn.events[:2] == [("data", "b", [20]), ("snapshot", 1)]
    replayed = fn.events[2:]
    assert sorted(replayed) == sorted([("data", "a", [1]), ("data", "a", [2]), ("data", "c", [30]),
                                       ("data", "b", [21])])
    for channel in "abc":
        per_channel = [e for e in fn.events if e[0] == "data" and e[1] == channel]
        assert per_channel == sorted(per_channel, key=lambda e: e[2])
    assert proc.buffered_bytes == 0 and proc.last_triggered == 1


def test_input_for_channel_with_backlog_queues_behind_it():
    proc, fn = make()
    proc.process_all([("a", B(1)), ("a", rows(1)), ("a", B(2)), ("a", rows(2)), ("b", B(1))])
    proc.process("a", rows(3))  # a is blocked again on barrier 2 with rows(2) waiting
    assert fn.events == [("snapshot", 1), ("data", "a", [1])]
    proc.process("b", B(2))
    assert fn.events[2:] == [("snapshot", 2), ("data", "a", [2]), ("data", "a", [3])]


def test_new_alignment_with_backlog_over_limit_is_declined_at_once():
    limit = rows(1, 2, 3).nbytes
    proc, fn = make(max_buffered_bytes=limit)
    proc.process_all([("a", B(1)), ("a", B(2)), ("a", rows(1, 2, 3)), ("a", rows(4))])
    # the rows wait behind barrier 2 while 1 aligns: over the limit -> 1 declined, released,
    # barrier 2 blocks a again with the same backlog -> 2 declined too; nothing lost.
    assert fn.events == [("aborted", 1), ("aborted", 2), ("data", "a", [1, 2, 3]), ("data", "a", [4])]
    assert proc.buffered_bytes == 0


def test_replayed_barrier_starts_next_alignment_and_rebuffers():
    proc, fn = make()
    proc.process_all([
        ("a", B(1)), ("a", rows(1)), ("a", B(2)), ("a", rows(2)), ("b", B(1)), ("b", rows(10)),
    ])
    # a's replay hits barrier 2 and blocks a again: rows(2) stays buffered.
    assert fn.events == [("snapshot", 1), ("data", "a", [1]), ("data", "b", [10])]
    proc.process("b", B(2))
    assert fn.events[3:] == [("snapshot", 2), ("data", "a", [2])]


def test_subsumed_alignment_notifies_abort_and_releases_in_order():
    proc, fn = make(("a", "b", "c"))
    proc.process_all([("a", B(1)), ("a", rows(1)), ("b", B(2)), ("b", rows(2))])
    assert fn.events == [("aborted", 1), ("data", "a", [1])]
    assert proc.recent_aborts == ((1, AbortReason.SUBSUMED),)


def test_byte_limit_aborts_alignment_and_loses_nothing():
    limit = rows(1, 2).nbytes
    proc, fn = make(max_buffered_bytes=limit)
    proc.process_all([("a", B(1)), ("a", rows(1)), ("a", rows(2)), ("a", rows(3))])
    assert fn.events == [("aborted", 1), ("data", "a", [1]), ("data", "a", [2]), ("data", "a", [3])]
    proc.process_all([("b", B(1)), ("b", rows(4))])  # trailing barrier of the declined checkpoint
    assert fn.events[-1] == ("data", "b", [4]) and ("snapshot", 1) not in fn.events


def test_cancel_releases_buffered_records():
    proc, fn = make()
    proc.process_all([("a", B(1)), ("a", rows(1)), ("b", CancelCheckpointMarker(1)), ("b", B(1))])
    assert fn.events == [("aborted", 1), ("data", "a", [1])]


def test_end_of_partition_aborts_alignment_then_later_checkpoints_skip_closed_channel():
    proc, fn = make()
    proc.process_all([("a", B(1)), ("a", rows(1)), ("b", rows(9)), ("b", EndOfPartition("b")), ("a", B(2))])
    assert fn.events == [("data", "b", [9]), ("aborted", 1), ("data", "a", [1]), ("snapshot", 2)]


def test_whole_arrow_batches_with_marker_rows_are_split_and_aligned():
    stream = with_marker_columns(pa.schema([pa.field("v", pa.int64())]))

    def data(*vals):
        return pa.RecordBatch.from_arrays(
            [pa.array(vals, pa.int64())] + [pa.nulls(len(vals), f.type) for f in list(stream)[1:]],
            schema=stream,
        )

    def batch(*parts):
        return pa.Table.from_batches(parts).combine_chunks().to_batches()[0]

    proc, fn = make()
    proc.process_batch("a", batch(data(1, 2), marker_batch([B(1)], stream), data(3)))
    proc.process_batch("b", batch(data(10), marker_batch([B(1)], stream), data(11, 12)))
    assert fn.events == [
        ("data", "a", [1, 2]), ("data", "b", [10]), ("snapshot", 1), ("data", "a", [3]), ("data", "b", [11, 12])
    ]


def test_at_least_once_never_buffers():
    proc, fn = make(guarantee=DeliveryGuarantee.AT_LEAST_ONCE)
    proc.process_all([("a", B(1)), ("a", rows(1)), ("b", rows(2)), ("b", B(1)), ("b", rows(3))])
    assert fn.events == [("data", "a", [1]), ("data", "b", [2]), ("snapshot", 1), ("data", "b", [3])]
    assert proc.buffered_bytes == 0


def test_notify_checkpoint_complete_is_forwarded():
    proc, fn = make()
    proc.notify_checkpoint_complete(7)
    assert fn.events == [("complete", 7)]


def test_unsupported_element_is_protocol_error():
    proc, _ = make()
    with pytest.raises(ProtocolError, match="cannot process"):
        proc.process("a", object())  # type: ignore[arg-type]


def test_negative_limit_is_rejected():
    with pytest.raises(ProtocolError):
        make(max_buffered_bytes=-1)


@pytest.mark.parametrize("mode", list(DeliveryGuarantee))
def test_data_after_end_of_partition_is_protocol_error_naming_the_channel(mode):
    proc, fn = make(guarantee=mode)
    proc.process_all([("b", rows(1)), ("b", EndOfPartition("b"))])
    with pytest.raises(ProtocolError, match="after its EndOfPartition") as info:
        proc.process("b", rows(2))
    assert info.value.channel == "b" and "'b'" in str(info.value)
    assert ("data", "b", [2]) not in fn.events


@pytest.mark.parametrize("mode", list(DeliveryGuarantee))
def test_data_from_unknown_channel_is_protocol_error_naming_the_channel(mode):
    proc, fn = make(guarantee=mode)
    with pytest.raises(ProtocolError, match="unknown channel 'zz'") as info:
        proc.process("zz", rows(1))
    assert info.value.channel == "zz" and fn.events == []


def test_data_after_a_buffered_end_of_partition_is_refused_on_arrival():
    # a is blocked, so its EndOfPartition waits in the backlog; data behind it is
    # still a corrupt stream and must be refused now, not replayed downstream later.
    proc, fn = make()
    proc.process_all([("a", B(1)), ("a", rows(1)), ("a", EndOfPartition("a"))])
    with pytest.raises(ProtocolError, match="after its EndOfPartition") as info:
        proc.process("a", rows(2))
    assert info.value.channel == "a"
    proc.process("b", B(1))  # the buffered part is intact and replays as before
    assert ("data", "a", [2]) not in fn.events and ("data", "a", [1]) in fn.events


def test_marker_after_a_buffered_end_of_partition_is_refused_on_arrival():
    proc, _ = make()
    proc.process_all([("a", B(1)), ("a", EndOfPartition("a"))])
    with pytest.raises(ProtocolError, match="after its EndOfPartition") as info:
        proc.process("a", B(2))
    assert info.value.channel == "a" and info.value.checkpoint_id == 2


def test_data_after_end_of_partition_inside_one_arrow_batch_is_protocol_error():
    stream = with_marker_columns(pa.schema([pa.field("v", pa.int64())]))
    data = pa.RecordBatch.from_arrays(
        [pa.array([7], pa.int64())] + [pa.nulls(1, f.type) for f in list(stream)[1:]], schema=stream
    )
    batch = pa.Table.from_batches([marker_batch([EndOfPartition("b")], stream), data]).combine_chunks()
    proc, fn = make()
    with pytest.raises(ProtocolError, match="after its EndOfPartition"):
        proc.process_batch("b", batch.to_batches()[0])
    assert ("data", "b", [7]) not in fn.events


def test_end_of_input_declines_alignment_and_releases_buffered_data_in_order():
    proc, fn = make()
    proc.process_all([("a", rows(1)), ("a", B(1)), ("a", rows(2)), ("a", rows(3)), ("b", rows(10))])
    assert proc.buffered_bytes > 0
    proc.end_of_input()
    assert fn.events == [
        ("data", "a", [1]), ("data", "b", [10]), ("aborted", 1), ("data", "a", [2]), ("data", "a", [3])
    ]
    assert proc.recent_aborts == ((1, AbortReason.INPUT_END_OF_STREAM),)
    assert proc.buffered_bytes == 0 and not proc.handler.aligning and proc.input_ended


def test_end_of_input_declines_alignments_started_by_replayed_barriers_too():
    proc, fn = make(("a", "b", "c"))
    proc.process_all([
        ("a", B(1)), ("a", rows(1)), ("a", B(2)), ("a", rows(2)), ("b", B(1)), ("b", rows(20)),
    ])
    assert fn.events == []
    proc.end_of_input()
    # 1 declined, a replays up to barrier 2 (which blocks a again), b replays; then 2 is
    # declined as well and the rest of a follows. Each checkpoint is notified once.
    assert fn.events == [
        ("aborted", 1), ("data", "a", [1]), ("data", "b", [20]), ("aborted", 2), ("data", "a", [2])
    ]
    assert proc.recent_aborts == ((1, AbortReason.INPUT_END_OF_STREAM), (2, AbortReason.INPUT_END_OF_STREAM))
    assert proc.buffered_bytes == 0


def test_end_of_input_without_pending_alignment_notifies_nothing():
    proc, fn = make()
    proc.process_all([("a", B(1)), ("b", B(1)), ("a", rows(1)), ("b", EndOfPartition("b"))])
    before = list(fn.events)
    proc.end_of_input()
    assert fn.events == before


def test_end_of_input_is_idempotent_and_later_input_is_protocol_error():
    proc, fn = make()
    proc.process_all([("a", B(1)), ("a", rows(1))])
    proc.end_of_input()
    events = list(fn.events)
    proc.end_of_input()
    assert fn.events == events
    with pytest.raises(ProtocolError, match="after end_of_input") as info:
        proc.process("b", rows(5))
    assert info.value.channel == "b"
    with pytest.raises(ProtocolError, match="after end_of_input") as info:
        proc.process("b", B(1))
    assert info.value.channel == "b" and info.value.checkpoint_id == 1
    assert fn.events == events
    proc.notify_checkpoint_complete(0)  # completions of earlier snapshots still arrive
    assert fn.events[-1] == ("complete", 0)


def test_end_of_input_in_at_least_once_mode_aborts_tracked_checkpoints():
    proc, fn = make(guarantee=DeliveryGuarantee.AT_LEAST_ONCE)
    proc.process_all([("a", B(1)), ("a", rows(1)), ("a", B(2))])
    proc.end_of_input()
    assert fn.events == [("data", "a", [1]), ("aborted", 1), ("aborted", 2)]
    assert proc.recent_aborts == ((1, AbortReason.INPUT_END_OF_STREAM), (2, AbortReason.INPUT_END_OF_STREAM))


def test_a_channel_added_during_an_alignment_is_waited_for() -> None:
    """Spark tasks discover channels as they arrive: checkpoint 1 must also cover channel b."""
    import pyarrow as pa

    from sparkbarrier.barrier import CheckpointBarrier, InputProcessor
    from sparkbarrier.barrier._functions import InitializationContext

    events: list[str] = []

    class Fn:
        def initialize_state(self, context: InitializationContext) -> None:
            pass

        def snapshot_state(self, checkpoint_id: int) -> None:
            events.append(f"snapshot {checkpoint_id}")

        def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
            pass

        def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
            events.append(f"aborted {checkpoint_id}")

    def data(n: int) -> pa.RecordBatch:
        return pa.RecordBatch.from_pydict({"v": list(range(n))})

    proc = InputProcessor(["a", "c"], Fn(), lambda ch, b: events.append(f"{ch}:{b.num_rows}"))
    proc.process("a", CheckpointBarrier(1, 0, "a"))          # a blocks; c still owes barrier 1
    proc.add_channel("b")
    proc.add_channel("a")                                    # known: no-op
    proc.process("b", data(2))                               # b's data before its barrier 1
    proc.process("c", CheckpointBarrier(1, 0, "c"))
    assert events == ["b:2"]                                 # still waiting for b
    proc.process("b", CheckpointBarrier(1, 0, "b"))
    assert events == ["b:2", "snapshot 1"]

"""Rule-by-rule tests of the exactly-once aligner (numbering follows _aligner.py)."""

from __future__ import annotations

import pytest
from barrier_script import aligner, feed

from sparkbarrier import ProtocolError
from sparkbarrier.barrier import AbortReason

SUB, CAN, EOS, LIM = (
    AbortReason.SUBSUMED,
    AbortReason.CANCELLED,
    AbortReason.INPUT_END_OF_STREAM,
    AbortReason.ALIGNMENT_LIMIT_EXCEEDED,
)

# (name, channels, events, expected notifications, channels blocked at the end)
CASES = [
    ("single_channel_triggers_newer_barrier_at_once", ["a"],
     [("b", "a", 1), ("b", "a", 2)], [("trigger", 1), ("trigger", 2)], set()),
    ("single_channel_never_blocks", ["a"], [("b", "a", 1)], [("trigger", 1)], set()),
    ("first_barrier_blocks_its_channel", ["a", "b", "c"],
     [("b", "a", 1)], [], {"a"}),
    ("second_barrier_blocks_second_channel", ["a", "b", "c"],
     [("b", "a", 1), ("b", "c", 1)], [], {"a", "c"}),
    ("newer_barrier_during_alignment_subsumes_current", ["a", "b", "c"],
     [("b", "a", 1), ("b", "b", 2)], [("abort", 1, SUB)], {"b"}),
    ("newer_barrier_then_completes_new_checkpoint", ["a", "b"],
     [("b", "a", 1), ("b", "b", 2), ("b", "a", 2)], [("abort", 1, SUB), ("trigger", 2)], set()),
    ("older_barrier_during_alignment_is_ignored", ["a", "b", "c"],
     [("b", "a", 2), ("b", "b", 1)], [], {"a"}),
    ("barrier_of_completed_checkpoint_is_ignored", ["a", "b"],
     [("b", "a", 1), ("b", "b", 1), ("c", "a", 1)], [("trigger", 1)], set()),
    ("trailing_barrier_of_subsumed_checkpoint_is_ignored", ["a", "b", "c"],
     [("b", "a", 1), ("b", "b", 2), ("b", "a", 2), ("b", "c", 1), ("b", "c", 2)],
     [("abort", 1, SUB), ("trigger", 2)], set()),
    ("barrier_of_cancelled_checkpoint_is_ignored", ["a", "b"],
     [("c", "a", 1), ("b", "b", 1)], [("abort", 1, CAN)], set()),
    ("triggers_when_all_channels_delivered", ["a", "b", "c"],
     [("b", "a", 1), ("b", "b", 1), ("b", "c", 1)], [("trigger", 1)], set()),
    ("closed_channel_counts_as_aligned", ["a", "b", "c"],
     [("e", "c"), ("b", "a", 1), ("b", "b", 1)], [("trigger", 1)], set()),
    ("all_other_channels_closed_triggers_at_once", ["a", "b"],
     [("e", "b"), ("b", "a", 1)], [("trigger", 1)], set()),
    ("cancel_of_current_id_aborts_alignment", ["a", "b"],
     [("b", "a", 1), ("c", "b", 1)], [("abort", 1, CAN)], set()),
    ("cancel_of_newer_id_aborts_current_and_new", ["a", "b"],
     [("b", "a", 1), ("c", "b", 2)], [("abort", 1, SUB), ("abort", 2, CAN)], set()),
    ("cancel_of_newer_id_without_alignment_aborts_it", ["a", "b"],
     [("c", "a", 3)], [("abort", 3, CAN)], set()),
    ("barriers_after_cancel_of_same_id_are_ignored", ["a", "b", "c"],
     [("b", "a", 1), ("c", "b", 1), ("b", "c", 1), ("b", "b", 1)], [("abort", 1, CAN)], set()),
    ("repeated_cancel_notifies_once", ["a", "b"],
     [("c", "a", 1), ("c", "b", 1)], [("abort", 1, CAN)], set()),
    ("older_cancel_is_ignored", ["a", "b"],
     [("b", "a", 2), ("c", "b", 1)], [], {"a"}),
    ("single_channel_cancel_aborts_newer_id", ["a"],
     [("c", "a", 1), ("b", "a", 1), ("b", "a", 2)], [("abort", 1, CAN), ("trigger", 2)], set()),
    ("end_of_partition_aborts_pending_alignment", ["a", "b", "c"],
     [("b", "a", 1), ("e", "b")], [("abort", 1, EOS)], set()),
    ("end_of_partition_without_alignment_notifies_nothing", ["a", "b"],
     [("e", "a")], [], set()),
    ("barriers_after_end_of_stream_abort_are_ignored", ["a", "b", "c"],
     [("b", "a", 1), ("e", "b"), ("b", "c", 1)], [("abort", 1, EOS)], set()),
]


@pytest.mark.parametrize(
    ("channels", "events", "expected", "blocked"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_aligner_rule(channels, events, expected, blocked):
    handler, rec = aligner(channels)
    feed(handler, events)
    assert rec.log == expected
    assert {ch for ch in channels if handler.is_blocked(ch)} == blocked


def test_release_is_reported_on_trigger_and_abort():
    handler, _ = aligner(["a", "b"])
    assert feed(handler, [("b", "a", 1), ("b", "b", 1)]) == [False, True]
    assert feed(handler, [("b", "a", 2), ("b", "b", 3)]) == [False, True]
    assert feed(handler, [("e", "a")]) == [True]


def test_same_barrier_twice_on_one_channel_is_protocol_error():
    handler, _ = aligner(["a", "b"])
    feed(handler, [("b", "a", 7)])
    with pytest.raises(ProtocolError, match="barrier 7 on channel 'a'") as info:
        feed(handler, [("b", "a", 7)])
    assert info.value.checkpoint_id == 7
    assert info.value.channel == "a"


def test_same_barrier_twice_after_completion_is_protocol_error():
    handler, _ = aligner(["a"])
    feed(handler, [("b", "a", 1)])
    with pytest.raises(ProtocolError) as info:
        feed(handler, [("b", "a", 1)])
    assert (info.value.checkpoint_id, info.value.channel) == (1, "a")


def test_marker_after_end_of_partition_is_protocol_error():
    handler, _ = aligner(["a", "b"])
    feed(handler, [("e", "a")])
    with pytest.raises(ProtocolError, match="after its EndOfPartition"):
        feed(handler, [("b", "a", 1)])


def test_unknown_channel_is_protocol_error():
    handler, _ = aligner(["a", "b"])
    with pytest.raises(ProtocolError, match="unknown channel"):
        feed(handler, [("b", "zz", 1)])


def test_limit_exceeded_aborts_alignment_and_releases():
    handler, rec = aligner(["a", "b"])
    feed(handler, [("b", "a", 1)])
    assert handler.alignment_limit_exceeded(10_000) is True
    assert rec.log == [("abort", 1, LIM)]
    assert not handler.is_blocked("a")
    feed(handler, [("b", "b", 1)])  # trailing barrier of the declined checkpoint
    assert rec.log == [("abort", 1, LIM)]


def test_limit_exceeded_without_alignment_is_noop():
    handler, rec = aligner(["a", "b"])
    assert handler.alignment_limit_exceeded(1) is False
    assert rec.log == []


def test_aligner_rejects_duplicate_channel_names():
    with pytest.raises(ProtocolError, match="duplicate"):
        aligner(["a", "a"])


def test_end_of_input_declines_pending_alignment_like_end_of_partition_and_releases():
    al, rec = aligner(["a", "b"])
    feed(al, [("b", "a", 1)])
    assert al.is_blocked("a")
    assert al.end_of_input() is True
    assert rec.log == [("abort", 1, AbortReason.INPUT_END_OF_STREAM)] and not al.aligning
    assert al.end_of_input() is False and len(rec.log) == 1  # nothing pending: no-op
    # channels stay open so buffered markers can be replayed
    feed(al, [("b", "a", 2)])
    assert al.is_blocked("a") and al.current_checkpoint_id == 2

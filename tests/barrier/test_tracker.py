"""Rule-by-rule tests of the at-least-once tracker."""

from __future__ import annotations

import pytest
from barrier_script import feed, tracker

from sparkbarrier import ProtocolError
from sparkbarrier.barrier import MAX_CHECKPOINTS_TO_TRACK, AbortReason

CAN, EOS = AbortReason.CANCELLED, AbortReason.INPUT_END_OF_STREAM

CASES = [
    ("single_channel_triggers_every_barrier", ["a"],
     [("b", "a", 1), ("b", "a", 2)], [("trigger", 1), ("trigger", 2)], ()),
    ("triggers_when_every_channel_delivered", ["a", "b", "c"],
     [("b", "a", 1), ("b", "b", 1), ("b", "c", 1)], [("trigger", 1)], ()),
    ("partial_checkpoint_stays_pending", ["a", "b"], [("b", "a", 1)], [], (1,)),
    ("complete_checkpoint_drops_older_pending", ["a", "b"],
     [("b", "a", 1), ("b", "a", 2), ("b", "b", 2)], [("trigger", 2)], ()),
    ("late_barrier_of_subsumed_checkpoint_is_not_tracked", ["a", "b"],
     [("b", "a", 1), ("b", "a", 2), ("b", "b", 2), ("b", "b", 3), ("b", "a", 3)],
     [("trigger", 2), ("trigger", 3)], ()),
    ("first_barrier_older_than_latest_pending_is_ignored", ["a", "b", "c"],
     [("b", "a", 2), ("b", "b", 1)], [], (2,)),
    ("cancel_aborts_older_pending_and_itself", ["a", "b", "c"],
     [("b", "a", 1), ("b", "a", 2), ("c", "b", 2)], [("abort", 1, CAN), ("abort", 2, CAN)], (2,)),
    ("aborted_checkpoint_is_not_triggered_when_complete", ["a", "b"],
     [("b", "a", 1), ("c", "b", 1), ("b", "a", 2)], [("abort", 1, CAN)], (2,)),
    ("cancel_of_new_id_is_notified_once", ["a", "b", "c"],
     [("c", "a", 5), ("c", "b", 5), ("c", "c", 5)], [("abort", 5, CAN)], ()),
    ("barriers_after_cancel_do_not_trigger", ["a", "b", "c"],
     [("c", "a", 5), ("b", "b", 5), ("b", "c", 5)], [("abort", 5, CAN)], ()),
    ("end_of_partition_aborts_all_pending", ["a", "b", "c"],
     [("b", "a", 1), ("b", "a", 2), ("e", "c")], [("abort", 1, EOS), ("abort", 2, EOS)], ()),
    ("closed_channel_not_awaited_later", ["a", "b", "c"],
     [("e", "c"), ("b", "a", 1), ("b", "b", 1)], [("trigger", 1)], ()),
]


@pytest.mark.parametrize(
    ("channels", "events", "expected", "pending"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_tracker_rule(channels, events, expected, pending):
    handler, rec = tracker(channels)
    released = feed(handler, events)
    assert rec.log == expected
    assert handler.pending_ids == pending
    assert not any(released)
    assert not any(handler.is_blocked(ch) for ch in channels)


def test_tracker_tracks_at_most_fifty_checkpoints():
    handler, rec = tracker(["a", "b"])
    n = MAX_CHECKPOINTS_TO_TRACK + 5
    feed(handler, [("b", "a", i) for i in range(1, n + 1)])
    assert handler.pending_ids == tuple(range(6, n + 1))
    feed(handler, [("b", "b", 3)])  # dropped: no longer tracked, never triggers
    assert rec.log == []
    feed(handler, [("b", "b", 6)])
    assert rec.log == [("trigger", 6)]


def test_tracker_repeated_barrier_on_channel_is_protocol_error():
    handler, _ = tracker(["a", "b"])
    feed(handler, [("b", "a", 3)])
    with pytest.raises(ProtocolError) as info:
        feed(handler, [("b", "a", 3)])
    assert (info.value.checkpoint_id, info.value.channel) == (3, "a")


def test_end_of_input_aborts_every_pending_checkpoint_once():
    tr, rec = tracker(["a", "b", "c"])
    feed(tr, [("b", "a", 1), ("b", "a", 2), ("c", "b", 1)])  # 1 cancelled but still counted
    assert rec.log == [("abort", 1, AbortReason.CANCELLED)] and tr.pending_ids == (1, 2)
    assert tr.end_of_input() is False
    assert rec.log[1:] == [("abort", 2, AbortReason.INPUT_END_OF_STREAM)]
    assert tr.pending_ids == () and tr.end_of_input() is False and len(rec.log) == 2

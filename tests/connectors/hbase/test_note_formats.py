"""The notes' wire formats: a try's key chunks round-trip; in-flight state of older formats is refused.

This release reads the in-flight state its predecessor wrote (``c:task-*`` notes, noted
attempts) and refuses older state at query start and where a task places
(``_attempts.check_formats``), naming the format and the way out. Pure: the records are
built as the earlier releases wrote them; ``test_attempts.py`` does the same on a real HBase.
"""

from __future__ import annotations

import pytest

from sparkbarrier._exceptions import ProtocolError
from sparkbarrier.connectors.hbase.sink._attempts import check_formats
from sparkbarrier.connectors.hbase.sink._commit_table import AttemptRecord, CommitRecord
from sparkbarrier.connectors.hbase.sink._timestamps import BATCH_SPAN_MS

BASE = 1_795_000_000_000
COMMIT = CommitRecord(sink_id="orders", table="t", seq=1, query_id="q1", batch_id=0, ts_lo=BASE - 9_000,
                      ts_hi=BASE - 8_000, read_bound=BASE - 8_000, gaps=[[BASE - 20_000, BASE - 16_000]])
WHERE = {"sink_id": "orders", "commit_table": "sparkbarrier_commits"}


def test_task_note_keys_round_trip_any_bytes_and_a_truncated_chunk_is_an_error() -> None:
    from sparkbarrier.connectors.hbase.sink._commit_table import _decode_keys, _encode_keys

    keys = [b"", b"\x00\xff", "ключ".encode(), b"k" * 70_000]
    assert _decode_keys(_encode_keys(keys, [len(k) for k in keys])) == keys
    with pytest.raises(ValueError, match="past the last key"):
        _decode_keys(_encode_keys(keys, [len(k) for k in keys]) + b"x")


def _refusal(attempt: AttemptRecord, flush_notes: frozenset[int] = frozenset()) -> str:
    with pytest.raises(ProtocolError) as err:
        check_formats(COMMIT, attempt, flush_notes=flush_notes, **WHERE)
    return str(err.value)


def _names_the_way_out(message: str, end: int) -> None:
    assert "batch 1 of query q1" in message
    assert "Finish batch 1 with the release you upgraded from" in message
    assert f"once the driver's clock is past {end}" in message
    assert "deleteall 'sparkbarrier_commits', 'orders', 'c:attempt'" in message


def test_an_attempt_of_a_release_that_noted_nothing_is_refused() -> None:
    """Before 2026-11-27 an attempt had no plan and no ``logged`` field (byte for byte as written)."""
    raw = b'{"base_ms":%d,"batch_id":1,"flush_bytes":2097152,"flush_rows":2,"gap":null,"prev_seq":1,' \
          b'"query_id":"q1","version":2}' % BASE
    message = _refusal(AttemptRecord.from_bytes(raw))
    assert "a release before 2026-11-27, which noted nothing of what its tasks wrote" in message
    _names_the_way_out(message, BASE + BATCH_SPAN_MS)


def test_an_attempt_over_the_range_of_such_a_release_is_refused() -> None:
    """A later release's attempt that replaced one of them carries its range (``gap``) until it commits."""
    attempt = AttemptRecord("q1", 1, BASE + 5_000, 1, [BASE, BASE + BATCH_SPAN_MS], plan="e0000000000000000007",
                            noted=True)
    message = _refusal(attempt)
    assert f"over an attempt a release before 2026-11-27 left (timestamps {BASE}..{BASE + BATCH_SPAN_MS})" in message
    _names_the_way_out(message, BASE + 5_000 + BATCH_SPAN_MS)


def test_an_attempt_with_a_wall_clock_plan_id_is_read() -> None:
    """``checkpointed_sink`` runs the sink function under wall-clock plan ids (``_runs.new_plan_id``), noting as
    every attempt does: such an id says nothing about the format."""
    attempt = AttemptRecord("q1", 1, BASE, 1, plan="1764136800000-0123456789abcdef", noted=True)
    check_formats(None, attempt, sink_id="s", commit_table="c")


@pytest.mark.parametrize("noted_by", ["itself", "an attempt it abandoned"])
def test_an_attempt_with_flush_notes_of_a_release_before_2026_11_28_is_refused(noted_by: str) -> None:
    """The 2026-11-27 release noted each flush in a ``c:log-<base>-*`` cell; only the base is read."""
    if noted_by == "itself":
        attempt = AttemptRecord("q1", 1, BASE, 1, plan="e0000000000000000007", noted=True)
    else:
        attempt = AttemptRecord("q1", 1, BASE + BATCH_SPAN_MS, 1, plan="e0000000000000000008@1795000004096",
                                noted=True, abandoned=[BASE])
    message = _refusal(attempt, frozenset({BASE}))
    assert "has c:log-* flush notes of a release before 2026-11-28" in message
    _names_the_way_out(message, attempt.base_ms + BATCH_SPAN_MS)


def test_this_release_s_attempts_committed_ones_and_stale_flush_notes_pass() -> None:
    current = AttemptRecord("q1", 1, BASE, 1, plan="e0000000000000000007@1795000000000", noted=True,
                            abandoned=[BASE - 5_000], writes={"table": "t"})
    stale = frozenset({COMMIT.ts_lo, BASE - 30_000})  # notes of committed attempts a late try left behind
    for attempt in (None, current, AttemptRecord("q1", 1, BASE, 1, plan="p1", noted=True)):
        check_formats(COMMIT, attempt, flush_notes=stale, **WHERE)
    # An attempt of a release that noted nothing, which produced the last commit, is not in flight.
    produced = AttemptRecord("q1", 0, COMMIT.ts_lo, None)
    check_formats(COMMIT, produced, flush_notes=frozenset({COMMIT.ts_lo}), **WHERE)

"""The notes' wire formats: a try's key chunks round-trip; in-flight state of older formats is refused.

This release reads the in-flight state its predecessor wrote (``c:task-*`` notes with a
block, attempts with a modulus) and refuses older state at query start and where a task places
(``_attempts.check_formats``), naming the format and the way out. Pure: the records are
built as the earlier releases wrote them; ``test_attempts.py`` does the same on a real HBase.
"""

from __future__ import annotations

import pytest

from sparkbarrier._exceptions import ProtocolError
from sparkbarrier.connectors.hbase.sink._attempts import check_formats
from sparkbarrier.connectors.hbase.sink._commit_table import AttemptRecord, CommitRecord, TaskNote
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


def _refusal(attempt: AttemptRecord, notes: tuple[TaskNote, ...] = ()) -> str:
    with pytest.raises(ProtocolError) as err:
        check_formats(COMMIT, attempt, notes=notes, **WHERE)
    return str(err.value)


def _names_the_format_and_the_way_out(message: str, end: int) -> None:
    assert "batch 1 of query q1 was left in flight by a release before 2026-11-29" in message
    assert "Finish batch 1 with the release you upgraded from" in message
    assert f"once the driver's clock is past {end}" in message
    assert "deleteall 'sparkbarrier_commits', 'orders', 'c:attempt'" in message


def test_an_attempt_of_a_release_that_noted_nothing_is_refused() -> None:
    """Before 2026-11-27 an attempt had no plan and no ``logged`` field (byte for byte as written)."""
    raw = b'{"base_ms":%d,"batch_id":1,"flush_bytes":2097152,"flush_rows":2,"gap":null,"prev_seq":1,' \
          b'"query_id":"q1","version":2}' % BASE
    _names_the_format_and_the_way_out(_refusal(AttemptRecord.from_bytes(raw)), BASE + BATCH_SPAN_MS)


def test_an_attempt_over_the_range_of_an_older_release_is_refused() -> None:
    """An attempt that replaced one of a release before 2026-11-27 carried its range (``gap``)."""
    attempt = AttemptRecord("q1", 1, BASE + 5_000, 1, [BASE, BASE + BATCH_SPAN_MS], plan="e0000000000000000007",
                            noted=True, keyed_tasks=1)
    _names_the_format_and_the_way_out(_refusal(attempt), BASE + 5_000 + BATCH_SPAN_MS)


def test_an_attempt_of_the_release_before_2026_11_29_is_refused() -> None:
    """That release recorded no modulus (``keyed_tasks``): its tasks wrote in another layout."""
    attempt = AttemptRecord("q1", 1, BASE, 1, plan="e0000000000000000007@1795000000000", noted=True,
                            writes={"table": "t"})
    _names_the_format_and_the_way_out(_refusal(attempt), BASE + BATCH_SPAN_MS)


@pytest.mark.parametrize("noted_by", ["itself", "an attempt it abandoned"])
def test_a_done_note_without_a_block_is_refused(noted_by: str) -> None:
    """Notes of the release before 2026-11-29 record no block; the release after it read them, so
    its attempt may carry such an abandoned attempt's base. A claim (no chunks yet) has no block."""
    old = BASE if noted_by == "an attempt it abandoned" else BASE + BATCH_SPAN_MS
    attempt = AttemptRecord("q1", 1, BASE + BATCH_SPAN_MS, 1, plan="e0000000000000000008@1795000004096",
                            noted=True, abandoned=[BASE], keyed_tasks=4)
    _names_the_format_and_the_way_out(_refusal(attempt, (TaskNote(old, 3, "s0", chunks=1, keys=2),)),
                                      BASE + 2 * BATCH_SPAN_MS)
    check_formats(COMMIT, attempt, notes=(TaskNote(old, 3, "s1"), TaskNote(old, 3, "s0", chunks=1, block=0)),
                  **WHERE)


def test_this_release_s_attempts_committed_ones_and_stale_notes_pass() -> None:
    current = AttemptRecord("q1", 1, BASE, 1, plan="e0000000000000000007@1795000000000", noted=True,
                            abandoned=[BASE - 5_000], writes={"table": "t"}, keyed_tasks=3)
    stale = (TaskNote(COMMIT.ts_lo, 0, "s0", chunks=1), TaskNote(BASE - 30_000, 1, "s0", chunks=1))
    for attempt in (None, current, AttemptRecord("q1", 1, BASE, 1, plan="1764136800000-0123456789abcdef",
                                                 noted=True, keyed_tasks=1)):
        check_formats(COMMIT, attempt, notes=stale, **WHERE)
    # An attempt of a release that noted nothing, which produced the last commit, is not in flight.
    produced = AttemptRecord("q1", 0, COMMIT.ts_lo, None)
    check_formats(COMMIT, produced, notes=stale, **WHERE)

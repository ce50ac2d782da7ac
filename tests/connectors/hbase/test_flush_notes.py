"""The flush note's wire format (``c:log-<base>-<partition>-<n>``): one owner, versioned, strict."""

from __future__ import annotations

import pytest

from sparkbarrier._exceptions import ProtocolError
from sparkbarrier.connectors.hbase.sink._commit_table import LegacyFlushNote, legacy_note_base, legacy_note_column


def test_a_note_round_trips_any_row_key_bytes() -> None:
    keys = [bytes(range(256)), b"", b"plain", "ünï".encode()]
    note = LegacyFlushNote(1_795_000_000_123, 7, 3, {0: keys, 2: [b"x"]})
    assert note.column() == legacy_note_column(1_795_000_000_123, 7, 3) == b"c:log-1795000000123-7-3"
    assert LegacyFlushNote.from_cell(note.column(), note.to_bytes()) == note
    assert legacy_note_base(note.column()) == 1_795_000_000_123 and legacy_note_base(b"c:commit") is None


@pytest.mark.parametrize("raw", [b"not json", b"[]", b'{"version":1,"rounds":{}}', b'{"version":2}',
                                 b'{"version":2,"rounds":{"x":["a"]}}', b'{"version":2,"rounds":{"0":[1]}}'])
def test_a_malformed_or_foreign_note_is_a_protocol_error(raw: bytes) -> None:
    with pytest.raises(ProtocolError):
        LegacyFlushNote.from_cell(b"c:log-1-0-1", raw)


def test_a_malformed_note_column_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        LegacyFlushNote.from_cell(b"c:log-x-0-1", b'{"version":2,"rounds":{}}')


def test_task_note_keys_round_trip_any_bytes_and_a_truncated_chunk_is_an_error() -> None:
    from sparkbarrier.connectors.hbase.sink._commit_table import _decode_keys, _encode_keys

    keys = [b"", b"\x00\xff", "ключ".encode(), b"k" * 70_000]
    assert _decode_keys(_encode_keys(keys, [len(k) for k in keys])) == keys
    with pytest.raises(ValueError, match="past the last key"):
        _decode_keys(_encode_keys(keys, [len(k) for k in keys]) + b"x")

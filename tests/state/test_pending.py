"""The pending-checkpoints ledger: subsumption, cap, abort, unknown ids."""

from __future__ import annotations

import logging
import pickle

import pytest

from sparkbarrier import ProtocolError
from sparkbarrier.state import PendingCheckpoint, PendingCheckpoints


def ledger_with(*ids: int, **kw) -> PendingCheckpoints:
    ledger = PendingCheckpoints(**kw)
    for cid in ids:
        ledger.add(cid, {"t:0": cid * 10, "t:1": cid}, timestamp_ms=1000 + cid)
    return ledger


def test_complete_returns_entry_and_drops_older_ones():
    ledger = ledger_with(1, 2, 3, 4)
    entry = ledger.complete(3)
    assert entry is not None and entry.checkpoint_id == 3 and dict(entry.offsets) == {"t:0": 30, "t:1": 3}
    assert [e.checkpoint_id for e in ledger.pending] == [4]


def test_complete_of_unknown_id_is_logged_noop(caplog):
    ledger = ledger_with(2, 3)
    with caplog.at_level(logging.WARNING):
        assert ledger.complete(1) is None
        assert ledger.complete(9) is None
    assert len(ledger) == 2
    assert "checkpoint 9 completed but is not pending" in caplog.text


def test_complete_twice_commits_once():
    ledger = ledger_with(1)
    assert ledger.complete(1) is not None
    assert ledger.complete(1) is None


def test_abort_drops_only_that_checkpoint():
    ledger = ledger_with(1, 2, 3)
    ledger.abort(2)
    ledger.abort(2)
    assert [e.checkpoint_id for e in ledger.pending] == [1, 3]
    assert ledger.complete(3).checkpoint_id == 3 and len(ledger) == 0


@pytest.mark.parametrize("cid", [3, 2])
def test_ids_must_strictly_increase(cid):
    ledger = ledger_with(3)
    with pytest.raises(ProtocolError, match="strictly increase") as info:
        ledger.add(cid, {}, 0)
    assert info.value.checkpoint_id == cid


def test_ids_must_increase_even_after_complete_and_abort():
    ledger = ledger_with(1, 2)
    ledger.complete(1)
    ledger.abort(2)
    with pytest.raises(ProtocolError):
        ledger.add(2, {}, 0)
    ledger.add(3, {}, 0)


def test_cap_drops_oldest_with_warning(caplog):
    with caplog.at_level(logging.WARNING):
        ledger = ledger_with(*range(1, 8), max_pending=5)
    assert [e.checkpoint_id for e in ledger.pending] == [3, 4, 5, 6, 7]
    assert "dropping checkpoint 1" in caplog.text and "dropping checkpoint 2" in caplog.text
    assert ledger.complete(1) is None


def test_latest_and_len():
    ledger = PendingCheckpoints()
    assert ledger.latest is None and len(ledger) == 0
    ledger.add(5, {"t:0": 1}, 7, {"batch": "5"})
    assert ledger.latest.checkpoint_id == 5 and ledger.latest.metadata == {"batch": "5"}


def test_entry_copies_caller_offsets():
    offsets = {"t:0": 1}
    entry = PendingCheckpoints().add(1, offsets, 0)
    offsets["t:0"] = 99
    assert entry.offsets == {"t:0": 1}
    with pytest.raises(TypeError):
        entry.offsets["t:0"] = 5  # type: ignore[index]


@pytest.mark.parametrize("offsets", [{"t:0": -1}, {"t:0": "5"}, {3: 1}, {"t:0": True}])
def test_bad_offsets_are_rejected(offsets):
    with pytest.raises(ProtocolError):
        PendingCheckpoints().add(1, offsets, 0)


def test_entry_pickles_and_round_trips_json():
    entry = PendingCheckpoint(4, {"t:2": 8}, 123, {"k": "v"})
    assert pickle.loads(pickle.dumps(entry)) == entry
    assert PendingCheckpoint.from_json(entry.to_json()) == entry


def test_max_pending_must_be_positive():
    with pytest.raises(ProtocolError):
        PendingCheckpoints(max_pending=0)

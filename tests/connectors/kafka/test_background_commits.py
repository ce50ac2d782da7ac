"""Group commits off the batch's path: submit never waits, newest wins, failures retry.

The committer here is a stand-in with the OffsetCommitter's ``commit``/``close``
contract (no Kafka in this unit test); the real coordinator moves are in
tests/integration/test_kafka_failover.py.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping

from sparkbarrier.connectors.kafka.commits._background_commits import BackgroundCommits
from sparkbarrier.connectors.kafka._metrics import SourceMetrics
from sparkbarrier.connectors.kafka.client._positions import TopicPartition as TP


class _Committer:
    """Blocks while ``gate`` is closed; fails while ``failing`` is set."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.gate.set()
        self.failing = False
        self.calls: list[int] = []
        self.closed = False
        self.entered = threading.Event()
        self.refused = False  # OffsetCommitter.refused: the last failure cannot heal by retrying

    def commit(self, completed_id: int, timestamp_ms: int,
               offsets: Mapping[TP, int]) -> bool:
        self.entered.set()
        self.gate.wait(30)
        self.calls.append(completed_id)
        return not self.failing

    def close(self) -> None:
        self.closed = True


def _queue(committer: _Committer) -> BackgroundCommits:
    return BackgroundCommits(lambda: committer, name="test-commits",  # type: ignore[arg-type,return-value]
                             metrics=SourceMetrics())


def test_submit_returns_at_once_while_a_commit_hangs_and_the_newest_wins() -> None:
    committer = _Committer()
    committer.gate.clear()  # the coordinator's broker just died: the commit hangs
    commits = _queue(committer)
    commits.submit(1, 0, {TP("t", 0): 10})
    assert committer.entered.wait(10)  # checkpoint 1's commit hangs on the thread
    started = time.monotonic()
    for checkpoint in (2, 3, 4):
        commits.submit(checkpoint, 0, {TP("t", 0): checkpoint * 10})
    assert time.monotonic() - started < 0.5
    committer.gate.set()
    assert commits.wait_for(4, 10)
    assert committer.calls == [1, 4]  # 2 and 3 were replaced while 1 hung
    commits.submit(3, 0, {TP("t", 0): 30})  # older: ignored
    assert commits.close(5) and committer.calls[-1] == 4 and committer.closed


def test_a_failed_commit_is_retried_without_a_new_checkpoint() -> None:
    """An idle stream after a coordinator move still catches up."""
    committer = _Committer()
    committer.failing = True
    commits = _queue(committer)
    commits.submit(1, 0, {TP("t", 0): 5})
    deadline = time.monotonic() + 10
    while len(committer.calls) < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not commits.wait_for(1, 0.1)
    committer.failing = False
    assert commits.wait_for(1, 10), committer.calls
    assert committer.calls == [1, 1]
    assert commits.close(1)


def test_close_waits_a_bounded_time_for_the_last_checkpoint() -> None:
    committer = _Committer()
    committer.failing = True
    commits = _queue(committer)
    commits.submit(7, 0, {TP("t", 0): 5})
    started = time.monotonic()
    assert commits.close(0.3) is False
    assert time.monotonic() - started < 5
    assert commits.committed is None


def test_id_0_is_an_id_like_any_other() -> None:
    """Spark's first batch is batch 0: nothing may read 0 as "none committed yet"."""
    committer = _Committer()
    commits = _queue(committer)
    assert commits.committed is None
    commits.submit(0, 0, {TP("t", 0): 3})
    assert commits.wait_for(0, 10) and commits.committed == 0
    commits.submit(0, 0, {TP("t", 0): 3})  # the same id again: ignored
    assert commits.close(5) and committer.calls == [0]


def test_close_stops_waiting_once_the_broker_refused_the_last_commit_for_good() -> None:
    """No rights on the group: retrying cannot help, so stopping must not wait its bound."""
    committer = _Committer()
    committer.failing = committer.refused = True
    commits = _queue(committer)
    commits.submit(1, 0, {TP("t", 0): 10})
    started = time.monotonic()
    assert commits.close(30) is False
    assert time.monotonic() - started < 10 and committer.calls[:1] == [1] and committer.closed


def test_a_retriable_failure_still_gets_the_whole_bound_and_lands() -> None:
    committer = _Committer()
    committer.failing = True  # the coordinator is moving: retried
    commits = _queue(committer)
    commits.submit(1, 0, {TP("t", 0): 10})
    assert not commits.wait_for(1, 0.5)
    committer.failing = False
    assert commits.close(30) and committer.calls[-1] == 1

"""Which query ``commit_kafka_offsets`` commits, and what ``finish`` waits for.

Events are stand-ins with the fields the listener reads (no Spark here); the real
queries are in test_jvm_commits.py and tests/integration/test_kafka_failover.py.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping

import pytest

from sparkbarrier.connectors.kafka.commits._jvm_commits import KafkaOffsetCommits
from sparkbarrier.connectors.kafka.client._positions import TopicPartition as TP


class _Started:
    def __init__(self, qid: str, name: str | None = None) -> None:
        self.id, self.name = qid, name


class _Progress:
    def __init__(self, qid: str, batch_id: int, offset: int, name: str | None = None) -> None:
        self.progress = self
        self.id, self.name, self.batchId = qid, name, batch_id
        self.sources = [type("S", (), {"description": "KafkaV2[Subscribe[t]]",
                                       "endOffset": f'{{"t":{{"0":{offset}}}}}'})()]


class _Terminated:
    def __init__(self, qid: str) -> None:
        self.id = qid


class _Recorder:
    def __init__(self) -> None:
        self.commits: list[tuple[int, dict[TP, int]]] = []

    def commit(self, completed_id: int, timestamp_ms: int, offsets: Mapping[TP, int]) -> bool:
        self.commits.append((completed_id, dict(offsets)))
        return True

    def close(self) -> None:
        pass


def _listener(running_before: frozenset[str] = frozenset(),
              name: str | None = None) -> tuple[KafkaOffsetCommits, _Recorder]:
    listener = KafkaOffsetCommits("g", {}, name, running_before)
    recorder = listener._committer = _Recorder()
    return listener, recorder


def test_an_unnamed_listener_binds_to_the_query_started_after_it_not_the_first_to_progress(
        caplog: pytest.LogCaptureFixture) -> None:
    listener, recorder = _listener(running_before=frozenset({"old"}))
    try:
        listener.onQueryProgress(_Progress("old", 5, 900))  # running before the call
        listener.onQueryStarted(_Started("mine"))
        listener.onQueryProgress(_Progress("old", 6, 950))
        listener.onQueryProgress(_Progress("mine", 0, 3))
        assert listener.wait_for(0, 10)
        caplog.set_level(logging.ERROR)
        listener.onQueryStarted(_Started("second"))
        listener.onQueryProgress(_Progress("second", 0, 77))
        listener.onQueryStarted(_Started("third"))
        assert listener.close(10) is None
        assert recorder.commits == [(0, {TP("t", 0): 3})]  # batch 0, by its id
        errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
        assert len(errors) == 1 and "query_name=" in errors[0] and "second" in errors[0]
    finally:
        listener.close()


def test_a_progress_before_any_start_binds_nothing() -> None:
    listener, recorder = _listener()
    listener.onQueryProgress(_Progress("other", 0, 3))
    assert not listener.wait_for(0, 0.2)
    listener.close()
    assert recorder.commits == []


def test_a_named_listener_binds_by_name_on_any_event() -> None:
    listener, recorder = _listener(running_before=frozenset({"q-id"}), name="q")
    listener.onQueryProgress(_Progress("other", 0, 9, name="p"))
    listener.onQueryProgress(_Progress("q-id", 3, 4, name="q"))
    assert listener.wait_for(3, 10)
    listener.close()
    assert recorder.commits == [(3, {TP("t", 0): 4})]


def test_finish_waits_for_the_last_batch_that_ran_not_an_idle_progress() -> None:
    """After ~10 s without data ``lastProgress`` names the next batch, which never ran."""
    listener, recorder = _listener()

    class _Query:
        id = "q"
        lastProgress = {"batchId": 3}  # idle progress: batch 3 never ran

    listener.onQueryStarted(_Started("q"))
    listener.onQueryProgress(_Progress("q", 0, 2))
    listener.onQueryProgress(_Progress("q", 1, 4))
    late = threading.Timer(0.3, lambda: (listener.onQueryProgress(_Progress("q", 2, 6)),
                                         listener.onQueryTerminated(_Terminated("q"))))
    late.start()  # awaitTermination returned; the bus still delivers the last events
    try:
        assert listener.finish(_Query(), timeout_s=10) is True
    finally:
        late.join()
    assert recorder.commits[-1] == (2, {TP("t", 0): 6})


class _QueryHandle:
    def __init__(self, qid: str) -> None:
        self.id = qid


def test_finish_waits_for_a_query_whose_start_event_the_listener_has_not_seen_yet() -> None:
    """``awaitTermination`` returns before the bus delivers; a short query's events may all be queued."""
    listener, recorder = _listener()
    late = threading.Timer(0.3, lambda: (listener.onQueryStarted(_Started("q")),
                                         listener.onQueryProgress(_Progress("q", 0, 5)),
                                         listener.onQueryTerminated(_Terminated("q"))))
    late.start()
    try:
        assert listener.finish(_QueryHandle("q"), timeout_s=10) is True
    finally:
        late.join()
    assert recorder.commits == [(0, {TP("t", 0): 5})]


def test_finish_on_a_query_the_listener_does_not_commit_says_so(caplog: pytest.LogCaptureFixture) -> None:
    listener, recorder = _listener(name="mine")
    listener.onQueryProgress(_Progress("m", 0, 5, name="mine"))
    listener.onQueryTerminated(_Terminated("other"))
    caplog.set_level(logging.ERROR)
    assert listener.finish(_QueryHandle("other"), timeout_s=10) is True
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "query other" in errors[0] and "commits query m" in errors[0]
    assert recorder.commits == [(0, {TP("t", 0): 5})]

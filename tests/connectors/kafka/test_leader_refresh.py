"""A read or lookup that gets nothing asks the cluster for the partition's leader (issue 44).

After a leader's broker died, librdkafka kept a compiled consumer on the dead broker
until a response told it otherwise: a consumer that idled in the pool had no connection
up to ask, and a lookup failing does not refresh its metadata. The range loop therefore
asks for the leader itself (a metadata request, which moves librdkafka's fetcher to the
leader it names): a read after :data:`_STALLED_S` without a record, then once per
:data:`_STALLED_S`; a lookup on every slice that found no answer. Fake fetchers here;
the real cluster is tests/integration/test_kafka_leader_kill_liveness.py.
"""

from __future__ import annotations

import logging

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from sparkbarrier.connectors.kafka import parse_source_options, source_schema
from sparkbarrier.connectors.kafka.reader import _librdkafka
from sparkbarrier.connectors.kafka.reader._librdkafka import ClientErrors, earliest, read_with
from sparkbarrier.connectors.kafka.reader._partition_reader import KafkaRangePartition
from sparkbarrier.connectors.kafka.reader._offset_range import build_batch
from sparkbarrier.connectors.kafka.client._secrets import SecretScrubber

PART = KafkaRangePartition("t", 0, 0, 3, checkpoint_id=1, timestamp_ms=1)
OPTIONS = parse_source_options({"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t",
                                "commitOffsets": "false"})
SCHEMA = to_arrow_schema(source_schema(False), timezone="UTC")


class _DeadLeaderFetcher:
    """Fetches nothing until asked for the leader ``answers_after`` times; then the
    range's three records at once. Lookups answer at once."""

    def __init__(self, answers_after: int) -> None:
        self.errors = ClientErrors(SecretScrubber({}, logging.getLogger()))
        self.answers_after = answers_after
        self.refreshes = 0
        self.fetches = 0
        self.rows = 0
        self.released = False

    def earliest(self, timeout_s: float) -> int | None:
        return 0

    def assign(self, offset: int) -> None:
        pass

    def topic_error(self, timeout_s: float) -> tuple[int, str]:
        self.refreshes += 1
        return 0, ""

    def fetch(self, want: int, end: int, timeout_s: float
              ) -> tuple[int, int, bool, bool, list[tuple[int, int, str]]]:
        self.fetches += 1
        if self.refreshes < self.answers_after:
            return 0, -1, False, False, []
        self.rows = want
        return want, end, False, False, []

    def position(self) -> int:
        return 3 if self.rows else 0

    def take(self) -> pa.RecordBatch:
        n, self.rows = self.rows, 0
        return build_batch(PART, SCHEMA, keys=pa.array([b"k"] * n), values=pa.array([b"v"] * n),
                           offsets=pa.array(range(n), pa.int64()).to_numpy(),
                           timestamps_ms=pa.array([0] * n, pa.int64()).to_numpy(),
                           timestamp_types=pa.array([0] * n, pa.int32()).to_numpy(), headers=None)

    def close(self) -> None:
        pass

    def release(self) -> None:
        self.released = True


@pytest.fixture
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_librdkafka, "_STALLED_S", 0.05)


def test_a_read_without_records_asks_for_the_leader_until_it_reads(quick: None) -> None:
    fetcher = _DeadLeaderFetcher(answers_after=3)
    rows = sum(b.num_rows for b in read_with(fetcher, OPTIONS, PART))  # type: ignore[arg-type]
    assert rows == 3 and fetcher.released
    assert fetcher.refreshes == 3  # one per stalled interval, none once records came


def test_a_read_that_gets_records_never_asks(quick: None) -> None:
    fetcher = _DeadLeaderFetcher(answers_after=0)
    assert sum(b.num_rows for b in read_with(fetcher, OPTIONS, PART)) == 3  # type: ignore[arg-type]
    assert fetcher.refreshes == 0 and fetcher.fetches == 1


def test_a_lookup_without_an_answer_asks_for_the_leader_even_without_a_client_error() -> None:
    """A pooled consumer's lookup to a dead leader times out with no error_cb behind it."""
    fetcher = _DeadLeaderFetcher(answers_after=0)
    answers = iter([None, None, 7])
    fetcher.earliest = lambda timeout_s: next(answers)  # type: ignore[method-assign]
    assert earliest(fetcher, PART, 5) == 7  # type: ignore[arg-type]
    assert fetcher.refreshes == 2 and fetcher.errors.last == ""

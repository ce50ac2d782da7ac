"""The compiled fetcher's own edges, against the real broker (the range rules on top of
it are tested for every client in test_partition_reader.py).

A batch is bounded by bytes as well as records (int32 Arrow offsets): a record that does
not fit stays with the fetcher for the next batch, and the position the reader sees must
not pass it, or the range would end with records unread.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from kafka_testkit import KafkaTool

from sparkbarrier.connectors.kafka._librdkafka import DEFAULTS, FORCED
from sparkbarrier.connectors.kafka._native_reader import _setting

pytestmark = [pytest.mark.kafka]


def _config(kafka: KafkaTool) -> list[tuple[str, str]]:
    settings = {**DEFAULTS, "bootstrap.servers": kafka.bootstrap, **FORCED}
    return [(k, _setting(v)) for k, v in settings.items()]


def test_a_batch_full_by_bytes_keeps_the_rest_and_the_position_behind_it(
    kafka: KafkaTool, unique_name
) -> None:
    from sparkbarrier.connectors.kafka._rdkafka_arrow import Fetcher

    topic = kafka.create_topic(unique_name("t"), partitions=1)
    values = kafka.produce(topic, 40, partitions=1)  # b"0".."39", keys b"k0".."k39"
    fetcher = Fetcher(_config(kafka), topic, 0, False, max_bytes=10)
    assert fetcher.watermarks(10_000)[:3] == (0, 0, 40)
    fetcher.assign(0)
    got: list[bytes] = []
    batches = 0
    while len(got) < 40:
        added, next_offset, hit_end, full, events = fetcher.fetch(40 - len(got), 40, 1000)
        assert events == [] or all(code == -191 for code, _, _ in events)  # EOF only
        assert fetcher.position() <= len(got) + fetcher.rows  # never past what was taken
        if full or fetcher.rows + len(got) == 40:
            n, _, value, *_ = fetcher.take()
            assert len(value[2]) <= 10 or n == 1
            got += pa.Array.from_buffers(pa.binary(), n, [value[0], pa.py_buffer(value[1]),
                                                          pa.py_buffer(value[2])]).to_pylist()
            batches += 1
    fetcher.close()
    assert got == values
    assert batches >= 10  # 3 keys of 3 bytes fill 10 bytes


def test_an_oversized_record_still_makes_a_batch_of_one(kafka: KafkaTool, unique_name) -> None:
    from sparkbarrier.connectors.kafka._rdkafka_arrow import Fetcher

    topic = kafka.create_topic(unique_name("t"), partitions=1)
    kafka.produce(topic, 3, partitions=1)
    fetcher = Fetcher(_config(kafka), topic, 0, False, max_bytes=1)
    fetcher.assign(0)
    sizes = []
    while sum(sizes) < 3:
        fetcher.fetch(3, 3, 1000)
        if fetcher.rows:
            sizes.append(fetcher.take()[0])
    fetcher.close()
    assert sizes == [1, 1, 1]  # keys b"k<i>" alone pass max_bytes=1
    with pytest.raises(ValueError, match="max_bytes"):
        Fetcher(_config(kafka), topic, 0, False, max_bytes=0)
    with pytest.raises(RuntimeError, match="closed"):
        fetcher.position()

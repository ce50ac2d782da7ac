"""The compiled fetcher's own edges, against the real broker (the range rules on top of
it are tested for every client in test_partition_reader.py).

A batch is bounded by bytes as well as records (int32 Arrow offsets): a record that does
not fit stays with the fetcher for the next batch, and the position the reader sees must
not pass it, or the range would end with records unread.
"""

from __future__ import annotations

import threading
import time

import pyarrow as pa
import pytest
from kafka_testkit import KafkaTool

from sparkbarrier.connectors.kafka.reader._librdkafka import DEFAULTS, FORCED
from sparkbarrier.connectors.kafka.reader._native_reader import _setting

pytestmark = [pytest.mark.kafka]


def _config(kafka: KafkaTool) -> list[tuple[str, str]]:
    settings = {**DEFAULTS, "bootstrap.servers": kafka.bootstrap, **FORCED}
    return [(k, _setting(v)) for k, v in settings.items()]


def test_a_batch_full_by_bytes_keeps_the_rest_and_the_position_behind_it(
    kafka: KafkaTool, unique_name
) -> None:
    from sparkbarrier.connectors.kafka.reader._rdkafka_arrow import Fetcher

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
    from sparkbarrier.connectors.kafka.reader._rdkafka_arrow import Fetcher

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


def _fetch_all(fetcher, end: int, timeout_s: float = 30) -> list[bytes]:
    """Every value below ``end`` (from offset 0), taking after each fetch."""
    got: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < end and time.monotonic() < deadline:
        fetcher.fetch(end - len(got) - fetcher.rows, end, 1000)
        got += _values(fetcher.take())
    return got


def _values(taken: tuple) -> list[bytes]:
    n, key, value, offsets, stamps, kinds, *_ = taken
    # every column holds exactly n rows
    assert len(key[1]) == len(value[1]) == 4 * (n + 1)
    assert len(offsets) == len(stamps) == 8 * n and len(kinds) == 4 * n
    return pa.Array.from_buffers(pa.binary(), n, [value[0], pa.py_buffer(value[1]),
                                                  pa.py_buffer(value[2])]).to_pylist()


def _cgrp_lines(fetcher) -> list[str]:
    return [text for kind, _, text in fetcher.client_events()
            if kind == "log" and "oordinator" in text]


def test_the_fetcher_reads_without_a_group_and_never_looks_up_a_coordinator(
    kafka: KafkaTool, unique_name
) -> None:
    """Executors need no group rights: no group.id, so no FindCoordinator (librdkafka's
    ``cgrp`` debug log shows every coordinator lookup; the control with a group.id
    proves the probe sees them)."""
    from sparkbarrier.connectors.kafka.reader._rdkafka_arrow import Fetcher

    assert "group.id" not in FORCED
    topic = kafka.create_topic(unique_name("t"), partitions=1)
    values = kafka.produce(topic, 5, partitions=1)
    fetcher = Fetcher(_config(kafka) + [("debug", "cgrp")], topic, 0, False)
    fetcher.assign(0)
    assert _fetch_all(fetcher, 5) == values
    lines = _cgrp_lines(fetcher)
    fetcher.close()
    assert lines == []

    control = Fetcher(_config(kafka) + [("debug", "cgrp"), ("group.id", unique_name("g"))],
                      topic, 0, False)
    control.assign(0)
    assert _fetch_all(control, 5) == values
    lines = _cgrp_lines(control)
    deadline = time.monotonic() + 30
    while not lines and time.monotonic() < deadline:
        control.serve(200)
        lines = _cgrp_lines(control)
    control.close()
    assert lines


def test_the_confluent_path_uses_the_querys_group_id() -> None:
    """confluent-kafka insists on a group.id: the query's, on which the user has rights."""
    from sparkbarrier.connectors.kafka import parse_source_options
    from sparkbarrier.connectors.kafka.reader._confluent_reader import UNJOINED_GROUP, executor_group_id

    base = {"kafka.bootstrap.servers": "h:1", "subscribe": "t"}
    assert executor_group_id(parse_source_options({**base, "kafka.group.id": "etl"})) == "etl"
    assert executor_group_id(parse_source_options({**base, "commitOffsets": "false"})) == \
        UNJOINED_GROUP


def test_close_while_fetch_runs_on_another_thread_ends_it_without_a_crash(
    kafka: KafkaTool, unique_name
) -> None:
    from sparkbarrier.connectors.kafka.reader._rdkafka_arrow import Fetcher

    topic = kafka.create_topic(unique_name("t"), partitions=1)
    fetcher = Fetcher(_config(kafka), topic, 0, False)
    fetcher.assign(0)
    outcome: list[object] = []

    def fetch() -> None:  # an empty topic: waits up to 60 s unless woken
        try:
            outcome.append(fetcher.fetch(10, 10, 60_000))
        except Exception as exc:  # noqa: BLE001 -- the test reports it
            outcome.append(exc)

    worker = threading.Thread(target=fetch)
    started = time.monotonic()
    worker.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # until fetch runs: other calls are refused then
        try:
            fetcher.position()
        except RuntimeError as exc:
            assert "in use by another thread" in str(exc)
            break
    with pytest.raises(RuntimeError, match="in use by another thread"):
        fetcher.take()
    fetcher.close()  # returns at once; the fetch ends and closes
    worker.join(30)
    assert not worker.is_alive() and time.monotonic() - started < 30
    assert len(outcome) == 1 and isinstance(outcome[0], tuple) and outcome[0][0] == 0
    with pytest.raises(RuntimeError, match="closed"):
        fetcher.fetch(1, 10, 100)
    fetcher.close()  # again: a no-op


def test_a_failed_allocation_mid_record_leaves_the_columns_aligned(
    kafka: KafkaTool, unique_name
) -> None:
    """9 buffer reservations per record (key 3, value 3, offset, timestamp, type): the
    23rd is the third record's value, after its key was reserved."""
    from sparkbarrier.connectors.kafka.reader import _rdkafka_arrow

    topic = kafka.create_topic(unique_name("t"), partitions=1)
    values = kafka.produce(topic, 5, partitions=1)
    fetcher = _rdkafka_arrow.Fetcher(_config(kafka), topic, 0, False)
    fetcher.assign(0)
    _rdkafka_arrow._fail_allocation(23)
    try:
        with pytest.raises(MemoryError):
            fetcher.fetch(5, 5, 30_000)  # waits for all 5 (one batch)
    finally:
        _rdkafka_arrow._fail_allocation(0)
    assert fetcher.rows == 2
    assert fetcher.position() == 2  # the third record stays with the fetcher
    got = _values(fetcher.take())
    deadline = time.monotonic() + 30
    while len(got) < 5 and time.monotonic() < deadline:
        fetcher.fetch(5 - len(got), 5, 1000)
        got += _values(fetcher.take())
    fetcher.close()
    assert got == values


def test_assign_again_drops_what_was_prefetched_for_the_old_start(
    kafka: KafkaTool, unique_name
) -> None:
    """A restart (after an offset reset) must not hand out records queued before it."""
    from sparkbarrier.connectors.kafka.reader._rdkafka_arrow import Fetcher

    topic = kafka.create_topic(unique_name("t"), partitions=1)
    values = kafka.produce(topic, 10, partitions=1)
    fetcher = Fetcher(_config(kafka), topic, 0, False)
    fetcher.assign(0)
    first = _values(fetcher.take()) if fetcher.fetch(2, 10, 30_000)[0] else []
    assert first == values[:2]  # the rest is prefetched by now, or on its way
    fetcher.assign(7)
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < 3 and time.monotonic() < deadline:
        fetcher.fetch(3 - len(got), 10, 1000)
        got += _values(fetcher.take())
    fetcher.close()
    assert got == values[7:]

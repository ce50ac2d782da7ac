"""Keyed tasks (``_keyed``): what a task reports of its keys, and the per-task test. No server."""

from __future__ import annotations

import numpy as np

from sparkbarrier.connectors._partitioners import kafka_hashes, spark_hashes
from sparkbarrier.connectors.hbase.sink._keyed import KeyClasses, choose_keying, is_keyed


def _keys_of(partition: int, tasks: int, n: int, *, kafka: bool = False) -> list[bytes]:
    names = [f"k{i}".encode() for i in range(n * tasks * 8)]
    hashes = kafka_hashes(names) if kafka else spark_hashes(names, "bytes")
    return [k for k, r in zip(names, np.mod(hashes, tasks).tolist()) if r == partition][:n]


def _report(keys: list[bytes], kind: str | None = "bytes") -> dict[str, list[int]] | None:
    classes = KeyClasses(kind)
    classes.feed(keys[: len(keys) // 2])
    for key in keys[len(keys) // 2:]:
        classes.add(key)
    return None if classes.empty else classes.done()


def test_a_task_is_keyed_only_when_every_key_hashes_to_it() -> None:
    mine = _keys_of(3, 7, 20_000)
    assert is_keyed(_report(mine), key_hash="spark", tasks=7, partition=3)
    assert not is_keyed(_report(mine), key_hash="spark", tasks=7, partition=4)
    assert not is_keyed(_report([*mine, _keys_of(4, 7, 1)[0]]), key_hash="spark", tasks=7, partition=3)
    assert not is_keyed(_report(mine), key_hash="spark", tasks=7, partition=7)  # past the modulus: no residue
    assert not is_keyed(_report(mine, None), key_hash="spark", tasks=7, partition=3)  # a type Spark's hash skips


def test_the_report_holds_for_any_modulus_that_keeps_the_keys_together() -> None:
    """The report is (first hash, gcd of the differences): a task keyed modulo 14 is keyed
    modulo 7 and 2 as well, and the next batch's modulus is not known when it reports."""
    mine = _keys_of(5, 14, 5_000)
    report = _report(mine)
    assert report is not None and report["spark"][1] % 14 == 0
    assert is_keyed(report, key_hash="spark", tasks=7, partition=5)
    assert is_keyed(report, key_hash="spark", tasks=2, partition=1)


def test_keys_of_one_kafka_partition_are_keyed_under_kafkas_hash_only() -> None:
    mine = _keys_of(2, 12, 3_000, kafka=True)
    report = _report(mine)
    assert report is not None and set(report) == {"kafka"}  # Spark's and librdkafka's were dropped
    assert is_keyed(report, key_hash="kafka", tasks=12, partition=2)
    assert not is_keyed(report, key_hash="spark", tasks=12, partition=2)
    assert choose_keying([(2, report), (3, _report(_keys_of(3, 12, 3_000, kafka=True)))], 12) == ("kafka", [])


def test_keys_stop_being_read_once_no_partitioner_keeps_them_together() -> None:
    classes = KeyClasses("bytes")
    classes.feed(iter(lambda: b"k" + np.random.bytes(8), None))  # endless, and random: dropped at once
    assert classes.done() == {}


def test_modulo_one_task_0_is_keyed_without_hashing_and_no_other_is() -> None:
    assert is_keyed(_report([b"x", b"y"], None), key_hash="spark", tasks=1, partition=0)
    assert not is_keyed(_report([b"x"]), key_hash="spark", tasks=1, partition=1)
    assert is_keyed(None, key_hash="kafka", tasks=9, partition=4)  # a task that wrote no key


def test_the_commit_chooses_the_partitioner_most_tasks_are_keyed_under() -> None:
    spark_keyed = [(p, _report(_keys_of(p, 6, 500))) for p in range(6)]
    assert choose_keying(spark_keyed, 6) == ("spark", [])
    assert choose_keying([(p, _report([f"{p}-{i}".encode() for i in range(50)])) for p in range(6)], 6) == (
        "spark", [])


def test_tasks_out_of_partition_order_are_keyed_on_recorded_residues_each_given_once() -> None:
    """Spark's own Kafka source orders its tasks otherwise than the topic's partitions: task
    p held residue r(p). The next attempt records r, without the residue two tasks held
    (splits of one partition): neither of those is keyed, every other is, on its own residue."""
    held = {0: 4, 1: 0, 2: 5, 3: 1, 4: 1, 5: 2}  # tasks 3 and 4 both hold residue 1
    reports = [(p, _report(_keys_of(r, 6, 300, kafka=True))) for p, r in held.items()]
    key_hash, residues = choose_keying(reports, 6)
    assert (key_hash, residues) == ("kafka", [4, 0, 5, -1, -1, 2])
    for p, report in reports:
        assert is_keyed(report, key_hash="kafka", tasks=6, partition=p, residues=residues) == (p not in (3, 4))
    assert not is_keyed(reports[0][1], key_hash="kafka", tasks=6, partition=0)  # residue 4 is not task 0's
    assert not is_keyed(None, key_hash="kafka", tasks=6, partition=3, residues=residues)

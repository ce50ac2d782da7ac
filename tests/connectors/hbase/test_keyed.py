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


def _keyed_tasks(batch: list[list[bytes]], key_hash: str, residues: list[int]) -> list[int]:
    tasks = len(batch)
    return [p for p, keys in enumerate(batch)
            if is_keyed(_report(keys) if keys else None, key_hash=key_hash, tasks=tasks, partition=p,
                        residues=residues)]


def _random_batch(rnd: np.random.Generator, tasks: int, pool: list[bytes], how: str) -> list[list[bytes]]:
    """Keys of ``tasks`` tasks: by one partitioner (in order or shuffled), round-robin, or mixed."""
    key_hash = "kafka" if how.startswith("kafka") else "spark"
    hashes = kafka_hashes(pool) if key_hash == "kafka" else spark_hashes(pool, "bytes")
    owner = np.mod(hashes, tasks)
    if how.endswith("shuffled"):
        owner = rnd.permutation(tasks)[owner]
    batch: list[list[bytes]] = [[] for _ in range(tasks)]
    for key, o in zip(pool, owner.tolist()):
        if rnd.random() < 0.5:
            batch[o if how != "round-robin" else int(rnd.integers(tasks))].append(key)
    for _ in range(int(rnd.integers(0, 3))):  # a neighbour's key in another task
        batch[int(rnd.integers(tasks))].append(pool[int(rnd.integers(len(pool)))])
    return batch


def test_keyed_tasks_never_share_a_key_whatever_the_data_and_the_recorded_residues() -> None:
    """Property: the tasks one attempt judges keyed have pairwise disjoint keys, for batches
    partitioned by either hash (tasks in partition order or not), round-robin batches,
    stray keys from neighbours, and residues learnt from a previous batch of another
    shape; a retry (the same keys in another order) gets the same verdict. A mutant that
    records one residue twice breaks it."""
    rnd = np.random.default_rng(57)
    shapes = ["spark", "spark-shuffled", "kafka", "kafka-shuffled", "round-robin"]
    for _ in range(60):
        tasks = int(rnd.integers(2, 9))
        pool = [f"u{int(rnd.integers(10**6))}".encode() for _ in range(int(rnd.integers(5, 120)))]
        before = _random_batch(rnd, tasks, pool, shapes[int(rnd.integers(len(shapes)))])
        key_hash, residues = choose_keying(
            [(p, _report(keys) if keys else None) for p, keys in enumerate(before)], tasks)
        assert sorted(r for r in residues if r >= 0) == sorted({r for r in residues if r >= 0})
        batch = _random_batch(rnd, tasks, pool, shapes[int(rnd.integers(len(shapes)))])
        keyed = _keyed_tasks(batch, key_hash, residues)
        for i, p in enumerate(keyed):
            for q in keyed[i + 1:]:
                assert not set(batch[p]) & set(batch[q]), (p, q, key_hash, residues)
        assert _keyed_tasks([list(reversed(keys)) for keys in batch], key_hash, residues) == keyed
    # the mutant: residue 0 given to two tasks, each holding keys of residue 0
    zero = _keys_of(0, 3, 40)
    batch = [zero[:25], zero[15:], []]
    assert {0, 1} <= set(_keyed_tasks(batch, "spark", [0, 0, 2])) and set(batch[0]) & set(batch[1])

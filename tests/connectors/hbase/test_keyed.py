"""Keyed tasks (``_keyed``): what a task reports of its keys, and the per-task test. No server."""

from __future__ import annotations

import numpy as np
import pytest

from sparkbarrier.connectors._partitioners import kafka_hashes, spark_hashes
from sparkbarrier.connectors.hbase.sink._keyed import KeyClasses, choose_keying, keyed_block, levels
from sparkbarrier.connectors.hbase.sink._timestamps import task_block


def is_keyed(classes: dict[str, list[int]] | None, **how: object) -> bool:
    return keyed_block(classes, **how) is not None  # type: ignore[arg-type]


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
    assert choose_keying([(2, report), (3, _report(_keys_of(3, 12, 3_000, kafka=True)))], 12) == ("kafka", 12, [])


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
    assert choose_keying(spark_keyed, 6) == ("spark", 6, [])
    assert choose_keying([(p, _report([f"{p}-{i}".encode() for i in range(50)])) for p in range(6)], 6) == (
        "spark", 6, [])


def test_tasks_out_of_partition_order_are_keyed_on_recorded_residues_each_given_once() -> None:
    """Spark's own Kafka source orders its tasks otherwise than the topic's partitions: task
    p held residue r(p). The next attempt records r; the two tasks that held residue 1
    (splits of one partition) get ranks 0 and 1 in partition order (1 + 1 * 6 = 7), so
    every task is keyed, on its own residue, and the batch takes two blocks."""
    held = {0: 4, 1: 0, 2: 5, 3: 1, 4: 1, 5: 2}  # tasks 3 and 4 both hold residue 1
    reports = [(p, _report(_keys_of(r, 6, 300, kafka=True))) for p, r in held.items()]
    key_hash, modulus, residues = choose_keying(reports, 6)
    assert (key_hash, modulus, residues) == ("kafka", 6, [4, 0, 5, 1, 7, 2])
    assert levels(6, residues) == 3  # rank 1, and one block below rank 0
    blocks = [keyed_block(report, key_hash="kafka", tasks=6, partition=p, residues=residues) for p, report in reports]
    assert blocks == [1, 1, 1, 1, 2, 1]
    assert not is_keyed(reports[0][1], key_hash="kafka", tasks=6, partition=0)  # residue 4 is not task 0's
    assert not is_keyed(reports[1][1], key_hash="kafka", tasks=6, partition=3, residues=residues)


def test_min_partitions_splits_are_keyed_in_ranks_under_the_topics_partition_count() -> None:
    """barrier-kafka's ``minPartitions``: 4 Kafka partitions split in 3, tasks 3p..3p+2 in
    offset order. No task is keyed modulo the 12 tasks; modulo the gcd of the reports (the
    partition count) each split is, split i in block i: 3 blocks, not 1 + 12."""
    reports = [(3 * p + i, _report(_keys_of(p, 4, 400, kafka=True)[i::3])) for p in range(4) for i in range(3)]
    key_hash, modulus, residues = choose_keying(reports, 12)
    assert (key_hash, modulus) == ("kafka", 4)
    assert residues == [p + i * 4 for p in range(4) for i in range(3)]
    assert levels(modulus, residues) == 5  # ranks 0-2 in blocks 2-4, blocks 0-1 below them
    assert [keyed_block(r, key_hash="kafka", tasks=4, partition=t, residues=residues) for t, r in reports] == [
        2 + i for _ in range(4) for i in range(3)]


def test_splits_that_shift_stay_in_partition_order_within_the_blocks_below_and_above() -> None:
    """Splits that move between batches (Spark splits a partition by its share of the batch):
    recorded 2 + 2 + 2 tasks for partitions 0, 1, 2 of 3; now 1 + 3 + 2. Partition 1's
    splits start a task earlier (task 1, a block below its rank 0) and partition 0's lone
    split stays at rank 0: every partition's splits write in rising blocks, so a key's later
    record wins as in Kafka. A split more than the ranks' depth off its recorded range is
    not keyed and writes above them all: in order when it is late, out of order when it is
    early (docs/hbase-guarantees.md, limit 2)."""
    before = [(t, _report(_keys_of(t // 2, 3, 300, kafka=True)[t % 2::2])) for t in range(6)]
    key_hash, modulus, residues = choose_keying(before, 6)
    assert (modulus, residues, levels(modulus, residues)) == (3, [0, 3, 1, 4, 2, 5], 3)
    now = [0, 1, 1, 1, 2, 2]  # task -> the Kafka partition it reads
    keys = {p: _keys_of(p, 3, 300, kafka=True) for p in range(3)}
    reports = [(t, _report(keys[p][t::6])) for t, p in enumerate(now)]
    blocks = [keyed_block(r, key_hash="kafka", tasks=3, partition=t, residues=residues) for t, r in reports]
    assert blocks == [1, 0, 1, 2, 1, 2]
    late = [0, 0, 0, 0, 1, 2]  # partition 0 runs 2 tasks past its range, partition 1 starts 2 late
    reports = [(t, _report(keys[p][t::6])) for t, p in enumerate(late)]
    blocks = [keyed_block(r, key_hash="kafka", tasks=3, partition=t, residues=residues) for t, r in reports]
    assert blocks == [1, 2, None, None, None, 2]  # the late ones above every keyed block: still in order
    early = [0, 1, 2, 2, 2, 2]  # partition 2 starts 2 tasks early: deeper than the one block below
    reports = [(t, _report(keys[p][t::6])) for t, p in enumerate(early)]
    blocks = [keyed_block(r, key_hash="kafka", tasks=3, partition=t, residues=residues) for t, r in reports]
    assert blocks == [1, 0, None, 0, 1, 2]
    assert task_block(2, levels=3) > 2  # task 2 writes above tasks 3-5 of its partition: limit 2's case


def _blocks(batch: list[list[bytes]], key_hash: str, modulus: int, residues: list[int]) -> dict[int, int]:
    """Task -> the block it writes in, as ``_writer`` decides it (its rank if keyed, else above every rank)."""
    top = levels(modulus, residues)
    return {p: task_block(p, keyed_at=keyed_block(_report(keys) if keys else None, key_hash=key_hash, tasks=modulus,
                                                  partition=p, residues=residues), levels=top)
            for p, keys in enumerate(batch)}


def _random_batch(rnd: np.random.Generator, tasks: int, pool: list[bytes], how: str) -> list[list[bytes]]:
    """Keys of ``tasks`` tasks: by one partitioner (in order or shuffled), split like
    ``minPartitions`` (a partition's keys over consecutive tasks), round-robin, or mixed."""
    key_hash = "kafka" if how.startswith("kafka") else "spark"
    hashes = kafka_hashes(pool) if key_hash == "kafka" else spark_hashes(pool, "bytes")
    split = int(rnd.integers(2, 4)) if how.endswith("split") else 1
    parts = max(1, tasks // split)
    starts, widths = [p * split for p in range(parts)], [split] * parts
    if how.endswith("uneven"):  # Spark splits each partition by its share of the batch: 1-3 splits each
        parts = max(1, tasks // 2)
        cuts = sorted(rnd.choice(np.arange(1, tasks), parts - 1, replace=False).tolist()) if parts > 1 else []
        starts = [0, *cuts]
        widths = [b - a for a, b in zip(starts, [*cuts, tasks])]
    owner = np.mod(hashes, parts)
    if how.endswith("shuffled"):
        owner = rnd.permutation(tasks)[owner]
        starts, widths = list(range(tasks)), [1] * tasks
    batch: list[list[bytes]] = [[] for _ in range(tasks)]
    for key, o in zip(pool, owner.tolist()):
        for _ in range(int(rnd.integers(0, 3))):  # a key's rows: in none, one or two of its splits
            t = starts[o] + int(rnd.integers(widths[o])) if how != "round-robin" else int(rnd.integers(tasks))
            batch[min(t, tasks - 1)].append(key)
    for _ in range(int(rnd.integers(0, 3))):  # a neighbour's key in another task
        batch[int(rnd.integers(tasks))].append(pool[int(rnd.integers(len(pool)))])
    return [list(dict.fromkeys(keys)) for keys in batch]


def _one_class(keys: list[bytes], key_hash: str, modulus: int) -> int | None:
    """The residue every key hashes to under the attempt's keying, if one."""
    report = _report(keys) if keys else None
    found = report.get(key_hash) if report else None
    return found[0] % modulus if found is not None and found[1] % modulus == 0 else None


def _check(batch: list[list[bytes]], blocks: dict[int, int], key_hash: str, modulus: int,
           residues: list[int]) -> int:
    """Exactness (no two tasks of one block share a key) and order (the tasks of one residue
    write in rising blocks unless one lies more than the ranks' depth before the residue's
    recorded range); returns how many pairs of one residue were ordered."""
    tasks, ordered = len(batch), 0
    depth = (levels(modulus, residues) - 1) // 2
    first = {}
    for p, v in enumerate(residues):
        if v >= 0:
            first.setdefault(v % modulus, p)
    held = {p: _one_class(keys, key_hash, modulus) for p, keys in enumerate(batch) if keys}
    for p in range(tasks):
        for q in range(p + 1, tasks):
            if blocks[p] == blocks[q]:
                assert not set(batch[p]) & set(batch[q]), (p, q, key_hash, modulus, residues)
            c = held.get(p)
            if c is not None and c == held.get(q) and residues and c in first and first[c] - p <= depth:
                assert blocks[p] < blocks[q], (p, q, blocks, key_hash, modulus, residues)
                ordered += 1
    return ordered


def test_tasks_of_one_block_never_share_a_key_whatever_the_data_and_the_recorded_residues() -> None:
    """Property: no two tasks of one attempt write one key in one block, and the splits of
    one partition write in rising blocks (a key's later record wins) unless a split lies
    deeper before its residue's recorded range than the blocks below the ranks, for batches
    partitioned by either hash (tasks in partition order or not), ``minPartitions``-like
    splits, even or uneven (splits that shift between batches), round-robin batches, stray
    keys from neighbours, and the modulus and residues learnt from a previous batch of
    another shape; a retry (the same keys in another order) gets the same blocks. Two
    mutants break it: blocks by the recorded rank (the rule before 2026-12-02, out of order
    when splits shift) and one block for every split of a residue (shared keys)."""
    rnd = np.random.default_rng(57)
    shapes = ["spark", "spark-shuffled", "kafka", "kafka-shuffled", "kafka-split", "spark-split", "kafka-uneven",
              "kafka-uneven", "round-robin"]
    ranked = ordered = 0
    for _ in range(120):
        tasks = int(rnd.integers(2, 13))
        pool = [f"u{int(rnd.integers(10**6))}".encode() for _ in range(int(rnd.integers(5, 160)))]
        before = _random_batch(rnd, tasks, pool, shapes[int(rnd.integers(len(shapes)))])
        key_hash, modulus, residues = choose_keying(
            [(p, _report(keys) if keys else None) for p, keys in enumerate(before)], tasks)
        ranked += levels(modulus, residues) > 1
        batch = _random_batch(rnd, tasks, pool, shapes[int(rnd.integers(len(shapes)))])
        blocks = _blocks(batch, key_hash, modulus, residues)
        ordered += _check(batch, blocks, key_hash, modulus, residues)
        assert _blocks([list(reversed(keys)) for keys in batch], key_hash, modulus, residues) == blocks
    assert ranked and ordered  # the splits did give ranks, and ordered pairs
    # Recorded 2 + 2 splits of partitions 0 and 1 of 2; now 1 + 3: task 1 holds partition 1.
    keys = {p: _keys_of(p, 2, 60, kafka=True) for p in range(2)}
    before = [(t, _report(keys[t // 2][t % 2::2])) for t in range(4)]
    key_hash, modulus, residues = choose_keying(before, 4)
    batch = [keys[0], keys[1][:30], keys[1][20:45], keys[1][40:]]
    assert _check(batch, _blocks(batch, key_hash, modulus, residues), key_hash, modulus, residues) == 3
    by_rank = {p: residues[p] // modulus if _one_class(k, key_hash, modulus) == residues[p] % modulus else 9 + p
               for p, k in enumerate(batch)}
    assert not by_rank[1] < by_rank[2]  # the first mutant: partition 1's first split above its second
    one_block = {p: 0 if _one_class(k, key_hash, modulus) is not None else 9 + p for p, k in enumerate(batch)}
    assert one_block[1] == one_block[2] and set(batch[1]) & set(batch[2])  # the second: two splits, one key


def test_recorded_residues_travel_as_runs_and_come_back_the_same() -> None:
    """Every task reads the attempt's residues, so a wide batch's list of one int a task
    travels as runs of consecutive tasks (``residue_runs``: a topic's splits are O(partitions)),
    where shorter, through both records; what comes back is the list, whatever it held."""
    from sparkbarrier._exceptions import ProtocolError
    from sparkbarrier.connectors.hbase.sink._commit_table import AttemptRecord, CommitRecord
    from sparkbarrier.connectors.hbase.sink._keyed import residue_runs, residues_of_runs

    rnd = np.random.default_rng(939)
    for _ in range(300):
        tasks, step = int(rnd.integers(1, 60)), int(rnd.integers(1, 9))
        residues = [int(v) for v in rnd.integers(-1, 3 * step, tasks)]
        if rnd.random() < 0.5:  # split partitions: runs of v, v + step, ...
            residues = [(p // 4) % step + (p % 4) * step for p in range(tasks)]
        assert residues_of_runs(residue_runs(residues, step), step) == residues
        commit = CommitRecord("s", "t", 1, "q", 0, 0, 1, 1, tasks=tasks, key_residues=residues, key_modulus=step)
        attempt = AttemptRecord("q", 1, 5, 1, keyed_tasks=step, key_residues=residues)
        assert CommitRecord.from_bytes(commit.to_bytes()) == commit
        assert AttemptRecord.from_bytes(attempt.to_bytes()) == attempt
        assert AttemptRecord.from_bytes(attempt.to_bytes()).to_bytes() == attempt.to_bytes()  # checkAndPut compares bytes
    # 1,000 partitions in 10 splits: 10,000 tasks, 12 KB as runs (59 KB as a list)
    wide = [p + i * 1_000 for p in range(1_000) for i in range(10)]
    raw = AttemptRecord("q", 1, 5, 1, keyed_tasks=1_000, key_residues=wide).to_bytes()
    assert b"key_runs" in raw and len(raw) < 20_000
    for bad in ([3, 0, 2, 5], [2, 0, -1, 1], [1, 0, 0]):
        with pytest.raises(ProtocolError, match="key_runs"):
            residues_of_runs(bad, 1)


def test_residues_are_recorded_while_their_wire_form_fits_a_list_or_runs() -> None:
    """Spark's own Kafka source orders tasks otherwise than partitions: 3,000 tasks of one
    split each are recorded as a list (3,000 ints), 7,000 are not (no shorter runs: each
    task its own); 10,000 tasks of 1,000 partitions in 10 splits are, as 1,000 runs."""
    from sparkbarrier.connectors.hbase.sink._keyed import MAX_RESIDUE_INTS

    rnd = np.random.default_rng(3)
    for tasks, recorded in ((3_000, True), (7_000, False)):
        held = rnd.permutation(tasks).tolist()
        reports = [(p, {"kafka": [h, tasks]}) for p, h in enumerate(held)]
        assert bool(choose_keying(reports, tasks)[2]) == recorded, tasks
    split = [(t, {"kafka": [t // 10, 1_000]}) for t in range(10_000)]
    key_hash, modulus, residues = choose_keying(split, 10_000)
    assert (key_hash, modulus, len(residues)) == ("kafka", 1_000, 10_000) and 10_000 > MAX_RESIDUE_INTS

"""Deterministic timestamps: generations split on repeated row keys only."""

from __future__ import annotations

from sparkbarrier.connectors.hbase._timestamps import (
    GENERATION_MAX_ROWS, STRIDE, GenerationCounter, first_seq, seq_ceiling, seq_floor)


def test_repeated_key_starts_a_new_generation() -> None:
    g = GenerationCounter()
    assert [g.next(k) for k in [b"a", b"b", b"a", b"c", b"a", b"a"]] == [0, 0, 1, 1, 2, 3]


def test_generations_are_identical_on_replay() -> None:
    keys = [bytes([i % 7]) for i in range(100)]
    a, b = GenerationCounter(), GenerationCounter()
    assert [a.next(k) for k in keys] == [b.next(k) for k in keys]


def test_generation_size_is_bounded() -> None:
    g = GenerationCounter()
    gens = [g.next(i.to_bytes(4, "big")) for i in range(GENERATION_MAX_ROWS + 1)]
    assert gens[-1] == 1 and gens[-2] == 0


def test_sequence_ranges_do_not_overlap_and_start_above_wall_clock() -> None:
    assert seq_ceiling(5) == seq_floor(6) == 6 * STRIDE
    now_ms = 1_763_000_000_000
    assert seq_floor(first_seq(now_ms)) > now_ms


def test_tasks_of_one_batch_never_share_a_timestamp() -> None:
    first, second = GenerationCounter(0), GenerationCounter(1)
    keys = [b"k"] * 5  # the same key repeated in both tasks
    a = [first.next(k) for k in keys]
    b = [second.next(k) for k in keys]
    assert not set(a) & set(b)
    assert max(a) < min(b)  # the later split of a Kafka partition wins


def test_too_many_write_tasks_is_a_clear_error() -> None:
    import pytest

    from sparkbarrier import SinkError
    from sparkbarrier.connectors.hbase._timestamps import MAX_TASKS

    with pytest.raises(SinkError, match="coalesce"):
        GenerationCounter(MAX_TASKS)

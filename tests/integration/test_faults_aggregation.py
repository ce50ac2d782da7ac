"""Update-mode counts per key through ``foreachBatch(hbase_batch_writer)``, the driver SIGKILLed.

Kafka (``barrier-kafka``, or Spark's ``format("kafka")`` with ``commit_kafka_offsets``) →
``groupBy(id).count()`` in update mode → ``sparkbarrier.hbase_batch_writer`` (``_pipeline.py``
with ``sink="aggregate"``). One scenario per source is killed at each of its fault points
(:data:`POINTS`) in turn, each run on the same checkpoint (hits count per point, so each kill comes after
at least one more committed batch). After each kill: group offsets not ahead of the
sink's commit record, and the committed view == the counts of the records up to the
record's offsets. At the end: plain scan == committed view == the counts of the whole
topic; the as-of view of every committed batch == the counts up to its offsets; each
key has one ``d:n`` version per committed batch that counted it (a replay that wrote
again would add one); group offsets == end offsets; ``starting_offsets_from_sink`` gives
the end offsets.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import happybase
import pytest

from fault_kit import PipelineConfig, Scenario, wait_for

from sparkbarrier.connectors import starting_offsets_from_sink
from sparkbarrier.connectors.hbase import read_committed

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.kafka, pytest.mark.hbase]

N_RECORDS = 360
# Two write tasks per batch (spark.sql.shuffle.partitions=2), one commit per batch. Behind
# barrier-kafka every point of the batch writer and the source's; behind format("kafka") the
# writer's last point (committed, Spark's commit log not) and the listener's, where the two
# sources differ (offsets from Spark's own offset-log format, group commits by the listener):
# the writer's earlier points run the same code whichever source planned the batch. Each
# run is a Spark start (~25 s here), so the matrix is kept to what differs.
POINTS = {
    "barrier-kafka": ["batch_write.before_flush@3", "batch_write.after_flush_before_commit@2",
                      "batch_write.after_commit_before_return@2", "source.after_commitlog_before_kafka_commit@2"],
    "kafka": ["batch_write.after_commit_before_return@2", "listener.before_group_commit@2"],
}


def _counts(sc: Scenario, upto: dict[str, int] | None) -> dict[str, int]:
    """Records per key below ``upto`` (next offsets; None: all)."""
    return dict(Counter(r.key for offset, r in sc._indexed()
                        if upto is None or offset < upto.get(sc._channel(r), 0)))


def _view(sc: Scenario, **as_of: int) -> dict[str, int]:
    rows = read_committed(*sc.cfg.thrift, sc.cfg.table, sink_id=sc.cfg.sink_id, **as_of).to_pylist()
    return {r["id"]: r["n"] for r in rows}


def _plain(sc: Scenario) -> tuple[dict[str, int], dict[str, int]]:
    """The plain scan's counts, and the number of ``d:n`` versions per key."""
    conn = happybase.Connection(*sc.cfg.thrift, timeout=30_000)
    try:
        table = conn.table(sc.cfg.table)
        rows = {k.decode(): int.from_bytes(d[b"d:n"], "big", signed=True) for k, d in table.scan()}
        versions = {k: len(table.cells(k.encode(), b"d:n", versions=100)) for k in rows}
    finally:
        conn.close()
    return rows, versions


@pytest.mark.timeout(480)
@pytest.mark.parametrize("source", ["barrier-kafka", "kafka"])
def test_update_mode_counts_through_foreach_batch_survive_driver_kills_at_every_point(
        source: str, tmp_path: Path, unique_name, kafka_bootstrap: str, hbase_thrift: tuple[str, int],
        hbase_thrift2: tuple[str, int]) -> None:
    name = unique_name("agg")
    sc = Scenario(PipelineConfig(bootstrap=kafka_bootstrap, thrift=tuple(hbase_thrift),  # type: ignore[arg-type]
                                 thrift2=tuple(hbase_thrift2), topic=name,  # type: ignore[arg-type]
                                 group=f"{name}_group", table=name, sink_id=f"{name}_sink",
                                 checkpoint=str(tmp_path / "checkpoint"), max_offsets=40, source=source,
                                 sink="aggregate"), tmp_path)
    sc.fill_topic(N_RECORDS)
    for fault in POINTS[source]:
        crashed = sc.run(fault, timeout=150)
        assert crashed.killed, f"fault {fault} did not kill the driver:\n{crashed.log[-3000:]}"
        sc.check_group_not_ahead_of_sink()
        record = sc.commit_record()
        assert record is not None, f"nothing committed before {fault}"
        assert _view(sc) == _counts(sc, record.offsets), f"committed view after {fault}"
        assert record.offsets != sc.end_offsets(), f"{fault} came after the last batch"
    resumed = sc.run(timeout=150)
    assert resumed.returncode == 0, resumed.log[-3000:]

    end = sc.end_offsets()
    history = sc.history()
    assert history[-1].offsets == end
    assert [r.seq for r in history] == list(range(1, len(history) + 1))
    assert len({r.query_id for r in history}) == 1, "one query id across restarts"
    want = _counts(sc, None)
    plain, versions = _plain(sc)
    assert plain == want
    assert _view(sc) == want
    for record in history:
        assert _view(sc, as_of_batch=record.batch_id) == _counts(sc, record.offsets), f"as of {record.batch_id}"
    touched = Counter(key for batch in sc.batch_records(history) for key in batch)
    assert versions == dict(touched), "one d:n version per committed batch that counted the key"
    assert wait_for(lambda: sc.group_offsets() == end, 30, "group offsets == end offsets")
    # The commit record's offsets are the batch's, whichever source: a new query resumes there.
    resume = json.loads(starting_offsets_from_sink(*sc.cfg.thrift, sc.cfg.sink_id, bootstrap_servers=kafka_bootstrap))
    assert {f"{topic}:{p}": o for topic, parts in resume.items() for p, o in parts.items()} == end

"""Checkpoints on a real HDFS, and a driver that moves: nothing exactly-once needs is on its disk.

The devstack's NameNode and DataNode (``hdfs`` fixture) hold ``checkpointLocation``. Each
case kills the driver (SIGKILL of its JVM) at several fault points in turn, and between
runs wipes every driver-local directory (temp dirs, Spark's local dirs, the working
directory: ``PipelineConfig.local_dir``), as a driver rescheduled on another node finds
them. Then an AvailableNow drain. The driver-side Python workers reach HDFS through
WebHDFS (``connectors/storage/_files.py``), found here through ``SPARKBARRIER_WEBHDFS``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from fault_kit import PipelineConfig, Scenario

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.kafka, pytest.mark.hbase, pytest.mark.hdfs]

N_RECORDS = 300
# Three batches of 100, two write tasks each. Run 1 dies mid-write in batch 1 (its third
# task snapshot); run 2 replays batch 1 and dies after the sink committed batch 2, before
# Spark's commit log; run 3 dies while replaying that committed batch; the drain ends it.
KILLS = ["sink.before_flush@3", "sink.after_commit_before_commitlog@2", "sink.before_flush@1"]


def _scenario(tmp_path: Path, unique_name, hdfs, bootstrap: str, thrift: tuple[str, int],
              thrift2: tuple[str, int], **cfg: object) -> Scenario:
    name = unique_name("hdfsckpt")
    config = PipelineConfig(bootstrap=bootstrap, thrift=tuple(thrift), thrift2=tuple(thrift2),
                            topic=name, group=f"{name}_group", table=name, sink_id=f"{name}_sink",
                            checkpoint=f"{hdfs.uri}/checkpoints/{name}", local_dir=str(tmp_path / "driver-disk"),
                            **cfg)  # type: ignore[arg-type]
    return Scenario(config, tmp_path)


def _killed_repeatedly_on_a_wiped_disk(sc: Scenario, hdfs, kills: list[str]) -> None:
    env = {"SPARKBARRIER_WEBHDFS": hdfs.webhdfs}
    for i, fault in enumerate(kills):
        crashed = sc.run(f"{fault}", timeout=180, env=env)
        assert crashed.killed, f"fault {fault} did not kill the driver:\n{crashed.log[-3000:]}"
        assert "cannot record the Kafka offsets" not in crashed.log
        shutil.rmtree(sc.cfg.local_dir, ignore_errors=True)  # the next driver starts on an empty disk
        if sc.cfg.sink == "barrier-hbase":
            sc.check_group_not_ahead_of_sink()
            record = sc.commit_record()
            assert record is not None and record.offsets, f"kill {i}: the commit record holds no Kafka offsets"
            sc.check_exactly_once(upto=record.offsets)
        # A fault point fires once per state folder: the next kill gets its own.
        shutil.rmtree(sc.workdir / "faults", ignore_errors=True)
    drained = sc.run(timeout=180, env=env)
    assert drained.returncode == 0, drained.log[-3000:]
    shutil.rmtree(sc.cfg.local_dir, ignore_errors=True)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("source", ["kafka", "barrier-kafka"])
def test_hbase_sink_with_the_checkpoint_on_hdfs_survives_kills_and_moving_drivers(
        source: str, tmp_path: Path, unique_name, hdfs, kafka_bootstrap: str,
        hbase_thrift: tuple[str, int], hbase_thrift2: tuple[str, int], monkeypatch, capsys) -> None:
    """Spark's format("kafka") + commit_kafka_offsets, and barrier-kafka without marker columns:
    every commit record holds the batch's offsets (read from Spark's offset log on HDFS),
    the group is never ahead and ends at the topic's end, and a new query resumed from the
    sink's commit record on a new HDFS checkpoint continues exactly once."""
    from sparkbarrier import sink_status, starting_offsets_from_sink
    from sparkbarrier.__main__ import main
    from sparkbarrier.connectors.hbase import DEFAULT_COMMIT_TABLE, lineage

    sc = _scenario(tmp_path, unique_name, hdfs, kafka_bootstrap, hbase_thrift, hbase_thrift2, source=source)
    sc.fill_topic(N_RECORDS)
    _killed_repeatedly_on_a_wiped_disk(sc, hdfs, KILLS)
    sc.check_complete()
    assert sc.commit_record().offsets == sc.end_offsets()
    assert sink_status(*hbase_thrift, sc.cfg.sink_id, DEFAULT_COMMIT_TABLE).offsets == sc.end_offsets()
    # The status CLI reads Spark's offset log on HDFS; lineage names the offsets behind a cell.
    monkeypatch.setenv("SPARKBARRIER_WEBHDFS", hdfs.webhdfs)
    code = main(["status", "--sink-id", sc.cfg.sink_id, "--checkpoint-location", sc.cfg.checkpoint, "--json",
                 "--hbase", f"{hbase_thrift[0]}:{hbase_thrift[1]}"])
    assert code == 0
    status = json.loads(capsys.readouterr().out)
    assert status["checkpoint_log"]["last_completed"]["offsets"] == sc.end_offsets()
    key = next(iter(sc.expected_state()))
    cells = lineage(*hbase_thrift, sc.cfg.table, key, sink_id=sc.cfg.sink_id)
    assert cells and all(c.offsets_to for c in cells), cells

    # A new query on a new checkpoint, started from what the sink holds.
    sc.cfg.starting_offsets = starting_offsets_from_sink(*hbase_thrift, sc.cfg.sink_id,
                                                         bootstrap_servers=sc.cfg.bootstrap)
    sc.cfg.checkpoint = f"{hdfs.uri}/checkpoints/{sc.cfg.topic}-resumed"
    sc.fill_more(100)
    resumed = sc.run(timeout=180, env={"SPARKBARRIER_WEBHDFS": hdfs.webhdfs})
    assert resumed.returncode == 0, resumed.log[-3000:]
    sc.check_complete()


@pytest.mark.timeout(600)
def test_a_two_phase_commit_sink_keeps_its_ledger_beside_the_hdfs_checkpoint(
        tmp_path: Path, unique_name, hdfs, kafka_bootstrap: str, hbase_thrift: tuple[str, int],
        hbase_thrift2: tuple[str, int], monkeypatch) -> None:
    """The adapter's applied-batch ledger lives on HDFS by default: after kills on a wiped
    disk no batch is notified twice, and every commit receives its Kafka offsets (Spark's
    format("kafka"): no marker columns)."""
    from sparkbarrier.connectors.storage._files import folder

    record = tmp_path / "notifications.jsonl"
    sc = _scenario(tmp_path, unique_name, hdfs, kafka_bootstrap, hbase_thrift, hbase_thrift2, source="kafka",
                   sink="notify", record=str(record))
    sc.fill_topic(N_RECORDS)
    _killed_repeatedly_on_a_wiped_disk(sc, hdfs, KILLS)
    notes = [json.loads(line) for line in record.read_text().splitlines()]
    batches = [n["batch"] for n in notes]
    assert len(batches) == len(set(batches)), f"a batch was notified twice: {batches}"
    ids = [i for n in notes for i in n["ids"]]
    assert sorted(ids) == sorted(r.key for r in sc.records), "records lost or applied twice"
    assert all(n["offsets"] for n in notes), "a commit got no source offsets"
    assert notes[-1]["offsets"] == sc.end_offsets()
    monkeypatch.setenv("SPARKBARRIER_WEBHDFS", hdfs.webhdfs)
    ledger = folder(f"{sc.cfg.checkpoint}/sparkbarrier/notify-exactly-once")
    assert any(n.startswith("pending_checkpoints-") for n in ledger.names())

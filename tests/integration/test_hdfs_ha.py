"""Checkpoints on a real HDFS HA pair whose active NameNode dies: the folder calls and a running
Spark query follow the failover, and the sink's result stays exactly once.

The pair is this module's own (``devstack/_hdfs_ha.py``: two NameNodes of the nameservice
``devstack-ha`` with shared edits in a folder, one DataNode, a throw-away home on free
ports), started once for the module and stopped when its tests end; the shared HDFS is
never touched. A failover here is what an operator does after a crash: SIGKILL of the
active NameNode, then ``DFSHAAdmin -transitionToActive --forcemanual`` on the standby;
once, also the graceful ``-failover`` (the old active answers ``StandbyException``).
Both clients read the pair from its ``HADOOP_CONF_DIR`` alone (no
``SPARKBARRIER_WEBHDFS``): Spark's Hadoop client through
``ConfiguredFailoverProxyProvider``, sparkbarrier's WebHDFS layer through
``dfs.ha.namenodes.devstack-ha``. Every wait polls with a deadline.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from folder_calls import folder_calls
from polling import wait_for

from sparkbarrier.connectors.storage._files import WEBHDFS_ENV, Folder, folder
from sparkbarrier.connectors.storage._webhdfs_retry import RETRY_ENV
from sparkbarrier.devstack._hdfs import http_request
from sparkbarrier.devstack._hdfs_ha import NAMENODE_IDS, HaEndpoints, HdfsHaPair

pytestmark = [pytest.mark.slow, pytest.mark.hdfs]


@pytest.fixture(scope="module")
def ha_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HdfsHaPair, HaEndpoints]]:
    pair = HdfsHaPair(tmp_path_factory.mktemp("hdfs-ha") / "devstack-home")
    try:
        yield pair, pair.up()
    finally:
        pair.down()


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch, ha_pair: tuple[HdfsHaPair, HaEndpoints]) -> None:
    """The pair's client configuration is all either client gets (pipelines inherit it)."""
    monkeypatch.setenv("HADOOP_CONF_DIR", str(ha_pair[1].conf_dir))
    monkeypatch.delenv(WEBHDFS_ENV, raising=False)
    monkeypatch.setenv("HADOOP_USER_NAME", "sparkbarrier-test")


def _active(pair: HdfsHaPair) -> tuple[str, str]:
    """(the active NameNode, the other one)."""
    active = wait_for(lambda: next((nn for nn in NAMENODE_IDS if pair.state(nn) == "active"), None), timeout=30,
                      what="an active NameNode")
    return active, next(nn for nn in NAMENODE_IDS if nn != active)


@pytest.mark.timeout(180)
def test_folder_calls_follow_a_crash_failover_and_a_graceful_one(ha_pair, monkeypatch) -> None:
    """A loop of create + read + list runs through two failovers: the active killed and the
    standby promoted (the call in flight waits for the promotion and completes), then the
    restarted one made active again with ``-failover`` (the client's last NameNode now
    answers ``StandbyException`` and it moves on). No call fails, none is lost."""
    pair, endpoints = ha_pair
    monkeypatch.setenv(RETRY_ENV, "60")
    f = folder(f"{endpoints.uri}/tests/folder-{os.getpid()}-{time.time_ns()}")
    with folder_calls(f, join_timeout=90) as calls:
        done, failures = calls.done, calls.failures
        wait_for(lambda: len(done) >= 3 or failures, timeout=30, what="calls before the crash")
        dead, active = _active(pair)
        pair.kill(dead)
        crashed_at = time.monotonic()  # from here until the promotion no NameNode serves
        pair.transition_to_active(active)
        promoted_at = time.monotonic()
        wait_for(lambda: sum(s > promoted_at for _, s, _ in done) >= 3 or failures, timeout=60,
                 what="calls after the promotion")
        pair.start(dead)  # back as the standby
        before = len(done)
        pair.failover(active, dead)
        assert pair.state(dead) == "active" and pair.state(active) == "standby"
        wait_for(lambda: len(done) >= before + 3 or failures, timeout=60, what="calls after the graceful failover")
    assert failures == [], failures
    assert [n for n, _, _ in done] == list(range(len(done)))
    # The call in flight when the NameNode died waited for the promotion and completed.
    waited = [took for _, s, took in done if s <= crashed_at < s + took]
    assert waited and waited[0] > 0.5, f"no call waited through the crash: {waited}"
    assert f.names() == [f"{n:05d}" for n, _, _ in done]
    print(f"\nfolder calls: {len(done)}; the one in flight at the crash took {waited[0]:.1f} s "
          f"(the promotion took {promoted_at - crashed_at:.1f} s)")


def _connected(group: int, port: int) -> bool:
    """Whether a process of the process group ``group`` (the pipeline: its driver JVM) holds
    an established TCP connection to ``port`` on this machine, from ``/proc``: which process
    owns a connection is what the NameNode's metrics cannot say (they count the DataNode's
    and its WebHDFS clients' too, and lag by their refresh period)."""
    sockets = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if int(fields[2].rsplit(":", 1)[1], 16) == port and fields[3] == "01":  # ESTABLISHED
                    sockets.add(f"socket:[{fields[9]}]")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            if os.getpgid(int(pid)) == group and any(
                    os.readlink(f"/proc/{pid}/fd/{fd}") in sockets for fd in os.listdir(f"/proc/{pid}/fd")):
                return True
    return False


@pytest.mark.spark
@pytest.mark.kafka
@pytest.mark.hbase
@pytest.mark.timeout(300)
def test_a_query_with_its_checkpoint_on_the_ha_pair_follows_failovers_at_start_and_mid_commit(
        ha_pair, tmp_path: Path, unique_name, kafka_bootstrap: str, hbase_thrift: tuple[str, int],
        hbase_thrift2: tuple[str, int]) -> None:
    """Spark's ``format("kafka")`` into ``barrier-hbase``, ``checkpointLocation`` on
    ``hdfs://devstack-ha``; the sink reads each batch's offsets from Spark's offset log on
    the pair (WebHDFS) for its commit record. One run, two failovers:

    * while the query starts: the active NameNode dies before the driver JVM is up, and
      the standby is promoted only once the driver holds an RPC connection to it (its
      Hadoop client asked and was told "standby", and keeps failing over); only then can
      the query write its checkpoint's metadata, so its start waited through the failover;
    * while a batch commits: the next batch's offset log entry exists and its commit log
      entry does not when the active NameNode (the one promoted above) dies; the
      restarted other one is promoted, and that batch's commit lands afterwards.

    The query goes on without a restart; the result is exactly once (the committed view and
    a plain scan equal the records applied once, one version per batch, the group at the end).
    """
    from fault_kit import PipelineConfig, Scenario

    pair, endpoints = ha_pair
    name = unique_name("hdfsha")
    checkpoint = f"{endpoints.uri}/checkpoints/{name}"
    sc = Scenario(PipelineConfig(bootstrap=kafka_bootstrap, thrift=tuple(hbase_thrift), thrift2=tuple(hbase_thrift2),
                                 topic=name, group=f"{name}_group", table=name, sink_id=f"{name}_sink",
                                 checkpoint=checkpoint, source="kafka", max_offsets=40,
                                 local_dir=str(tmp_path / "driver-disk")), tmp_path)
    sc.fill_topic(360)  # 9 batches: time for a NameNode restart between the two failovers
    offsets, commits = folder(f"{checkpoint}/offsets"), folder(f"{checkpoint}/commits")
    seen: dict[str, object] = {}

    def batches(f: Folder) -> set[int]:
        return {int(n) for n in f.names() if n.isdigit()} if f.exists() else set()

    def failovers(alive: Any) -> None:  # fault_kit's handle on the pipeline: alive() and .pid
        # 1. While the query starts.
        first, second = _active(pair)
        pair.kill(first)
        wait_for(lambda: _connected(alive.pid, endpoints.rpc[second]) or not alive(), timeout=120,
                 what="the driver to ask the standby")
        assert alive(), "the pipeline ended before it reached HDFS"
        seen["asked_at"] = time.monotonic()
        pair.transition_to_active(second)
        seen["start_failover"] = time.monotonic()
        pair.start(first)  # back as the standby
        # 2. While a batch commits: its offsets are logged, its commit is not.
        known = batches(offsets)

        def in_flight() -> int | None:
            logged, committed = batches(offsets) - known, batches(commits)
            return next(iter(sorted(logged - committed)), None)

        batch = wait_for(lambda: in_flight() is not None or not alive(), timeout=120, what="a batch in flight")
        assert alive(), "the run ended before a batch was in flight after the restart"
        batch = in_flight()
        pair.kill(second)
        seen["commit_failover"] = (batch, time.time())
        pair.transition_to_active(first)

    env = {"HADOOP_CONF_DIR": str(endpoints.conf_dir), "HADOOP_USER_NAME": "sparkbarrier-test"}
    started = time.monotonic()
    run = sc.run(timeout=240, env=env, during=failovers)
    assert run.returncode == 0, run.log[-4000:]
    assert "commit_failover" in seen, "the second failover did not happen"
    batch, killed_at = seen["commit_failover"]  # type: ignore[misc]
    active, _ = _active(pair)
    code, _, body = http_request("GET", f"{endpoints.http[active]}/webhdfs/v1/checkpoints/{name}/commits/{batch}"
                                 "?op=GETFILESTATUS&user.name=sparkbarrier-test")
    assert code == 200, body
    committed_at = json.loads(body)["FileStatus"]["modificationTime"] / 1000
    assert committed_at > killed_at, f"batch {batch} committed before the failover"
    sc.check_complete()
    sc.check_final_tables()
    print(f"\nquery: the driver asked the standby {seen['asked_at'] - started:.1f} s into the run; batch {batch} "
          f"committed {committed_at - killed_at:.1f} s after the mid-commit crash; {len(batches(commits))} batches")

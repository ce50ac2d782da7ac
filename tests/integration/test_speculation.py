"""barrier-hbase under Spark's speculation on a real multi-process cluster, an executor SIGKILLed mid-write.

A standalone cluster of this machine: a master and two workers of one core each, the
workers on their own loopback addresses (127.0.0.2, 127.0.0.3) because Spark never
runs a speculative copy on the host of the original attempt (``local-cluster``'s
executors all share one host, so it never speculates); two executor JVMs with their own
Python workers, beside the driver. ``spark.speculation=true`` (tuned so that copies start), and the first attempt
of write task 0 straggles before its rows reach the sink, so Spark launches a copy
(attempt 1) of it in every batch; both copies write, the loser is killed asynchronously. While
the query runs, one executor is SIGKILLed after the first commit: its tasks run again
elsewhere, and whatever its copies had sent lands or not. The table must end as one clean
run leaves it (``fault_kit``: plain scan, committed view, one version per batch in its
range, group offsets at the end).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from fault_kit import PipelineConfig, Scenario, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.kafka, pytest.mark.hbase]


HOSTS = ("127.0.0.2", "127.0.0.3")
COPY = re.compile(r"Starting task \d+\.1 in stage")  # attempt 1 of a task: a speculative copy


def _executors() -> list[int]:
    """PIDs of the executor JVMs of this test's workers (their hosts are only this test's)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"org.apache.spark.executor.CoarseGrainedExecutorBackend" in args and any(
                h.encode() in args for h in HOSTS):
            found.append(int(proc.name))
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[str]:
    """``spark://`` URL of a master with two one-core workers on two loopback hosts."""
    import pyspark

    spark_class = Path(pyspark.__file__).parent / "bin" / "spark-class"
    port = _free_port()
    env = dict(os.environ, SPARK_HOME=str(Path(pyspark.__file__).parent), SPARK_NO_DAEMONIZE="1",
               SPARK_DAEMON_MEMORY="256m", PYSPARK_PYTHON=sys.executable)
    procs = []
    logs = []

    def start(name: str, *args: str, host: str) -> None:
        log = tmp_path / f"{name}.log"
        logs.append(log)
        procs.append(subprocess.Popen([str(spark_class), *args], env=dict(env, SPARK_LOCAL_IP=host),
                                      stdout=log.open("wb"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                      start_new_session=True))

    start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
          "--webui-port", str(_free_port()), host="127.0.0.1")
    url = f"spark://127.0.0.1:{port}"
    for i, host in enumerate(HOSTS):
        start(f"worker{i}", "org.apache.spark.deploy.worker.Worker", "--host", host, "--cores", "1", "--memory",
              "1g", "--webui-port", str(_free_port()), "--work-dir", str(tmp_path / f"work{i}"), url, host=host)
    try:
        assert wait_for(lambda: logs[0].read_text(errors="replace").count("Registering worker") >= 2, 90,
                        "two workers registered"), logs[0].read_text(errors="replace")[-2000:]
        yield url
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for pid in _executors():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.timeout(420)
def test_speculative_copies_and_a_killed_executor_leave_what_one_clean_run_leaves(
        tmp_path: Path, unique_name: Callable[[str], str], kafka_bootstrap: str, hbase_thrift, servers,
        standalone: str) -> None:
    name = unique_name("spec")
    cfg = PipelineConfig(bootstrap=kafka_bootstrap, thrift=tuple(hbase_thrift),  # type: ignore[arg-type]
                         thrift2=tuple(servers.hbase_thrift2) if servers.hbase_thrift2 else None,
                         topic=name, group=f"{name}_group", table=name, sink_id=f"{name}_sink",
                         checkpoint=str(tmp_path / "checkpoint"), master=standalone,
                         max_offsets=120, speculation=True, straggle_ms=1500)
    sc = Scenario(cfg, tmp_path)
    sc.fill_topic(600)
    killed: list[int] = []

    def kill_an_executor(alive: Callable[[], bool]) -> None:
        log = tmp_path / "run0.log"
        # Mid-write of a later batch: after the first commit, while copies are running.
        wait_for(lambda: not alive() or sc.commit_record() is not None, 240, "the first commit")
        wait_for(lambda: not alive() or COPY.search(log.read_text(errors="replace")) is not None, 120,
                 "a speculative copy after the first commit")
        pids = _executors()
        if alive() and pids:
            os.kill(pids[0], signal.SIGKILL)
            killed.append(pids[0])

    run = sc.run(during=kill_an_executor, timeout=400)
    assert run.returncode == 0, run.log[-4000:]
    assert killed, "no executor was killed while the query ran"
    assert COPY.search(run.log), "Spark started no speculative copy"
    sc.check_complete()


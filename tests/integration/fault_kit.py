"""Kill → restart harness for the fault suite: topic fill, pipeline runs, invariant checks.

A :class:`Scenario` is one topic + group + HBase table + sink id + checkpoint dir.
:func:`run_pipeline` runs ``_pipeline.py`` in its own session (its own driver JVM) with
an optional fault armed; :meth:`Scenario.check_*` state the invariants:

* committed history == records in order: per row key, the committed cell versions
  (below the read bound, outside gaps) of ``d:v`` and the row tombstone, sorted by
  timestamp, are exactly that key's records in topic order -- nothing lost, nothing
  applied twice (a replayed record would add a version at a new timestamp);
* committed view == the last record per key (absent if it was a delete);
* group offsets never ahead of the sink's commit record, and == end offsets at the end.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import happybase
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTP

from sparkbarrier._faults import FAULT_ENV, FAULT_STATE_DIR_ENV, fired
from sparkbarrier.connectors.hbase import read_committed
from sparkbarrier.connectors.hbase._commit_table import COMMIT_COLUMN, CommitRecord
from polling import wait_for  # noqa: F401  (re-exported for the tests)

__all__ = ["Record", "Scenario", "PipelineConfig", "RunResult", "run_pipeline", "wait_for"]

PIPELINE = Path(__file__).with_name("_pipeline.py")
PARTITIONS = 2
COMMIT_TABLE = "sparkbarrier_commits"


@dataclass(frozen=True)
class Record:
    key: str
    value: str
    op: str  # "upsert" | "delete"

    @property
    def partition(self) -> int:
        return int(self.key[1:]) % PARTITIONS


@dataclass
class PipelineConfig:
    bootstrap: str
    thrift: tuple[str, int]
    topic: str
    group: str
    table: str
    sink_id: str
    checkpoint: str
    max_offsets: int = 100
    starting_offsets: str = "earliest"
    master: str = "local[2]"


@dataclass
class RunResult:
    returncode: int
    log: str
    fault: str | None
    fired: bool

    @property
    def killed(self) -> bool:
        """The driver died by the fault (SIGKILL of the JVM breaks the Python driver)."""
        return self.fired and self.returncode != 0




def run_pipeline(cfg: PipelineConfig, workdir: Path, *, fault: str | None = None,
                 timeout: float = 150, env: dict[str, str] | None = None,
                 during: Callable[[Callable[[], bool]], None] | None = None) -> RunResult:
    """Run the pipeline once (own process group); kill the group if it outlives ``timeout``.

    ``during(alive)`` runs in this process while the pipeline runs (e.g. restart a
    server); ``alive()`` tells whether the pipeline still runs.
    """
    state = workdir / "faults"
    run_env = {k: v for k, v in os.environ.items() if k not in (FAULT_ENV, FAULT_STATE_DIR_ENV)}
    run_env.update(env or {})
    if fault:
        run_env[FAULT_ENV] = fault
        run_env[FAULT_STATE_DIR_ENV] = str(state)
    logs = sorted(workdir.glob("run*.log"))
    log_path = workdir / f"run{len(logs)}.log"
    with open(log_path, "wb") as out:
        proc = subprocess.Popen([sys.executable, str(PIPELINE), json.dumps(asdict(cfg))],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                env=run_env, start_new_session=True)
        started = time.monotonic()
        try:
            if during is not None:
                during(lambda: proc.poll() is None)
            code = proc.wait(max(1.0, timeout - (time.monotonic() - started)))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise AssertionError(f"pipeline ran over {timeout}s; log {log_path}:\n"
                                 + _tail(log_path)) from None
        finally:
            _kill_leftovers(proc.pid)
    name = fault.split("@")[0] if fault else None
    return RunResult(code, log_path.read_text(errors="replace"), name,
                     bool(name) and fired(name, state))


def _kill_leftovers(pgid: int) -> None:
    """The JVM and Python workers we started may outlive a killed driver: end that group."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _tail(path: Path, lines: int = 40) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


@dataclass
class Scenario:
    cfg: PipelineConfig
    workdir: Path
    records: list[Record] = field(default_factory=list)

    # -- setup -------------------------------------------------------------

    def fill_topic(self, n: int, keys: int = 40) -> None:
        """``n`` keyed records over ``keys`` keys; every 7th record deletes its key."""
        admin = KafkaAdminClient(bootstrap_servers=self.cfg.bootstrap)
        try:
            admin.create_topics({self.cfg.topic: {"num_partitions": PARTITIONS,
                                                  "replication_factor": 1}},
                                wait_for_metadata=True)
        finally:
            admin.close()
        self.records = [Record(f"k{i % keys}", f"v{i}", "delete" if i % 7 == 6 else "upsert")
                        for i in range(n)]
        producer = KafkaProducer(bootstrap_servers=self.cfg.bootstrap, linger_ms=5)
        try:
            for r in self.records:
                body = json.dumps({"id": r.key, "v": r.value, "op": r.op}).encode()
                producer.send(self.cfg.topic, key=r.key.encode(), value=body, partition=r.partition)
            producer.flush(30)
        finally:
            producer.close()

    def run(self, fault: str | None = None, **kw: Any) -> RunResult:
        return run_pipeline(self.cfg, self.workdir, fault=fault, **kw)

    # -- observations -----------------------------------------------------

    def _consumer(self) -> KafkaConsumer:
        return KafkaConsumer(bootstrap_servers=self.cfg.bootstrap, enable_auto_commit=False)

    def end_offsets(self) -> dict[str, int]:
        c = self._consumer()
        try:
            tps = [KafkaTP(self.cfg.topic, p) for p in range(PARTITIONS)]
            return {f"{tp.topic}:{tp.partition}": o for tp, o in c.end_offsets(tps).items()}
        finally:
            c.close()

    def group_offsets(self) -> dict[str, int]:
        admin = KafkaAdminClient(bootstrap_servers=self.cfg.bootstrap)
        try:
            found = admin.list_group_offsets({self.cfg.group: None}).get(self.cfg.group, {})
        finally:
            admin.close()
        return {f"{tp.topic}:{tp.partition}": m.offset for tp, m in found.items()
                if m is not None and m.offset >= 0}

    def commit_record(self) -> CommitRecord | None:
        conn = happybase.Connection(*self.cfg.thrift, timeout=30_000)
        try:
            if COMMIT_TABLE.encode() not in conn.tables():
                return None
            raw = conn.table(COMMIT_TABLE).row(self.cfg.sink_id.encode(), columns=[COMMIT_COLUMN])
        finally:
            conn.close()
        return CommitRecord.from_bytes(raw[COMMIT_COLUMN]) if COMMIT_COLUMN in raw else None

    def committed_history(self) -> dict[str, list[tuple[str, str]]]:
        """Per key: the committed (op, value) versions in timestamp order."""
        record = self.commit_record()
        assert record is not None, "the sink committed nothing"
        gaps = [(lo, hi) for lo, hi in record.gaps]

        def visible(ts: int) -> bool:
            return ts < record.read_bound and not any(lo <= ts < hi for lo, hi in gaps)

        conn = happybase.Connection(*self.cfg.thrift, timeout=30_000)
        out: dict[str, list[tuple[str, str]]] = {}
        try:
            table = conn.table(self.cfg.table)
            for key in sorted({r.key for r in self.records}):
                cells = [(ts, "upsert", v.decode()) for v, ts in
                         table.cells(key.encode(), b"d:v", versions=1000, include_timestamp=True)]
                cells += [(ts, "delete", "") for _, ts in
                          table.cells(key.encode(), b"d:_sb_deleted", versions=1000,
                                      include_timestamp=True)]
                history = [(op, v) for ts, op, v in sorted(cells) if visible(ts)]
                if history:
                    out[key] = history
        finally:
            conn.close()
        return out

    # -- invariants -------------------------------------------------------

    def expected_history(self, upto: dict[str, int] | None = None) -> dict[str, list[tuple[str, str]]]:
        """Per key: its records in topic order, only those below ``upto`` (next offsets)."""
        out: dict[str, list[tuple[str, str]]] = {}
        seen = {p: 0 for p in range(PARTITIONS)}
        for r in self.records:
            offset = seen[r.partition]
            seen[r.partition] += 1
            if upto is not None and offset >= upto.get(f"{self.cfg.topic}:{r.partition}", 0):
                continue
            out.setdefault(r.key, []).append((r.op, "" if r.op == "delete" else r.value))
        return out

    def check_exactly_once(self, upto: dict[str, int] | None = None) -> None:
        """Committed history == records (up to ``upto``) applied once each, in order."""
        got, want = self.committed_history(), self.expected_history(upto)
        lost = {k: v for k, v in want.items() if got.get(k) != v}
        assert got == want, f"committed history differs for {len(lost)} key(s), e.g. " + \
            str({k: (want.get(k), got.get(k)) for k in list(lost)[:3]})
        view = read_committed(*self.cfg.thrift, self.cfg.table, sink_id=self.cfg.sink_id)
        rows = {r["id"]: r["v"] for r in view.to_pylist()}
        last = {k: h[-1] for k, h in want.items()}
        assert rows == {k: v for k, (op, v) in last.items() if op == "upsert"}

    def check_group_not_ahead_of_sink(self) -> None:
        """After a crash: every group offset <= what the sink's commit record covers."""
        record = self.commit_record()
        covered = record.offsets if record is not None else {}
        group = self.group_offsets()
        ahead = {ch: (off, covered.get(ch, 0)) for ch, off in group.items()
                 if off > covered.get(ch, 0)}
        assert not ahead, f"group offsets ahead of the sink commit (group, sink): {ahead}"

    def check_complete(self) -> None:
        """After the final run: exactly-once over the whole topic, group == end offsets."""
        self.check_exactly_once()
        end = self.end_offsets()
        record = self.commit_record()
        assert record is not None and record.offsets == end
        assert wait_for(lambda: self.group_offsets() == end, 30, "group offsets == end offsets")

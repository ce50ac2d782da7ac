"""Kill → restart harness for the fault suite: topic fill, pipeline runs, invariant checks.

A :class:`Scenario` is one topic + group + HBase table + sink id + checkpoint dir.
:func:`run_pipeline` runs ``_pipeline.py`` in its own session (its own driver JVM) with
an optional fault armed; :meth:`Scenario.check_*` state the invariants:

* after a crash: the committed view == the records up to the sink's committed offsets
  applied once, in topic order (last op per key: upsert → value, delete → absent);
* at the end: a *plain* scan (what any HBase client sees) == the committed view == the
  final state, with no column besides ``d:v``; the visible ``d:v`` versions of every
  key are exactly one per committed batch that left it a value (from the sink's commit
  history: a delete drops the older versions, then the batch's last upsert adds one),
  each stamped inside its batch's ``[ts_lo, ts_hi)`` -- a replayed record would add a
  version or land outside its batch -- and every timestamp is near the wall clock;
* group offsets never ahead of the sink's commit record, and == end offsets at the end.
"""

from __future__ import annotations

import json
import os
import shutil
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

from sparkbarrier.devstack.faults import FAULT_ENV, FAULT_STATE_DIR_ENV, fired
from sparkbarrier.connectors.hbase import DEFAULT_COMMIT_TABLE, read_committed
from sparkbarrier.connectors.hbase.sink._commit_table import COMMIT_COLUMN, CommitRecord, read_history
from sparkbarrier.connectors.hbase.client._connection import HBaseConnection, connection_options
from sparkbarrier.connectors.kafka import committed_offsets
from polling import wait_for  # noqa: F401  (re-exported for the tests)

__all__ = ["Record", "Scenario", "PipelineConfig", "RunResult", "run_pipeline", "wait_for"]

PIPELINE = Path(__file__).with_name("_pipeline.py")
PARTITIONS = 2
COMMIT_TABLE = DEFAULT_COMMIT_TABLE
# Cell timestamps must stay this close to the wall clock of the run (HBase's own slop
# check rejects cells over 60 s ahead on the devstack).
_CLOCK_SLACK_MS = 120_000


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
    thrift2: tuple[str, int] | None  # the Thrift2 server: the table gets KEEP_DELETED_CELLS
    topic: str
    group: str
    table: str
    sink_id: str
    checkpoint: str
    max_offsets: int = 100
    starting_offsets: str = "earliest"
    master: str = "local[2]"
    gateways: tuple[tuple[str, int], ...] = ()  # several Thrift1 gateways: the sink gets them all
    # "barrier-kafka", or "kafka": Spark's own source, group commits by commit_kafka_offsets
    source: str = "barrier-kafka"
    # Spark's minPartitions (JVM source): each Kafka partition's range split over tasks
    min_partitions: int = 0
    # Every driver-local directory (temp dirs, Spark's local dirs, working directory) of a
    # run: a test wipes it between runs, as a driver rescheduled on another node finds it.
    local_dir: str = ""
    # "barrier-hbase", "notify" (tests/integration/notify_sink.py records its notifications), or
    # "aggregate": counts per key in update mode through foreachBatch(hbase_batch_writer)
    sink: str = "barrier-hbase"
    record: str = ""  # the notify sink's record file
    # spark.speculation=true, tuned so that copies start; the first attempt of write task 0
    # sleeps ``straggle_ms`` before its rows reach the sink (a straggler: its copy,
    # attempt 1, does not sleep), and TaskSetManager's INFO lines reach the log
    speculation: bool = False
    straggle_ms: int = 0


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
    server); ``alive()`` tells whether the pipeline still runs, ``alive.pid`` is its
    process group.
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
                during(_Alive(proc))
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


class _Alive:
    """``during``'s handle on the pipeline: call it to ask whether it still runs; ``pid`` is
    its process (and process group: it runs in its own session)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.pid = proc.pid
        self._proc = proc

    def __call__(self) -> bool:
        return self._proc.poll() is None


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
    started_ms: int = field(default_factory=lambda: int(time.time() * 1000))

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
        self.records = []
        self.fill_more(n, keys)

    def fill_more(self, n: int, keys: int = 40) -> None:
        """``n`` more records of the same shape, appended to the topic (and to ``records``)."""
        start = len(self.records)
        more = [Record(f"k{i % keys}", f"v{i}", "delete" if i % 7 == 6 else "upsert")
                for i in range(start, start + n)]
        self.records += more
        producer = KafkaProducer(bootstrap_servers=self.cfg.bootstrap, linger_ms=5)
        try:
            for r in more:
                body = json.dumps({"id": r.key, "v": r.value, "op": r.op}).encode()
                producer.send(self.cfg.topic, key=r.key.encode(), value=body, partition=r.partition)
            producer.flush(30)
        finally:
            producer.close()

    def run(self, fault: str | None = None, **kw: Any) -> RunResult:
        return run_pipeline(self.cfg, self.workdir, fault=fault, **kw)

    def crash_then_resume(self, fault: str, *, timeout: float = 150, mid_stream: bool = False) -> None:
        """Kill the driver at ``fault``; check what the crash left (group not ahead of the
        sink, the committed view exactly the committed records); run again on the same
        checkpoint to the end. ``mid_stream``: the crash must leave a commit record short
        of the end. The final checks are the caller's."""
        crashed = self.run(fault, timeout=timeout)
        assert crashed.killed, f"fault {fault} did not kill the driver:\n{crashed.log[-3000:]}"
        self.check_group_not_ahead_of_sink()
        record = self.commit_record()
        if mid_stream:
            assert record is not None, "a crash in the second batch left no sink commit record"
        if record is not None:
            self.check_exactly_once(upto=record.offsets)
        if mid_stream:
            assert record is not None and record.offsets != self.end_offsets(), "the crash came after the last batch"
        resumed = self.run(timeout=timeout)
        assert resumed.returncode == 0, resumed.log[-3000:]

    def crash_sequence(self, faults: list[str], *, timeout: float = 150) -> None:
        """Kill the driver at each of ``faults`` in turn on one checkpoint, then run it to
        the end. After each crash: group offsets not ahead of the sink, the committed
        view exactly the committed records, and the record short of the end (hits count
        per run, so each crash comes after at least one more committed batch). The final
        checks are the caller's.

        Why one sequence: every driver start costs ~25 s on two cores, so a matrix of
        points costs one start per point plus one drain, not two per point; each later
        point also recovers a checkpoint an earlier crash left, which a fresh scenario
        per point never did."""
        for fault in faults:
            crashed = self.run(fault, timeout=timeout)
            assert crashed.killed, f"fault {fault} did not kill the driver:\n{crashed.log[-3000:]}"
            self.check_group_not_ahead_of_sink()
            record = self.commit_record()
            assert record is not None, f"nothing committed before {fault}"
            self.check_exactly_once(upto=record.offsets)
            assert record.offsets != self.end_offsets(), f"{fault} came after the last batch"
        resumed = self.run(timeout=timeout)
        assert resumed.returncode == 0, resumed.log[-3000:]

    def resume_from_sink_after_checkpoint_loss(self, fault: str, thrift: tuple[str, int], *,
                                               timeout: float = 150) -> None:
        """Crash at ``fault`` mid-stream, lose the checkpoint, and run a fresh query that
        starts from the sink's commit record (``starting_offsets_from_sink``)."""
        from sparkbarrier.connectors import starting_offsets_from_sink

        crashed = self.run(fault, timeout=timeout)
        assert crashed.killed, crashed.log[-3000:]
        record = self.commit_record()
        assert record is not None and record.offsets != self.end_offsets()
        shutil.rmtree(self.cfg.checkpoint)
        self.cfg.starting_offsets = starting_offsets_from_sink(
            *thrift, self.cfg.sink_id, bootstrap_servers=self.cfg.bootstrap)
        self.cfg.checkpoint = str(self.workdir / "fresh-checkpoint")
        resumed = self.run(timeout=timeout)
        assert resumed.returncode == 0, resumed.log[-3000:]

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
            found = committed_offsets(admin, self.cfg.group)
        finally:
            admin.close()
        return {tp.channel: c.offset for tp, c in found.items()}

    def commit_record(self) -> CommitRecord | None:
        conn = happybase.Connection(*self.cfg.thrift, timeout=30_000)
        try:
            if COMMIT_TABLE.encode() not in conn.tables():
                return None
            raw = conn.table(COMMIT_TABLE).row(self.cfg.sink_id.encode(), columns=[COMMIT_COLUMN])
        finally:
            conn.close()
        return CommitRecord.from_bytes(raw[COMMIT_COLUMN]) if COMMIT_COLUMN in raw else None

    def history(self) -> list[CommitRecord]:
        """The sink's commit records, oldest first (one per committed batch)."""
        conn = HBaseConnection(connection_options(host=self.cfg.thrift[0], port=self.cfg.thrift[1]))
        try:
            return read_history(conn, COMMIT_TABLE, self.cfg.sink_id)
        finally:
            conn.close()

    def plain_scan(self) -> dict[str, dict[bytes, bytes]]:
        """What any HBase client sees: a plain scan (newest version per cell, deletes applied)."""
        conn = happybase.Connection(*self.cfg.thrift, timeout=30_000)
        try:
            return {k.decode(): data for k, data in conn.table(self.cfg.table).scan()}
        finally:
            conn.close()

    def versions(self) -> dict[str, list[tuple[str, int]]]:
        """Per key: the visible ``d:v`` versions (value, timestamp), oldest first."""
        conn = happybase.Connection(*self.cfg.thrift, timeout=30_000)
        out: dict[str, list[tuple[str, int]]] = {}
        try:
            table = conn.table(self.cfg.table)
            for key in sorted({r.key for r in self.records}):
                cells = table.cells(key.encode(), b"d:v", versions=1000, include_timestamp=True)
                if cells:
                    out[key] = [(v.decode(), ts) for v, ts in reversed(cells)]
        finally:
            conn.close()
        return out

    def committed_view(self) -> dict[str, str]:
        view = read_committed(*self.cfg.thrift, self.cfg.table, sink_id=self.cfg.sink_id)
        return {r["id"]: r["v"] for r in view.to_pylist()}

    # -- invariants -------------------------------------------------------

    def _indexed(self) -> list[tuple[int, Record]]:
        """``(offset in its partition, record)`` in topic order."""
        seen = {p: 0 for p in range(PARTITIONS)}
        out = []
        for r in self.records:
            out.append((seen[r.partition], r))
            seen[r.partition] += 1
        return out

    def _channel(self, r: Record) -> str:
        return f"{self.cfg.topic}:{r.partition}"

    def expected_state(self, upto: dict[str, int] | None = None) -> dict[str, str]:
        """The records (only those below ``upto``, next offsets) applied once in topic order."""
        state: dict[str, str] = {}
        for offset, r in self._indexed():
            if upto is not None and offset >= upto.get(self._channel(r), 0):
                continue
            if r.op == "delete":
                state.pop(r.key, None)
            else:
                state[r.key] = r.value
        return state

    def batch_records(self, history: list[CommitRecord]) -> list[dict[str, list[Record]]]:
        """Per committed batch (``history`` order): each key's records in it, in topic order.

        A batch covers the offsets (previous record's offsets, its own offsets].
        """
        indexed = self._indexed()
        out: list[dict[str, list[Record]]] = []
        before: dict[str, int] = {}
        for record in history:
            batch: dict[str, list[Record]] = {}
            for offset, r in indexed:
                ch = self._channel(r)
                if before.get(ch, 0) <= offset < record.offsets.get(ch, 0):
                    batch.setdefault(r.key, []).append(r)
            out.append(batch)
            before = dict(record.offsets)
        return out

    def expected_versions(self, history: list[CommitRecord]) -> dict[str, list[tuple[str, int]]]:
        """Per key: the visible versions the committed batches should leave, oldest first.

        Each value comes with the index (in ``history``) of the batch that wrote it.
        Inside a batch a key's records are netted: a delete drops every older version,
        then the last upsert after the last delete (or, without a delete, the batch's
        last upsert) adds one version.
        """
        out: dict[str, list[tuple[str, int]]] = {}
        for i, batch in enumerate(self.batch_records(history)):
            for key, recs in batch.items():
                versions = out.setdefault(key, [])
                deletes = [j for j, r in enumerate(recs) if r.op == "delete"]
                if deletes:
                    versions.clear()
                    recs = recs[deletes[-1] + 1:]
                upserts = [r for r in recs if r.op == "upsert"]
                if upserts:
                    versions.append((upserts[-1].value, i))
        return {k: v for k, v in out.items() if v}

    def check_exactly_once(self, upto: dict[str, int] | None = None) -> None:
        """Committed view == the records up to ``upto`` (next offsets) applied once, in order."""
        want, got = self.expected_state(upto), self.committed_view()
        assert got == want, "committed view differs: " + _diff(want, got)

    def check_final_tables(self) -> None:
        """Plain scan == committed view == final state; every version inside its batch."""
        want = self.expected_state()
        plain = self.plain_scan()
        extra_columns = {k: sorted(set(d) - {b"d:v"}) for k, d in plain.items() if set(d) != {b"d:v"}}
        assert not extra_columns, f"plain scan shows columns besides d:v: {dict(list(extra_columns.items())[:3])}"
        got_plain = {k: d[b"d:v"].decode() for k, d in plain.items()}
        assert got_plain == want, "plain scan differs: " + _diff(want, got_plain)
        got_view = self.committed_view()
        assert got_view == want, "committed view differs: " + _diff(want, got_view)

        history = self.history()
        assert history and [r.seq for r in history] == list(range(1, len(history) + 1)), \
            f"history sequences {[r.seq for r in history]}"
        assert history[-1] == self.commit_record()
        ranges = [(r.ts_lo, r.ts_hi) for r in history]
        assert all(lo <= hi for lo, hi in ranges) and all(
            a[1] <= b[0] for a, b in zip(ranges, ranges[1:])), f"batch timestamp ranges overlap: {ranges}"
        batches = self.batch_records(history)
        actual = self.versions()
        # Every visible version lies in the range of a committed batch that upserted that
        # value for that key after the batch's last delete of it, in topic order; the
        # newest version of each batch is the batch's net value; the batches seen are
        # exactly those expected_versions keeps. A record applied twice (a replay at new
        # timestamps) breaks this.
        expected_batches = {k: [i for _, i in vs] for k, vs in self.expected_versions(history).items()}
        wrong: dict[str, Any] = {}
        for key, vs in actual.items():
            placed: list[tuple[int, int]] = []  # (batch index, position of the upsert in the batch)
            for value, ts in vs:
                i = next((j for j, (lo, hi) in enumerate(ranges) if lo <= ts < hi), None)
                recs = batches[i].get(key, []) if i is not None else []
                deletes = [j for j, r in enumerate(recs) if r.op == "delete"]
                start_at = deletes[-1] + 1 if deletes else 0
                pos = next((j for j in range(len(recs) - 1, start_at - 1, -1)
                            if recs[j].op == "upsert" and recs[j].value == value), None)
                if i is None or pos is None or (placed and (i, pos) <= placed[-1]):
                    wrong[key] = (value, ts, f"batch seq {history[i].seq}" if i is not None else "in no batch")
                    break
                placed.append((i, pos))
            if key in wrong:
                continue
            seen = sorted({i for i, _ in placed})
            if seen != expected_batches.get(key, []):
                wrong[key] = ("versions from batches", seen, "expected", expected_batches.get(key, []))
                continue
            for i in seen:
                last_pos = max(pos for j, pos in placed if j == i)
                recs = batches[i][key]
                if last_pos != max(j for j, r in enumerate(recs) if r.op == "upsert"):
                    wrong[key] = ("newest version of batch seq", history[i].seq, "is not its last upsert")
                    break
        assert not wrong, f"versions not written by their batch: {dict(list(wrong.items())[:3])}; ranges {ranges}"

        now = int(time.time() * 1000)
        stamps = [ts for vs in actual.values() for _, ts in vs]
        stamps += [t for r in history for t in (r.ts_lo, r.ts_hi - 1)]
        far = [ts for ts in stamps if not self.started_ms - _CLOCK_SLACK_MS <= ts <= now + _CLOCK_SLACK_MS]
        assert not far, (f"timestamps far from the wall clock (run {self.started_ms}..{now} ms): "
                         f"{far[:5]}")

    def check_one_version_per_batch(self) -> None:
        """The visible ``d:v`` versions == one per committed batch that left the key a value.

        Rows are netted per key inside a task, so a batch adds at most one visible
        version per key: :meth:`expected_versions`, each inside its batch's range.
        """
        history = self.history()
        expected = self.expected_versions(history)
        actual = self.versions()
        got = {k: [v for v, _ in vs] for k, vs in actual.items()}
        want = {k: [v for v, _ in vs] for k, vs in expected.items()}
        if got != want:
            ranges = [(r.ts_lo, r.ts_hi) for r in history]
            keys = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
            detail = {k: {"want": expected.get(k), "got (value, ts, batch)": [
                (v, ts, next((j for j, (lo, hi) in enumerate(ranges) if lo <= ts < hi), None))
                for v, ts in actual.get(k, [])]} for k in keys[:3]}
            raise AssertionError(f"d:v versions differ for {len(keys)} key(s) (batch = index in the "
                                 f"history, ranges {ranges}): {detail}")

    def check_group_not_ahead_of_sink(self) -> None:
        """After a crash: every group offset <= what the sink's commit record covers."""
        record = self.commit_record()
        covered = record.offsets if record is not None else {}
        group = self.group_offsets()
        ahead = {ch: (off, covered.get(ch, 0)) for ch, off in group.items()
                 if off > covered.get(ch, 0)}
        assert not ahead, f"group offsets ahead of the sink commit (group, sink): {ahead}"

    def check_complete(self, *, one_task_per_key: bool = True) -> None:
        """After the final run: exactly-once over the whole topic, group == end offsets.

        ``one_task_per_key=False`` (``minPartitions``): a key in several splits of one
        batch has one version per split, in a run without failures too; every version
        is still checked against its batch and Kafka order (:meth:`check_final_tables`).
        """
        self.check_final_tables()
        end = self.end_offsets()
        record = self.commit_record()
        assert record is not None and record.offsets == end
        assert wait_for(lambda: self.group_offsets() == end, 30, "group offsets == end offsets")
        if one_task_per_key:
            self.check_one_version_per_batch()


def _diff(want: dict[str, Any], got: dict[str, Any]) -> str:
    keys = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
    return f"{len(keys)} key(s), e.g. (want, got) " + str({k: (want.get(k), got.get(k)) for k in keys[:3]})

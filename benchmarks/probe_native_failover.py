"""How long each compiled-reader range read waits when a partition leader is SIGKILLed.

    .venv/bin/python benchmarks/probe_native_failover.py [--no-pool] [--kill-after-s 30]
        [--down-s 20] [--after-s 60] [--debug broker,topic,fetch,metadata] [--log FILE]

Why: bench_failover.py measures a whole query's stall; this probe takes Spark away and
times the executor side alone, where issue 44 points (the default reader stalled for
about a minute after a leader SIGKILL while the other clients rode through). On a
3-node cluster with Kafka's default broker settings (its own home, stopped at the end):
a 4-partition topic (RF 3, min ISR 2), an idempotent acks=all producer at ~250 records/s,
and a loop that plays Spark's part once a second: end offsets from a kafka-python client
set up as the planner's (``reconnect_backoff_max_ms`` 1000), then one range per partition
(``maxOffsetsPerTrigger`` 1000 split evenly) read through ``read_range`` on the compiled
path by two threads (``local[2]``), the consumers pooled between reads as in one Python
worker (``--no-pool``: ``kafkaConsumer.cacheTimeoutMs=0``). After ``--kill-after-s`` the
leader of partition 0 is SIGKILLed and started again ``--down-s`` later.

Printed: every read that took over 1 s (partition, when it started relative to the
kill, how long, its leader then), each lookup's time, and the longest gap between
completed rounds. ``--debug`` turns on librdkafka's debug contexts in the compiled
consumers; their lines go, timestamped relative to the kill, to ``--log``.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests" / "integration"), str(HERE.parent / "tests")]

from failover_kit import _Producer  # noqa: E402

PARTITIONS = 4
MAX_OFFSETS = 1000


class _Clock:
    """Seconds relative to the kill (negative before it)."""

    def __init__(self) -> None:
        self.kill_at: float | None = None
        self.start = time.monotonic()

    def now(self) -> float:
        base = self.kill_at if self.kill_at is not None else self.start
        return time.monotonic() - base


class _RelativeTime(logging.Formatter):
    def __init__(self, clock: _Clock) -> None:
        super().__init__("%(rel)+8.3f %(threadName)s %(message)s")
        self.clock = clock

    def format(self, record: logging.LogRecord) -> str:
        record.rel = self.clock.now()
        return super().format(record)


def _debug_settings(contexts: str) -> None:
    """librdkafka's debug contexts on every compiled consumer the probe makes."""
    from sparkbarrier.connectors.kafka.reader import _native_reader

    plain = _native_reader.settings

    def with_debug(options):  # type: ignore[no-untyped-def]
        return {**plain(options), "debug": contexts}

    _native_reader.settings = with_debug  # type: ignore[assignment]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-pool", action="store_true")
    parser.add_argument("--kill-after-s", type=float, default=30.0)
    parser.add_argument("--down-s", type=float, default=20.0)
    parser.add_argument("--after-s", type=float, default=60.0,
                        help="keep reading this long after the kill")
    parser.add_argument("--debug", default="")
    parser.add_argument("--log", default="probe_native_failover.log")
    parser.add_argument("--profile", default="broker-defaults")
    args = parser.parse_args(argv)

    from kafka import KafkaConsumer, TopicPartition as KafkaTP
    from pyspark.sql.pandas.types import to_arrow_schema

    from sparkbarrier.connectors.kafka import parse_source_options, source_schema
    from sparkbarrier.connectors.kafka.reader._native_reader import POOL
    from sparkbarrier.connectors.kafka.reader._partition_reader import KafkaRangePartition, read_range
    from sparkbarrier.devstack._kafka_cluster import KafkaCluster

    clock = _Clock()
    handler = logging.FileHandler(args.log, mode="w")
    handler.setFormatter(_RelativeTime(clock))
    for name in ("sparkbarrier.connectors.kafka", "probe"):
        logging.getLogger(name).addHandler(handler)
        logging.getLogger(name).setLevel(logging.DEBUG)
    probe_log = logging.getLogger("probe")
    if args.debug:
        _debug_settings(args.debug)

    out: list[str] = []

    def say(line: str) -> None:
        out.append(line)
        probe_log.info("%s", line)
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    with tempfile.TemporaryDirectory(prefix="probe-failover-") as tmp:
        cluster = KafkaCluster(Path(tmp) / "cluster-home", profile=args.profile)
        try:
            cluster.up()
            topic = cluster.create_topic(f"probe_{uuid.uuid4().hex[:8]}", PARTITIONS)
            producer = _Producer(cluster.bootstrap, topic, per_tick=25, tick_s=0.1)
            producer.start()
            options = parse_source_options({
                "kafka.bootstrap.servers": cluster.bootstrap, "subscribe": topic,
                "commitOffsets": "false", "kafkaConsumer.client": "native",
                **({"kafkaConsumer.cacheTimeoutMs": "0"} if args.no_pool else {})})
            schema = to_arrow_schema(source_schema(False), timezone="UTC")
            planner = KafkaConsumer(bootstrap_servers=cluster.bootstrap.split(","),
                                    reconnect_backoff_max_ms=1000)
            tps = [KafkaTP(topic, p) for p in range(PARTITIONS)]
            pos = dict.fromkeys(range(PARTITIONS), 0)
            leaders = {p: cluster.leader(topic, p) for p in range(PARTITIONS)}
            say(f"leaders {leaders}, pool {'off' if args.no_pool else 'on'}")
            killed: list[int] = []
            done_at: list[float] = []
            slow: list[str] = []

            def read(part: KafkaRangePartition) -> int:
                started = clock.now()
                n = sum(b.num_rows for b in read_range(options, part, schema))
                took = clock.now() - started
                if took > 1.0:
                    slow.append(f"read p{part.partition} [{part.start},{part.end}) started "
                                f"{started:+.1f} s, took {took:.1f} s")
                    say(slow[-1])
                return n

            def killer() -> None:
                time.sleep(args.kill_after_s)  # the fault's time, not a wait for a condition
                victim = cluster.leader(topic, 0)
                killed.append(victim)
                clock.kill_at = time.monotonic()
                cluster.kill(victim)
                say(f"killed node {victim} (leader of p0); leaders were {leaders}")
                time.sleep(args.down_s)
                say(f"starting node {victim} again")
                cluster.start(victim)
                say(f"node {victim} serving again")

            threading.Thread(target=killer, daemon=True).start()
            batch = 0
            with ThreadPoolExecutor(2, thread_name_prefix="task") as tasks:
                while clock.kill_at is None or clock.now() < args.after_s:
                    tick = time.monotonic()
                    asked = clock.now()
                    ends = planner.end_offsets(tps)
                    lookup = clock.now() - asked
                    if lookup > 1.0:
                        say(f"end-offset lookup started {asked:+.1f} s took {lookup:.1f} s")
                    share = MAX_OFFSETS // PARTITIONS
                    parts = [KafkaRangePartition(topic, p, pos[p], min(ends[tp], pos[p] + share),
                                                 checkpoint_id=batch, timestamp_ms=0,
                                                 emit_barrier=False)
                             for p, tp in enumerate(tps)]
                    list(tasks.map(read, parts))
                    for part in parts:
                        pos[part.partition] = part.end
                    done_at.append(clock.now())
                    batch += 1
                    time.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))  # the trigger
            gaps = [b - a for a, b in zip(done_at, done_at[1:]) if b > 0]
            say(f"rounds {batch}, pool hits {POOL.hits} misses {POOL.misses}, longest gap "
                f"between rounds after the kill {max(gaps or [0]):.1f} s")
            planner.close()
            producer.finish()
        finally:
            POOL.close()
            cluster.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())

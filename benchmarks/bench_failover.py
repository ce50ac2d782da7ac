"""How long a broker failure stalls a query, per read path, beside Spark's JVM source.

    .venv/bin/python benchmarks/bench_failover.py [--rounds 2] [--broker-defaults] [--down-s 20]
        [--partitions 2] [--rate 200] [--max-offsets N] [--sink parquet|foreachBatch]
        [--kill-after-s S] [--no-pool-path] [--faults leader,coordinator,rolling]
    .venv/bin/python benchmarks/bench_failover.py --issue44 [--rounds 2]

Why: on a multi-broker cluster a leader kill, a coordinator kill or a rolling restart
must not fail a query (tests/integration/test_kafka_failover.py asserts that); what is
left is the stall: how long batches stop completing while the cluster elects new
leaders. The goal is no longer than Spark's own Kafka source in the same run.

Each round starts the devstack's 3-broker cluster (replication factor 3, min ISR 2), a
producer writing ~200 records/s all along, and four queries at once (1 s trigger, each
into its own Parquet sink): ``barrier-kafka`` on the ``native``, ``confluent`` and
``kafka-python`` paths, and ``format("kafka")`` + ``commit_kafka_offsets``. Then: SIGKILL
the leader of partition 0 (started again after the measurement window), SIGKILL the
broker coordinating the groups, and restart each broker in turn. The stall of a fault
is the longest gap between two completed batches from the fault until the window ends
(two batches after the cluster is healthy again). Reported per fault and path: seconds,
and the ratio to the JVM source in the same round.

``--broker-defaults``: the same, on a cluster with Kafka's own failover timings
(``broker.session.timeout.ms`` 9 s, ``replica.lag.time.max.ms`` 30 s, 50
``__consumer_offsets`` partitions; the devstack's are 4 s, 5 s and 6), as users' clusters
run; the durability settings stay (RF 3, min ISR 2). Why: a client that backs off from a
dead broker for longer than the devstack's 4 s fencing hides behind it (issue 33 saw
20-59 s stalls on 9 s; benchmarks/RESULTS.md, 2026-11-26, has the cause). That cluster
lives in its own home under the run's temporary directory, so the tests' devstack
cluster is left alone, and it is stopped at the end. ``--down-s 20``: a killed broker
comes back 20 s after the kill, inside the measured window.

``--issue44``: issue 44's setup, where the default reader stalled for about a minute:
Kafka's default broker settings, a 4-partition topic, ~250 records/s, every query
with ``maxOffsetsPerTrigger`` 1000 into a ``foreachBatch`` sink, the leader SIGKILLed
30 s into the queries' life (``--kill-after-s``: counted from their start, so the pool
is young) and back after 20 s, then the coordinator, same; and a fifth query, the
compiled reader with its consumer pool off (``--no-pool-path``), beside the four.
Without ``--kill-after-s`` the leader dies once every query completed 3 batches.

``--issue50``: issue 50's setup, where the default reader stalled 52-56 s (the JVM
source 23 s): as ``--issue44`` (Kafka's defaults, 4 partitions, ~250 records/s,
``maxOffsetsPerTrigger`` 1000, ``foreachBatch``), but the leader of partition 0 dies once
every query completed its first 4 batches (``--kill-after-batches``; ~22 s into the
query), down 20 s, then the coordinator, same; the queries are the default reader,
``confluent`` and the JVM source (``--paths`` picks others). Every Kafka call of the
planner and of the read tasks that waits 1 s or more is written to a file
(``SPARKBARRIER_KAFKA_WAITS``, :mod:`sparkbarrier.connectors.kafka.client._waits`) and listed
per fault: which call, which partition and broker, how long.

``--solo``: as the issue's user ran it, one query per run: each path of a round runs in
a process of its own (a fresh Spark application with that one query, then the JVM
source's, ...) against the same cluster, healed between runs. ``--leader-is-controller``:
partition 0 is created led by the active KRaft controller, so the leader kill also
kills the controller. The ``freeze`` fault SIGSTOPs partition 0's leader instead
(a broker that holds its connections and accepts new ones but answers nothing, as a
long GC pause or a stopped VM) and SIGCONTs it after ``--down-s``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests" / "integration"), str(HERE.parent / "tests")]

from failover_kit import NO_POOL, PATHS, FailoverRun  # noqa: E402

FAULTS = ("leader", "freeze", "coordinator", "rolling")
DEFAULT_FAULTS = ",".join(f for f in FAULTS if f != "freeze")


def _spark():
    from pyspark.sql import SparkSession

    from sparkbarrier.devstack.jvm_kafka import jvm_kafka_jars  # the JVM source's jars

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # loopback only, as the tests' session
    return (SparkSession.builder.master("local[2]").appName("bench-failover")
            .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.jars", jvm_kafka_jars())
            .config("spark.sql.shuffle.partitions", "2").getOrCreate())


def _waits_between(start_wall: float, end_wall: float) -> list[dict]:
    """The recorded slow Kafka calls (``SPARKBARRIER_KAFKA_WAITS``) that overlap the window."""
    path = os.environ.get("SPARKBARRIER_KAFKA_WAITS")
    if not path or not os.path.exists(path):
        return []
    found = []
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            try:
                w = json.loads(line)
            except ValueError:
                continue
            if w["at"] >= start_wall and w["at"] - w["took_s"] <= end_wall:
                found.append(w)
    return sorted(found, key=lambda w: -w["took_s"])


def _report_waits(fault: str, since_wall: float, until_wall: float) -> None:
    waits = _waits_between(since_wall, until_wall)
    print(f"  {fault}: {len(waits)} Kafka calls of 1 s or more (longest first):", flush=True)
    for w in waits[:12]:
        start = w["at"] - w["took_s"] - since_wall
        print(f"    {w['took_s']:6.1f} s from +{start:5.1f} s  pid {w['pid']} {w['where']}: "
              f"{w['call']} of {w['partition']} on {w['broker']}", flush=True)


def _paths(args: argparse.Namespace) -> tuple[str, ...]:
    if args.paths:
        chosen = tuple(p for p in args.paths.split(",") if p)
        if "jvm" not in chosen and not args.cluster_home:  # a --solo run is one path
            raise SystemExit("--paths must include jvm: every stall is reported against it")
        return chosen
    return PATHS + ((NO_POOL,) if args.no_pool_path else ())


def _controller_led_topic(cluster, name: str, partitions: int) -> int:
    """Create ``name`` with partition 0 led by the active controller; return that node."""
    controller = cluster.active_controller()
    nodes = cluster.node_ids
    first = nodes.index(controller)
    order = nodes[first:] + nodes[:first]  # the controller first, then the others
    assignments = {p: order[p % 3:] + order[:p % 3] for p in range(partitions)}
    cluster.create_topic(name, partitions, assignments=assignments)
    return controller


def _round(spark, cluster, workdir: Path, args: argparse.Namespace) -> dict[str, dict[str, float]]:
    paths = _paths(args)
    name = f"bench_failover_{uuid.uuid4().hex[:8]}"
    if args.leader_is_controller:
        print(f"  partition 0 created led by the active controller, node "
              f"{_controller_led_topic(cluster, name, args.partitions)}", flush=True)
    run = FailoverRun(spark, cluster, workdir, name,
                      paths=paths, partitions=args.partitions,
                      offsets_partitions=cluster.offsets_partitions, rate=args.rate,
                      max_offsets_per_trigger=args.max_offsets, sink=args.sink)
    stalls: dict[str, dict[str, float]] = {}
    down_s = args.down_s

    def back_after(node: int, seconds: float | None) -> None:
        """A crashed broker that comes back: its restart falls inside the window."""
        if seconds is not None:
            time.sleep(seconds)  # the fault's length, not a wait for a condition
            cluster.start(node)

    def measure(fault: str, since: float) -> None:
        since_wall = time.time() - (time.monotonic() - since)
        run.wait_batches(2)
        until = time.monotonic()
        stalls[fault] = {p: run.stall_s(p, since, until) for p in run.queries}
        print(f"  {fault}: stall per path {stalls[fault]}", flush=True)
        _report_waits(fault, since_wall, time.time())

    try:
        started = time.monotonic()
        run.start()
        run.wait_batches(args.kill_after_batches)
        if "leader" in args.faults:
            if args.kill_after_s is not None:  # the fault's schedule, not a wait for a condition
                time.sleep(max(0.0, started + args.kill_after_s - time.monotonic()))
            leader = cluster.leader(run.topic, 0)
            controller = cluster.active_controller()
            since = time.monotonic()
            cluster.kill(leader)
            print(f"  SIGKILLed node {leader}, partition 0's leader, {since - started:.1f} s into "
                  f"the query (the active controller: node {controller})", flush=True)
            back_after(leader, down_s)
            measure("leader SIGKILL", since)
            stalls["leader SIGKILL"]["at query age (s)"] = since - started
            cluster.start(leader)
            cluster.wait_healthy()
            run.wait_batches(2)

        if "freeze" in args.faults:
            leader = cluster.leader(run.topic, 0)
            since = time.monotonic()
            cluster.freeze(leader)
            print(f"  froze node {leader} (SIGSTOP), partition 0's leader", flush=True)
            try:
                time.sleep(down_s if down_s is not None else 20.0)  # the fault's length
            finally:
                cluster.thaw(leader)
            measure("leader SIGSTOP", since)
            stalls["leader SIGSTOP"]["at query age (s)"] = since - started
            cluster.wait_healthy()
            run.wait_batches(2)

        if "coordinator" in args.faults:
            # every query's group has the same coordinator (failover_kit)
            coordinator = cluster.coordinator(next(iter(run.queries.values())).group)
            since = time.monotonic()
            cluster.kill(coordinator)
            back_after(coordinator, down_s)
            measure("coordinator SIGKILL", since)
            stalls["coordinator SIGKILL"]["at query age (s)"] = since - started
            cluster.start(coordinator)
            cluster.wait_healthy()
            run.wait_batches(2)

        if "rolling" in args.faults:
            since = time.monotonic()
            for node in cluster.node_ids:
                cluster.restart(node)
                cluster.wait_healthy()
            measure("rolling restart (3 brokers)", since)
            stalls["rolling restart (3 brokers)"]["at query age (s)"] = since - started
        failed = run.exceptions()
        if failed:
            raise SystemExit(f"queries failed: {failed}")
    finally:
        run.stop()
    return stalls


def _solo_rounds(args: argparse.Namespace, argv: list[str], tmp: Path,
                 cluster_home: Path) -> list[dict]:
    """Each round: every path in a process of its own (``--cluster-home``), in turn."""
    rounds = []
    skip = {"--solo", "--rounds"}
    child_argv, it = [], iter(argv)
    for a in it:  # the caller's options, without --solo, --rounds N and --paths P
        if a in skip or a == "--paths":
            if a != "--solo":
                next(it, None)
            continue
        if a.startswith(("--rounds=", "--paths=")):
            continue
        child_argv.append(a)
    for i in range(args.rounds):
        merged: dict[str, dict[str, float]] = {}
        for path in _paths(args):
            out = tmp / f"solo-{i}-{path}.json"
            cmd = [sys.executable, str(Path(__file__).resolve()), *child_argv, "--rounds", "1",
                   "--paths", path, "--cluster-home", str(cluster_home), "--json-out", str(out)]
            print(f"round {i + 1}, {path} alone: {' '.join(cmd[2:])}", flush=True)
            try:
                subprocess.run(cmd, check=True, timeout=900)
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
                print(f"round {i + 1}, {path} alone: failed ({exc}); its stalls are left out",
                      flush=True)
                continue
            for fault, per_path in json.loads(out.read_text())[0].items():
                merged.setdefault(fault, {}).update(
                    {k: v for k, v in per_path.items() if k != "at query age (s)"})
                merged[fault].setdefault("at query age (s)", per_path["at query age (s)"])
                merged[fault][f"{path} at query age (s)"] = per_path["at query age (s)"]
        rounds.append(merged)
        print(f"round {i + 1}: {merged}", flush=True)
    return rounds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--broker-defaults", action="store_true",
                        help="a cluster with Kafka's default failover timings, in its own home")
    parser.add_argument("--down-s", type=float, default=None,
                        help="start a killed broker again after this many seconds, inside the "
                             "measured window (default: after it)")
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--rate", type=int, default=200, help="records a second")
    parser.add_argument("--max-offsets", type=int, default=None, help="maxOffsetsPerTrigger")
    parser.add_argument("--sink", choices=("parquet", "foreachBatch"), default="parquet")
    parser.add_argument("--kill-after-s", type=float, default=None,
                        help="SIGKILL the leader this long after the queries started")
    parser.add_argument("--kill-after-batches", type=int, default=3,
                        help="SIGKILL the leader once every query completed this many batches")
    parser.add_argument("--no-pool-path", action="store_true",
                        help=f"a fifth query, {NO_POOL}: the compiled reader without its pool")
    parser.add_argument("--faults", default=DEFAULT_FAULTS,
                        help=f"which of {','.join(FAULTS)}, in that order")
    parser.add_argument("--paths", default=None,
                        help=f"comma-separated queries to run (of {','.join(PATHS + (NO_POOL,))}; "
                             "default: all four, and the no-pool one where asked); fewer queries "
                             "share the two cores with less")
    parser.add_argument("--issue44", action="store_true",
                        help="issue 44's setup (see the module docstring)")
    parser.add_argument("--issue50", action="store_true",
                        help="issue 50's setup (see the module docstring)")
    parser.add_argument("--solo", action="store_true",
                        help="one query per run: each path in a process of its own")
    parser.add_argument("--leader-is-controller", action="store_true",
                        help="partition 0 led by the active KRaft controller")
    parser.add_argument("--cluster-home", default=None, help=argparse.SUPPRESS)  # --solo's runs
    parser.add_argument("--json-out", default=None, help=argparse.SUPPRESS)
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    if args.issue50:
        args.broker_defaults, args.partitions, args.rate, args.max_offsets = True, 4, 250, 1000
        args.sink, args.kill_after_batches = "foreachBatch", 4
        args.down_s = 20.0 if args.down_s is None else args.down_s
        args.paths = args.paths or "native,confluent,jvm"
        if args.faults == DEFAULT_FAULTS:
            args.faults = "leader,coordinator"
    if args.issue44:
        args.broker_defaults, args.partitions, args.rate, args.max_offsets = True, 4, 250, 1000
        args.sink, args.no_pool_path = "foreachBatch", True
        args.down_s = 20.0 if args.down_s is None else args.down_s
        args.kill_after_s = 30.0 if args.kill_after_s is None else args.kill_after_s
        if args.faults == DEFAULT_FAULTS:
            args.faults = "leader,coordinator"
    args.faults = [f for f in args.faults.split(",") if f]
    unknown = set(args.faults) - set(FAULTS)
    if unknown:
        parser.error(f"unknown faults {sorted(unknown)}; choose from {','.join(FAULTS)}")

    from sparkbarrier.devstack._kafka_cluster import KafkaCluster

    rounds = []
    profile = "broker-defaults" if args.broker_defaults else "devstack"
    with tempfile.TemporaryDirectory(prefix="bench-failover-") as tmp:
        # every slow Kafka call of the planner and the read tasks (connectors/kafka/client/_waits.py)
        os.environ.setdefault("SPARKBARRIER_KAFKA_WAITS", str(Path(tmp) / "kafka-waits.jsonl"))
        if args.cluster_home:  # one run of --solo: the caller's cluster, left running
            cluster = KafkaCluster(Path(args.cluster_home), profile=profile)
        elif args.broker_defaults:
            cluster = KafkaCluster(Path(tmp) / "cluster-home", profile=profile)
        else:  # the devstack's home, as `python -m sparkbarrier.devstack cluster up`
            cluster = KafkaCluster()
        try:
            cluster.up()
            if args.solo:
                rounds = _solo_rounds(args, argv, Path(tmp), cluster.paths.home)
            else:
                spark = _spark()
                for i in range(args.rounds):
                    cluster.heal()  # every broker back and in sync before a round
                    rounds.append(_round(spark, cluster, Path(tmp) / f"r{i}", args))
                    print(f"round {i + 1}: {rounds[-1]}", flush=True)
                spark.stop()
        finally:
            if args.broker_defaults and not args.cluster_home:
                cluster.down()
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(rounds))
        return 0

    profile = "Kafka's default broker settings" if args.broker_defaults else "the devstack's settings"
    paths = _paths(args)
    print(f"\nstall per fault (longest gap between completed batches, s), {args.rounds} rounds, "
          f"{profile}, {args.partitions} partitions, {args.rate} records/s, "
          f"maxOffsetsPerTrigger {args.max_offsets}, {args.sink} sink:")
    print("| fault | at query age (s) | " + " | ".join(paths) + " | path / JVM (median) |")
    print("| --- | ---: |" + " ---: |" * (len(paths) + 1))
    for fault in rounds[0]:
        ages = " / ".join(f"{r[fault]['at query age (s)']:.0f}" for r in rounds if fault in r)
        cells = [" / ".join(f"{r[fault][p]:.1f}" if p in r.get(fault, {}) else "-" for r in rounds)
                 for p in paths]
        ratios = [statistics.median([r[fault][p] / r[fault]["jvm"] for r in rounds
                                     if p in r.get(fault, {}) and "jvm" in r.get(fault, {})] or [0.0])
                  for p in paths if p != "jvm"]
        print(f"| {fault} | {ages} | " + " | ".join(cells) + " | "
              + " / ".join(f"{x:.2f}" for x in ratios) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

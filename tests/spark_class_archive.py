"""A class-data archive for the tests' Spark drivers (tests only).

Why: the suite starts about a hundred Spark drivers (every fault pipeline run is its own
process, so a kill can SIGKILL its JVM), and most of a driver's start-up CPU is loading
and verifying Spark's classes. A dynamic CDS archive (JDK 13+) of the classes a small
streaming job loads lets every later driver map them instead. Measured 2026-11-27 on two
cores: a driver's start plus three small aggregations took 9.0-9.4 s of JVM CPU without it
and 5.1-5.2 s with it (wall 8.4 s -> 4.4 s); one fault-pipeline run, driver and Python
workers together, 24.4 s -> 20.8 s of CPU.

:func:`driver_flags` builds the archive once per virtualenv, Java and flag set (under the
virtualenv, beside the Spark jars it describes; the suite starts that in the background
at its start, :func:`build_in_background`, and waits for it before the first Spark test's
body), checks that a driver started through
pyspark's own launcher maps it (``-Xshare:on`` fails the start otherwise), and returns the
flag that uses it. Anything that goes wrong leaves the drivers as they were (no archive,
one line on stderr): the archive makes the suite faster, never different. At run time
the archive is used with ``-Xshare:auto`` and CDS's own log lines off, so a driver whose
class path differs (a Spark Connect server) starts as it did before, silently.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sparkbarrier.devstack._jvm import Java

_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
_TIMEOUT_S = 240

# The archive's job: a session as the tests build it, a batch aggregation, a Python data
# source read, and a streaming query, so the classes of those paths are archived.
_JOB = r"""
import os, sys
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader

class Rows(DataSource):
    @classmethod
    def name(cls):
        return "archive_rows"

    def schema(self):
        return "id int"

    def reader(self, schema):
        return RowsReader()

class RowsReader(DataSourceReader):
    def read(self, partition):
        yield from ((i,) for i in range(10))

spark = (SparkSession.builder.master("local[2]").appName("sparkbarrier-class-archive")
         .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
         .config("spark.driver.bindAddress", "127.0.0.1").config("spark.sql.shuffle.partitions", "2")
         .getOrCreate())
spark.range(100).selectExpr("id % 7 AS k").groupBy("k").count().collect()
spark.dataSource.register(Rows)
spark.read.format("archive_rows").load().groupBy("id").count().collect()
source = os.path.join(sys.argv[1], "in")
os.makedirs(source)
with open(os.path.join(source, "rows.json"), "w") as out:
    out.write("\n".join('{"k": %d}' % (i % 3) for i in range(10)))
(spark.readStream.schema("k int").json(source).groupBy("k").count().writeStream.outputMode("complete")
 .format("memory").queryName("archive_counts").option("checkpointLocation", os.path.join(sys.argv[1], "ckpt"))
 .trigger(availableNow=True).start().awaitTermination())
gateway = spark.sparkContext._gateway
spark.stop()
# The JVM writes the archive as it exits, after this process would: close its stdin (the
# gateway exits then) and wait for it.
gateway.proc.stdin.close()
gateway.proc.wait(120)
"""


def driver_flags(base_flags: str) -> str:
    """The JVM flag that maps the archive for drivers started with ``base_flags``, or ""."""
    try:
        import pyspark
    except ImportError:
        return ""
    from sparkbarrier._exceptions import DevstackError
    from sparkbarrier.devstack._jvm import find_java

    try:
        java = find_java()  # the one pyspark's launcher runs: $JAVA_HOME/bin/java, else PATH's
    except DevstackError:
        return ""
    jars = Path(pyspark.__file__).parent / "jars"
    key = _key(java, jars, base_flags)
    home = Path(sys.prefix) / "sparkbarrier-class-archive"
    archive = home / f"spark-{key}.jsa"
    use = f"-XX:SharedArchiveFile={archive} -Xshare:auto {_QUIET}"
    failed = archive.with_suffix(".failed")  # a build that failed within the hour: not again
    if archive.exists():
        return use
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other xdist worker waits for this one's archive
        if archive.exists():
            return use
        if failed.exists() and time.time() - failed.stat().st_mtime < 3600:
            return ""
        for old in home.glob("spark-*.jsa"):  # built for another Java, jar set or flags
            old.unlink()
        problem = _build(archive, base_flags, home)
        if problem:
            failed.write_text(problem + "\n")
    if problem:
        print(f"tests: Spark drivers run without a class archive ({problem})", file=sys.stderr)
        return ""
    return use


def build_in_background(base_flags: str) -> subprocess.Popen[bytes]:
    """Run :func:`driver_flags` in a child process, so the archive is built while the
    first tests start their servers; a later :func:`driver_flags` call waits on the
    lock for it (or, if it comes first, builds it and the child finds it there)."""
    return subprocess.Popen([sys.executable, "-c", f"import spark_class_archive; "
                             f"spark_class_archive.driver_flags({base_flags!r})"],
                            cwd=Path(__file__).parent, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            start_new_session=True)  # its own group: a stop ends its Spark job too


def _build(archive: Path, base_flags: str, home: Path) -> str | None:
    """Dump the archive, then start a driver that must map it; a problem, or None."""
    partial = archive.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    work = home / "job"
    shutil.rmtree(work, ignore_errors=True)
    try:
        dump = _run_job(f"{base_flags} -XX:ArchiveClassesAtExit={partial}", work / "dump")
        if dump is not None or not partial.exists():
            partial.unlink(missing_ok=True)
            return f"dump: {dump or 'no archive written'}"
        check = _run_job(f"{base_flags} -XX:SharedArchiveFile={partial} -Xshare:on", work / "check")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if check is not None:
        partial.unlink(missing_ok=True)
        return f"a driver could not map it: {check}"
    partial.rename(archive)
    return None


def _run_job(flags: str, checkpoint: Path) -> str | None:
    env = dict(os.environ, SPARK_SUBMIT_OPTS=flags, PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    try:
        done = subprocess.run([sys.executable, "-c", _JOB, str(checkpoint)], env=env, capture_output=True,
                              text=True, timeout=_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return f"over {_TIMEOUT_S} s"
    if done.returncode != 0:
        return (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
    return None


def _key(java: Java, jars: Path, flags: str) -> str:
    """Changes with the Java build, the Spark jars (names and sizes) and the flags."""
    digest = hashlib.sha256()
    digest.update(f"{java.executable.resolve()}|{flags}|{jars}".encode())
    for part in (java.executable.resolve(), java.home / "lib" / "server" / "libjvm.so"):
        if part.exists():
            digest.update(f"|{part.stat().st_size}:{part.stat().st_mtime_ns}".encode())
    for jar in sorted(jars.glob("*.jar")):
        digest.update(f"|{jar.name}:{jar.stat().st_size}".encode())
    return digest.hexdigest()[:16]

"""Fault firing: what an armed fault point does (the test side of ``sparkbarrier._faults``).

A fault point is one line in library code, ``fault_point("sink.after_flush_before_commit")``
(the hook ``sparkbarrier._faults``, which ships in the product wheel), and costs one
environment lookup when no fault is armed. When one is, the hook calls :func:`fire` here,
which this distribution registers under the hook's entry-point group
(``sparkbarrier.fault_firing``, devstack/pyproject.toml): the product imports nothing of
``sparkbarrier-devstack``, and the code that kills processes never ships to a cluster.
Arming is by environment, so it reaches every Python worker Spark spawns:

* ``SPARKBARRIER_FAULT`` -- comma-separated point names; ``name@N`` fires on the N-th
  hit only (hits are counted in the state directory, so ``@N`` needs it).
* ``SPARKBARRIER_FAULT_STATE_DIR`` (optional) -- a directory shared by all processes:
  each point fires at most once per directory and leaves a file ``<name>.fired``
  there, which is how a test tells "the fault fired" from "the job broke".

What firing does: by default the *driver* is SIGKILLed. The driver-side code of a
Python data source (the streaming reader's ``latestOffset``/``commit``, the sink's
``commit``/``abort``) runs in a Python worker spawned by the driver JVM, and executor
code in local mode runs in workers of the same JVM; so the nearest ``java`` ancestor
of this process is the driver JVM. It is killed first, then this process. A process
without a ``java`` ancestor kills only itself: the protocol used without Spark, or the
driver program itself (the JVM's parent, where ``commit_kafka_offsets``' listener runs),
whose death ends the application.
Points given ``fail=`` raise that exception instead, failing just the Spark task.

The points (name → where it sits):

=========================================  ===============================================
``sink.before_flush``                      executor ``write()``: at a barrier, before the
                                           flush that makes the checkpoint's rows durable
``hbase.after_partial_flush``              executor: after a buffer flush (raises
                                           :class:`FlushError`, the task is retried)
``sink.after_flush_before_commit``         driver sink ``commit``: all tasks flushed,
                                           nothing committed
``sink.after_commit_before_commitlog``     driver sink ``commit``: commit record written,
                                           Spark's commit log not yet
``source.after_commitlog_before_kafka_commit``  driver Kafka planner: batch known complete,
                                           group offsets not yet committed
``listener.before_group_commit``           driver, ``commit_kafka_offsets``: the batch is
                                           in the commit log, the group not yet committed
``checkpointed.after_store_commit_before_ledger``  driver, checkpointed sinks: the function
                                           committed the batch, the applied ledger not yet
``batch_write.before_flush``               executor, ``barrier-hbase`` batch write (and
                                           ``hbase_batch_writer``): all rows buffered or
                                           flushed at the buffer's limits, before the
                                           task's last flush
``batch_write.after_flush_before_commit``  driver, batch write ``commit``: all tasks
                                           flushed, nothing committed
``batch_write.after_commit_before_return``  driver, batch write ``commit``: commit record
                                           written; in ``foreachBatch``, Spark's commit log
                                           not yet
=========================================  ===============================================

Each point has one owner, so ``@N`` counts real hits: the ``sink.*`` points and
``checkpointed.*`` sit in the checkpointed-sink adapter
(``sparkbarrier.connectors.checkpointed``) that runs every sink, ``barrier-hbase``
included: ``sink.before_flush`` before each ``snapshot_state``, the driver points
before the function's ``notify_checkpoint_complete`` and after the ledger. The
``batch_write.*`` points sit in ``barrier-hbase``'s batch writer, which no adapter runs.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable
from pathlib import Path

from .._exceptions import ConfigError
from .._faults import FAULT_ENV

__all__ = ["FAULT_ENV", "FAULT_STATE_DIR_ENV", "armed", "find_jvm_ancestor", "fire", "fired"]

log = logging.getLogger(__name__)

FAULT_STATE_DIR_ENV = "SPARKBARRIER_FAULT_STATE_DIR"


def armed(name: str) -> int | None:
    """The hit number at which ``name`` fires (1 = first hit), or None if not armed."""
    for item in os.environ.get(FAULT_ENV, "").split(","):
        point, _, nth = item.strip().partition("@")
        if point == name:
            if nth and not nth.isdigit():
                raise ConfigError(f"{FAULT_ENV}: {item!r} must be <point> or <point>@<hit number>",
                                  option=FAULT_ENV)
            return int(nth) if nth else 1
    return None


def fired(name: str, state_dir: str | os.PathLike[str]) -> bool:
    """True if point ``name`` fired with ``state_dir`` as its state directory."""
    return (Path(state_dir) / f"{name}.fired").exists()


def fire(name: str, *, fail: Callable[[str], BaseException] | None = None) -> None:
    """Do nothing unless ``name`` is armed; otherwise kill the driver or raise ``fail(msg)``.

    Called by the hook ``sparkbarrier._faults.fault_point`` only when ``SPARKBARRIER_FAULT``
    is set; runs wherever the point sits (driver or executor Python worker).
    """
    nth = armed(name)
    if nth is None:
        return
    state = os.environ.get(FAULT_STATE_DIR_ENV)
    if state is None:
        if nth != 1:
            raise ConfigError(f"{FAULT_ENV}={name}@{nth} needs {FAULT_STATE_DIR_ENV} to count hits",
                              option=FAULT_STATE_DIR_ENV)
    elif not _claim(Path(state), name, nth):
        return
    message = f"fault injected at {name!r} ({FAULT_ENV})"
    if fail is not None:
        log.warning("%s: failing the task", message)
        raise fail(message)
    jvm = find_jvm_ancestor()
    log.warning("%s: SIGKILL %s", message, f"driver JVM {jvm}" if jvm else "this process")
    if jvm is not None:
        os.kill(jvm, signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def _claim(state: Path, name: str, nth: int) -> bool:
    """Count this hit; True if it is the N-th and the point has not fired before here."""
    state.mkdir(parents=True, exist_ok=True)
    hit = 1
    while True:
        try:
            os.close(os.open(state / f"{name}.hit{hit}", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            break
        except FileExistsError:
            hit += 1
    if hit != nth:
        return False
    try:
        os.close(os.open(state / f"{name}.fired", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def find_jvm_ancestor(pid: int | None = None) -> int | None:
    """Pid of the nearest ancestor whose executable is ``java`` (Linux ``/proc``), or None."""
    current = os.getppid() if pid is None else pid
    while current > 1:
        proc = Path("/proc") / str(current)
        try:
            argv0 = (proc / "cmdline").read_bytes().split(b"\0", 1)[0]
            stat = (proc / "stat").read_text()
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            return None
        if os.path.basename(argv0) == b"java":
            return current
        current = int(stat.rsplit(")", 1)[1].split()[1])
    return None

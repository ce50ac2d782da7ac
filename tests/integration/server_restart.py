"""Restart one server of a *private* devstack in place: same command, ports and data.

``Devstack.up`` wipes a component's data when it (re)starts, which would delete the
topic a restart test is reading; here the process is stopped (SIGTERM, SIGKILL after
a grace period) and started again from its own ``/proc`` command line, working
directory and environment, and its pid record is updated so ``Devstack.down`` still
stops it. Never call this on the shared stack.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from sparkbarrier.devstack._config import Paths
from sparkbarrier.devstack._process import ProcessRecord, is_ours, port_accepts, spawn

__all__ = ["restart_server", "kill_server"]


def restart_server(home: Path, name: str, *, grace_s: float = 20.0, start_timeout_s: float = 120.0) -> None:
    """Stop and start process ``name`` (``kafka``, ``hbase-thrift``) of the stack at ``home``."""
    kill_server(home, name, grace_s=grace_s)(start_timeout_s)


def kill_server(home: Path, name: str, *, grace_s: float = 0.0) -> Callable[[float], None]:
    """Stop process ``name`` (SIGKILL at once with the default ``grace_s=0``: a crash);
    return a function that starts it again in place and waits until it serves."""
    paths = Paths.resolve(home)
    record = ProcessRecord.load(paths.run, name)
    assert record is not None and is_ours(record), f"{name} is not running in {home}"
    proc = Path("/proc") / str(record.pid)
    cmd = [a.decode() for a in (proc / "cmdline").read_bytes().split(b"\0") if a]
    cwd = Path(os.readlink(proc / "cwd"))
    env = dict(item.decode().split("=", 1) for item in (proc / "environ").read_bytes().split(b"\0")
               if b"=" in item)
    if grace_s > 0:
        os.kill(record.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while is_ours(record) and time.monotonic() < deadline:
        time.sleep(0.2)
    if is_ours(record):
        os.kill(record.pid, signal.SIGKILL)
        while is_ours(record):
            time.sleep(0.1)

    def start(start_timeout_s: float = 120.0) -> None:
        started = spawn(cmd, log_path=Path(record.log), cwd=cwd, env=env)
        replace(record, pid=started.pid, started_at=time.time()).save(paths.run)
        deadline = time.monotonic() + start_timeout_s
        while not all(port_accepts(p) for p in record.ports.values()):
            if started.poll() is not None:
                raise AssertionError(f"{name} exited with {started.returncode} on restart; see {record.log}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{name} did not serve within {start_timeout_s}s; see {record.log}")
            time.sleep(0.2)

    return start

"""Pid records, ownership checks, ports and signals for the stack's server processes.

Why records instead of process names: ``down`` must stop only *our* JVMs. Every
server is started with a marker system property naming the process and the stack's
home (``-Dsparkbarrier.devstack=<name>@<home>``); a pid from a record is trusted only
while ``/proc/<pid>/cmdline`` still carries that marker, so a recycled pid or another
stack's server is never signalled.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .._exceptions import DevstackError
from ._config import P

__all__ = [
    "ProcessRecord",
    "ProcessStatus",
    "check_requested_ports",
    "choose_ports",
    "died",
    "free_ports",
    "is_ours",
    "kill_processes",
    "log_tail",
    "marker_for",
    "port_accepts",
    "port_is_free",
    "spawn",
    "stack_lock",
    "stop_processes",
    "wait_for_port",
]

log = logging.getLogger(__name__)

_HOST = "127.0.0.1"


@dataclass(frozen=True)
class ProcessStatus:
    """One server process: ``alive`` = pid is ours and running; ``serving`` = its ports
    accept connections; ``optional`` = started only on request (``up --all``), so the
    stack runs without it."""

    name: str
    pid: int | None
    alive: bool
    serving: bool
    ports: dict[str, int]
    log: str
    optional: bool = field(default=False, kw_only=True)  # kw_only: subclasses add fields



def marker_for(name: str, home: Path) -> str:
    """JVM argument that tags a process as ``name`` of the stack at ``home``."""
    return f"-Dsparkbarrier.devstack={name}@{home}"


@dataclass
class ProcessRecord:
    """What ``up`` wrote about one server process (``<run>/<name>.json``)."""

    name: str
    pid: int
    marker: str
    log: str
    ports: dict[str, int] = field(default_factory=dict)
    started_at: float = 0.0

    def save(self, run_dir: Path) -> None:
        path = run_dir / f"{self.name}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=1))
        os.replace(tmp, path)

    @classmethod
    def load(cls, run_dir: Path, name: str) -> ProcessRecord | None:
        path = run_dir / f"{name}.json"
        try:
            raw = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except (json.JSONDecodeError, OSError) as exc:
            log.warning("ignoring unreadable pid record %s: %s", path, exc)
            return None
        return cls(**raw)

    @staticmethod
    def remove(run_dir: Path, name: str) -> None:
        (run_dir / f"{name}.json").unlink(missing_ok=True)


def is_ours(record: ProcessRecord) -> bool:
    """True while the recorded pid is a live (non-zombie) process carrying our marker."""
    _reap(record.pid)
    proc = Path("/proc") / str(record.pid)
    try:
        args = (proc / "cmdline").read_bytes().split(b"\0")
        state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    except PermissionError:
        return False
    return state != "Z" and record.marker.encode() in args


def spawn(
    cmd: Sequence[str], *, log_path: Path, cwd: Path, env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start ``cmd`` detached from our session, stdout+stderr appended to ``log_path``.

    A new session keeps terminal signals (Ctrl-C in the shell that ran ``up``) away
    from the servers: they outlive the CLI until ``down``.
    """
    cwd.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as out:
        return subprocess.Popen(
            list(cmd),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            start_new_session=True,
        )


def stop_processes(
    records: Iterable[ProcessRecord],
    *,
    grace_s: float = 30.0,
    grace_by_name: Mapping[str, float] | None = None,
    kill_wait_s: float = 10.0,
) -> list[ProcessRecord]:
    """SIGTERM every record that is still ours, SIGKILL what outlives its grace period
    (``grace_by_name[name]``, else ``grace_s``); all processes are stopped in parallel.

    Returns the records that were running. Raises ``DevstackError`` if a process
    survives SIGKILL (should not happen short of an unkillable D-state process).
    """
    live = [r for r in records if is_ours(r)]
    for record in live:
        _signal(record.pid, signal.SIGTERM)
    graces = {r.name: (grace_by_name or {}).get(r.name, grace_s) for r in live}
    signalled = time.monotonic()
    remaining: list[ProcessRecord] = []
    for record in sorted(live, key=lambda r: graces[r.name]):
        left = signalled + graces[record.name] - time.monotonic()
        remaining += _wait_gone([record], max(0.0, left))
    for record in remaining:
        log.info("%s (pid %d) still running %.0fs after SIGTERM; sending SIGKILL",
                 record.name, record.pid, graces[record.name])
        _signal(record.pid, signal.SIGKILL)
    _require_gone(remaining, kill_wait_s, "after SIGKILL")
    return live


def kill_processes(records: Iterable[ProcessRecord], *, wait_s: float = 10.0) -> list[ProcessRecord]:
    """SIGKILL every record that is still ours (no SIGTERM first: a crash, not a
    shutdown, so a server gets no chance to hand anything over) and wait until they
    are gone.

    Returns the records that were running. Raises ``DevstackError`` if one outlives
    ``wait_s``.
    """
    live = [r for r in records if is_ours(r)]
    for record in live:
        _signal(record.pid, signal.SIGKILL)
    _require_gone(live, wait_s, f"{wait_s:.0f}s after SIGKILL")
    return live


def _require_gone(records: Sequence[ProcessRecord], wait_s: float, when: str) -> None:
    """Wait up to ``wait_s`` for ``records`` (already SIGKILLed) to be gone, else raise."""
    stubborn = _wait_gone(records, wait_s)
    if stubborn:
        names = ", ".join(f"{r.name} (pid {r.pid})" for r in stubborn)
        raise DevstackError(
            f"{names} still alive {when}",
            fix="inspect the process with `ps -o pid,stat,cmd -p <pid>` and stop it by hand",
        )


def stop_recorded(run_dir: Path, names: Iterable[str], *, grace_s: float = 30.0,
                  grace_by_name: Mapping[str, float] | None = None) -> list[ProcessRecord]:
    """Stop the recorded processes ``names`` of a home and forget their records.

    What every component's ``down`` does, and its ``up`` before starting afresh: a
    record whose process is gone (or unreadable) is forgotten too. The caller holds
    :func:`stack_lock`. Returns the records that were running.
    """
    names = list(names)
    records = [r for n in names if (r := ProcessRecord.load(run_dir, n)) is not None]
    stopped = stop_processes(records, grace_s=grace_s, grace_by_name=grace_by_name)
    for name in names:
        ProcessRecord.remove(run_dir, name)
    return stopped


def _wait_gone(records: Sequence[ProcessRecord], timeout_s: float) -> list[ProcessRecord]:
    deadline = time.monotonic() + timeout_s
    pending = list(records)
    while pending and time.monotonic() < deadline:
        pending = [r for r in pending if is_ours(r)]
        if pending:
            time.sleep(0.2)
    return [r for r in pending if is_ours(r)]


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _reap(pid: int) -> None:
    """Collect the exit status if ``pid`` is our own child (a zombie otherwise looks alive)."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def port_is_free(port: int, host: str = _HOST) -> bool:
    """True if a server could bind ``host:port`` right now (SO_REUSEADDR, like the JVM)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def port_accepts(port: int, host: str = _HOST, timeout_s: float = 0.5) -> bool:
    """True if something accepts TCP connections on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def _free_port(avoid: set[int]) -> int:
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((_HOST, 0))
            port = int(sock.getsockname()[1])
        if port not in avoid:
            return port
    raise DevstackError("no free TCP port found on 127.0.0.1", fix="free some ports")


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports free on 127.0.0.1 right now (sockets held until all are
    chosen, so the kernel cannot hand out one twice).

    For a throw-away server whose ports nobody asked for (a test's own stack, the
    Kerberized Kafka); ports someone may request go through :func:`choose_ports`.
    """
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((_HOST, 0))
            socks.append(sock)
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for sock in socks:
            sock.close()


def choose_ports(requests: Mapping[P, int | None]) -> dict[P, int]:
    """Explicit requests must be free (else ``DevstackError``); busy defaults are replaced.

    For any port enum (``_config.Port``, the HDFS's ``HdfsPort``)."""
    chosen: dict[P, int] = {}
    for port, wanted in requests.items():
        if wanted is not None:
            if wanted in chosen.values() or not port_is_free(wanted):
                raise DevstackError(
                    f"port {wanted} requested for {port.key} is already in use",
                    fix=f"pass another {port.flag} (or {port.env}), or omit it to get a free one",
                )
            chosen[port] = wanted
    for port, wanted in requests.items():
        if wanted is None:
            taken = set(chosen.values())
            if port.default not in taken and port_is_free(port.default):
                chosen[port] = port.default
            else:
                chosen[port] = _free_port(taken)
                log.info("port %d for %s is taken; using %d", port.default, port.key,
                         chosen[port])
    return chosen


def wait_for_port(
    port: int, *, deadline: float, proc: subprocess.Popen[bytes], name: str, log_path: Path
) -> None:
    """Poll until ``port`` accepts connections; fail early if ``proc`` exits."""
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise died(name, proc.returncode, log_path)
        if port_accepts(port):
            return
        time.sleep(0.25)
    raise DevstackError(
        f"{name} did not open port {port} in time (log: {log_path})",
        fix="read the log tail above; a slow machine may need another try",
        log_path=str(log_path),
        log_tail=log_tail(log_path),
    )


def died(name: str, code: int | None, log_path: Path) -> DevstackError:
    """The error for a server that exited while starting."""
    return DevstackError(
        f"{name} exited during start (exit code {code}; log: {log_path})",
        fix="read the log tail above for the reason",
        log_path=str(log_path),
        log_tail=log_tail(log_path),
    )


def log_tail(path: Path, lines: int = 30) -> str:
    """Last ``lines`` lines of a log ('' if it does not exist)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 64 * 1024))
            data = handle.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""
    return "\n".join(data.splitlines()[-lines:])


@contextlib.contextmanager
def stack_lock(run_dir: Path) -> Iterator[None]:
    """Serialise ``up``/``down`` of one stack across processes (pytest sessions, shells)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / "lock", "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def check_requested_ports(name: str, record: ProcessRecord, ports: Iterable[P],
                          requests: Mapping[P, int | None], down: str) -> None:
    """A running ``name`` must use the ports the caller asked for; else say how to fix it."""
    for port in ports:
        wanted = requests.get(port)
        if wanted is not None and record.ports.get(port.key) != wanted:
            raise DevstackError(
                f"{name} already runs with {port.key} port {record.ports.get(port.key)}, "
                f"not the requested {wanted}",
                fix=f"run `{down}` first, or drop the port request",
            )


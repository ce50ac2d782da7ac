"""Flush and compact a devstack HBase table: the admin calls Thrift lacks (tests only).

The sink's guarantee rests on what HBase keeps through memstore flushes and compactions
(``VERSIONS``, delete markers under ``KEEP_DELETED_CELLS``), so its tests flush and
compact at chosen points. Neither Thrift gateway can: this runs ``java/AdminShell.java``
(compiled once into the classpath cache, with the JDK that runs the servers) as one
long-lived process on the HBase classpath, talking over stdin/stdout, so a call costs a
round trip, not a JVM start.
"""

from __future__ import annotations

import hashlib
import subprocess
import threading
from importlib import resources
from pathlib import Path

from .._exceptions import DevstackError
from ._config import Paths
from ._jvm import find_java
from ._maven import resolve_classpath

__all__ = ["HBaseAdminShell"]

_SOURCE = "AdminShell.java"
_START_S = 120.0
_CALL_S = 180.0


class HBaseAdminShell:
    """``flush``, ``compact`` and ``major_compact`` of the devstack HBase at ``paths`` (a context manager)."""

    def __init__(self, paths: Paths | None = None) -> None:
        self._paths = paths or Paths.resolve()
        java = find_java()
        classpath = resolve_classpath("hbase", self._paths, java)
        classes = self._compile(java.executable.resolve().parent / "javac", classpath.as_arg())
        conf = self._paths.data("hbase") / "conf"
        self._proc = subprocess.Popen(
            [str(java.executable), "-Xmx256m", "-XX:TieredStopAtLevel=1", "-Djava.net.preferIPv4Stack=true",
             "-cp", classpath.as_arg(conf, classes), _SOURCE.removesuffix(".java")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self._expect("ready", _START_S, "start")

    def _compile(self, javac: Path, classpath: str) -> Path:
        source = (resources.files(__package__) / "java" / _SOURCE).read_bytes()
        out = self._paths.cache / f"admin-shell-{hashlib.sha256(source).hexdigest()[:12]}"
        if not (out / _SOURCE.replace(".java", ".class")).exists():
            out.mkdir(parents=True, exist_ok=True)
            (out / _SOURCE).write_bytes(source)
            done = subprocess.run([str(javac), "-d", str(out), "-cp", classpath, str(out / _SOURCE)],
                                  capture_output=True, text=True, timeout=300, check=False)
            if done.returncode:
                raise DevstackError(f"javac could not compile {_SOURCE}: {done.stderr[-2000:]}",
                                    fix="check the JDK (javac) beside the java that runs the servers")
        return out

    def _expect(self, want: str, timeout: float, what: str) -> None:
        """Wait for the answer line (``@@<want>``); the client's own log lines are skipped."""
        answer: list[str] = []

        def read() -> None:
            for line in self._proc.stdout or ():
                if line.startswith("@@"):
                    answer.append(line[2:].strip())
                    return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(timeout)
        got = answer[0] if answer else ""
        if got != want:
            self.close()
            raise DevstackError(f"HBase admin shell: {what} answered {got or 'nothing'!r} "
                                f"(after up to {timeout:.0f} s)",
                                fix="is the devstack HBase up? python -m sparkbarrier.devstack status")

    def _call(self, command: str, table: str) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.write(f"{command} {table}\n")
        self._proc.stdin.flush()
        self._expect("ok", _CALL_S, f"{command} {table}")

    def flush(self, table: str) -> None:
        """Write every region's memstore to a store file (returns when done)."""
        self._call("flush", table)

    def compact(self, table: str) -> None:
        """A minor compaction, waited for."""
        self._call("compact", table)

    def major_compact(self, table: str) -> None:
        """A major compaction (drops what the family's rules drop), waited for."""
        self._call("major_compact", table)

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(10)

    def __enter__(self) -> HBaseAdminShell:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

"""A throw-away PostgreSQL server for the example and its tests (loopback, trust auth).

Uses the machine's PostgreSQL binaries (Debian's ``postgresql`` package: ``./dev``
installs it when missing). PostgreSQL refuses to run as root, so as root the server
runs as the ``postgres`` system user. ``max_prepared_transactions`` is raised from its
default 0: ``PREPARE TRANSACTION`` is the pre-commit of the two-phase-commit sink.

    python examples/postgres/server.py up /tmp/pg 55432   # prints the DSN
    python examples/postgres/server.py down /tmp/pg
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["PostgresServer", "find_bin"]


def find_bin(name: str) -> str:
    for pattern in (f"/usr/lib/postgresql/*/bin/{name}", f"/usr/local/pgsql/bin/{name}"):
        found = sorted(glob.glob(pattern))
        if found:
            return found[-1]
    path = shutil.which(name)
    if path:
        return path
    raise RuntimeError(f"PostgreSQL's {name} not found: install it (apt-get install postgresql)")


class PostgresServer:
    """One private server: ``up()`` (initdb on first use, start, wait), ``down()``."""

    def __init__(self, directory: str | os.PathLike[str], port: int) -> None:
        self.dir = Path(directory)
        self.port = port
        self.data = self.dir / "data"
        self.user = "postgres" if os.geteuid() == 0 else None

    @property
    def dsn(self) -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        cmd = (["runuser", "-u", self.user, "--"] if self.user else []) + list(args)
        return subprocess.run(cmd, check=check, capture_output=True, text=True, timeout=120)

    def up(self, timeout_s: float = 60) -> str:
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.user:
            shutil.chown(self.dir, self.user)
        if not (self.data / "PG_VERSION").exists():
            self._run(find_bin("initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        options = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c max_prepared_transactions=64"
        self._run(find_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.dir / "server.log"), "-o", options,
                  "-w", "-t", str(int(timeout_s)), "start")
        deadline = time.monotonic() + timeout_s
        while self._run(find_bin("pg_isready"), "-h", "127.0.0.1", "-p", str(self.port), check=False).returncode:
            if time.monotonic() > deadline:
                raise RuntimeError(f"PostgreSQL did not become ready; log: {self.dir / 'server.log'}")
            time.sleep(0.2)
        return self.dsn

    def down(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._run(find_bin("pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop", check=False)


if __name__ == "__main__":
    server = PostgresServer(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 55432)
    if sys.argv[1] == "up":
        print(server.up())
    else:
        server.down()

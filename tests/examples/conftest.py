"""A private PostgreSQL server for the example tests (started by the project's own code)."""

from __future__ import annotations

import shutil
import socket
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "postgres"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    # Not under pytest's tmp dir: as root the server runs as 'postgres', which cannot
    # enter root's private pytest directories.
    from server import PostgresServer

    directory = Path(tempfile.mkdtemp(prefix="sparkbarrier-pg-"))
    server = PostgresServer(directory, _free_port())
    try:
        yield server.up()
    finally:
        server.down()
        shutil.rmtree(directory, ignore_errors=True)

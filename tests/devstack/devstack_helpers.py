"""Helpers for devstack tests: run the CLI, find the JVMs of a stack home."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

__all__ = ["run_cli", "stack_pids"]


def run_cli(*args: str, env: dict[str, str] | None = None,
            timeout: float = 280) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sparkbarrier.devstack", *args],
        env=env if env is not None else dict(os.environ),
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout,
        check=False,
    )


def stack_pids(home: Path) -> list[int]:
    """Pids of live processes started by the stack at ``home`` (by their marker)."""
    suffix = f"@{home}".encode()
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if state != "Z" and any(
            a.startswith(b"-Dsparkbarrier.devstack=") and a.endswith(suffix) for a in args
        ):
            pids.append(int(proc.name))
    return pids

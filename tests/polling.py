"""Polling instead of sleeping: wait for a condition with a deadline."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

__all__ = ["wait_for"]


def wait_for(condition: Callable[[], Any], timeout: float = 60, what: str = "condition") -> Any:
    """Poll ``condition`` until truthy and return its value; fail with ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.2)

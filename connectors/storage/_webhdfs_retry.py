"""The one bounded retry loop every WebHDFS call goes through, and its time bound.

Why. A NameNode restart (7-9 s on the devstack, minutes on a big cluster) or an HA
failover is routine on a production HDFS, and Hadoop's own client rides through it:
``ipc.client.connect.*`` retries a connection that is refused, and the failover proxy
(``dfs.client.failover.*``) moves to the next NameNode of the nameservice on a
``StandbyException`` or a network error, sleeping with exponential backoff between
rounds. sparkbarrier's driver-side code reads and writes beside Spark's checkpoint
through WebHDFS (``connectors/storage/_webhdfs.py``) and must do the same, within a bound an
operator can read and change:

* ``SPARKBARRIER_WEBHDFS_RETRY_SECONDS`` (default 60): how long one call may keep
  retrying before it raises; ``0`` tries every NameNode once and never sleeps.
* Between attempts: the next NameNode at once while some of them have not been tried in
  this round (Hadoop's immediate first failover); then a sleep of 0.5 s, doubling up to
  8 s, with ±50 % jitter (Hadoop's ``dfs.client.failover.sleep.base.millis`` /
  ``sleep.max.millis`` scheme), never past the bound.

The loop is generic: an attempt raises :class:`Transient` (may heal; ``failover`` says
whether this NameNode cannot serve now, or is the right one and not ready yet) or
:class:`Unusable` (there is no NameNode at this address at all); anything else is an
answer and leaves the loop at once. Which answer is which is decided in one place,
``_webhdfs.py``, by the WebHDFS exception name and the HTTP status, never by message text.
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from ..._exceptions import ConfigError

__all__ = ["DEFAULT_RETRY_S", "RETRY_ENV", "Attempt", "NameNode", "RetryPolicy", "Transient", "Unusable", "run"]

log = logging.getLogger(__name__)

RETRY_ENV = "SPARKBARRIER_WEBHDFS_RETRY_SECONDS"
DEFAULT_RETRY_S = 60.0

T = TypeVar("T")


@dataclass(frozen=True)
class NameNode:
    """One NameNode HTTP address the loop may call, and where it came from (every error
    that names an address names its origin too): ``origin`` for people,
    ``option`` the setting to fix (``SPARKBARRIER_WEBHDFS``, ``HADOOP_CONF_DIR``, ...)."""

    url: str  # http[s]://host:port, no path
    origin: str
    option: str

    def __str__(self) -> str:
        return f"{self.url} (from {self.origin})"


class Transient(Exception):  # a verdict: caught by run() only, never leaves this layer
    """An attempt failed in a way that can heal. ``failover``: this NameNode cannot serve
    now (refused, reset, timed out, standby, 5xx): try the next one. Otherwise it is the
    one to ask and is not ready (safe mode, startup): wait and ask it again."""

    def __init__(self, reason: str, *, failover: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.failover = failover


class Unusable(Exception):  # a verdict: caught by run() only
    """No NameNode answers at this address at all (unknown host, not a WebHDFS answer):
    skipped for the rest of the call; when every address is unusable, the call fails at once."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class RetryPolicy:
    """How long one call may retry (``total_s``), and the backoff between rounds."""

    total_s: float = DEFAULT_RETRY_S
    first_sleep_s: float = 0.5
    max_sleep_s: float = 8.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RetryPolicy:
        raw = (os.environ if environ is None else environ).get(RETRY_ENV, "").strip()
        if not raw:
            return cls()
        try:
            total = float(raw)
        except ValueError:
            total = -1.0
        if not total >= 0 or total == float("inf"):
            raise ConfigError(f"{RETRY_ENV}={raw!r}: give the seconds a WebHDFS call may keep retrying "
                              f"(a number >= 0; default {DEFAULT_RETRY_S:.0f})", option=RETRY_ENV)
        return cls(total_s=total)

    def sleep_s(self, round_number: int) -> float:
        """The pause after the ``round_number``-th (0-based) round in which no NameNode served."""
        backoff: float = min(self.max_sleep_s, self.first_sleep_s * 2.0 ** min(round_number, 30))
        return backoff * random.uniform(0.5, 1.5)


@dataclass(frozen=True)
class Attempt:
    """What one attempt is told: which NameNode (an index), whether an earlier attempt of
    this call failed (its effect may or may not have happened), and the seconds left."""

    node: int
    retried: bool
    remaining_s: float


def run(attempt: Callable[[Attempt], T], *, nodes: int, start: int, policy: RetryPolicy,
        give_up: Callable[[Sequence[str | None], bool], Exception], what: str = "a WebHDFS call",
        clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> tuple[T, int]:
    """Run ``attempt`` until it returns, raises an answer, or the bound runs out.

    Returns (the result, the NameNode that served), so the caller asks that one first
    next time. ``start`` is the NameNode to try first. At the bound, or when every
    address is :class:`Unusable`, raises ``give_up(last reason per NameNode, all_unusable)``.
    Every attempt of one call must be safe to repeat (``Attempt.retried`` lets a
    compound one check what an earlier try did).
    """
    deadline = clock() + policy.total_s
    reasons: list[str | None] = [None] * nodes
    unusable = [False] * nodes
    node, tried_this_round, rounds, retried = start % nodes, 0, 0, False
    while True:
        try:
            return attempt(Attempt(node, retried, max(0.0, deadline - clock()))), node
        except Transient as failure:
            reasons[node], failover = failure.reason, failure.failover
        except Unusable as failure:
            reasons[node], unusable[node], failover = failure.reason, True, True
            if all(unusable):
                raise give_up(reasons, True) from failure
        retried = True
        tried_this_round += 1
        usable = [i for i in range(nodes) if not unusable[i]]
        if failover:
            node = next((i for i in (*range(node + 1, nodes), *range(node + 1)) if not unusable[i]), node)
            if tried_this_round < len(usable):
                continue  # an untried NameNode: at once, as Hadoop's first failover
        pause = min(policy.sleep_s(rounds), deadline - clock())
        if pause <= 0:
            raise give_up(reasons, False)
        log.info("%s: waiting %.1f s for a NameNode (%.0f s left of %s); last: %s", what, pause,
                 deadline - clock(), RETRY_ENV, "; ".join(r for r in reasons if r))
        sleep(pause)
        rounds, tried_this_round = rounds + 1, 0

"""The fault-point hook: where tests can kill the Spark driver or fail a task, at no cost otherwise.

Library code marks named places with one line, ``fault_point("sink.after_flush_before_commit")``
(the points and what firing does: docs/fault-tolerance.md). This module is all of it that
ships in the product wheel, and it imports nothing of the test machinery: with
``SPARKBARRIER_FAULT`` unset (always, in production) a point costs one environment lookup.
With it set, the hook calls whatever firing function is registered under the entry-point
group :data:`FIRING_GROUP`. The ``sparkbarrier-devstack`` distribution (the test and dev
machinery, installed by ``./dev``) registers its own there, which parses the armed points
and kills the driver JVM or raises; so the dependency points from the test machinery to
the product, never the other way. Where no firing function is registered, an armed fault
is an error, never ignored: a test that arms a fault and sees no crash would pass for the
wrong reason.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from importlib.metadata import entry_points

from ._exceptions import ConfigError

__all__ = ["FAULT_ENV", "FIRING_GROUP", "fault_point"]

FAULT_ENV = "SPARKBARRIER_FAULT"

# The entry-point group a firing function registers under: ``fire(name, *, fail=None)``.
FIRING_GROUP = "sparkbarrier.fault_firing"

_Fire = Callable[..., None]
_registered: dict[str, _Fire] = {}  # group -> the loaded function, looked up once per process


def fault_point(name: str, *, fail: Callable[[str], BaseException] | None = None) -> None:
    """Nothing unless ``SPARKBARRIER_FAULT`` is set; then fire ``name`` if it is armed.

    Called by library code on the driver or in executor Python workers; firing (the
    registered function's contract) kills the driver JVM (and this process) or raises
    ``fail(message)``.
    """
    if not os.environ.get(FAULT_ENV):
        return
    fire = _registered.get(FIRING_GROUP)
    if fire is None:
        found = sorted(entry_points(group=FIRING_GROUP), key=lambda ep: ep.value)
        if not found:
            raise ConfigError(
                f"{FAULT_ENV} is set ({os.environ[FAULT_ENV]!r}) but no fault firing code is installed (nothing "
                f"registers the entry point group {FIRING_GROUP!r}): it ships in the sparkbarrier-devstack "
                f"distribution (pip install ./devstack from a checkout; ./dev installs it), or unset {FAULT_ENV}",
                option=FAULT_ENV)
        fire = _registered[FIRING_GROUP] = found[0].load()
    fire(name, fail=fail)

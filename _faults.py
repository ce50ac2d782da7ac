"""The fault-point hook: where tests can kill the Spark driver or fail a task, at no cost otherwise.

Library code marks named places with one line, ``fault_point("sink.after_flush_before_commit")``
(the points and what firing does: ``sparkbarrier.devstack.faults``, docs/fault-tolerance.md).
This module is all of it that ships in the product wheel: with ``SPARKBARRIER_FAULT``
unset (always, in production) a point costs one environment lookup. With it set, the
hook hands over to the firing code in the ``sparkbarrier-devstack`` distribution (the
test and dev machinery, installed by ``./dev``), which parses the armed points and kills
the driver JVM or raises. Where that distribution is missing, an armed fault is an
error, never ignored: a test that arms a fault and sees no crash would pass for the
wrong reason.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from ._exceptions import ConfigError

__all__ = ["FAULT_ENV", "fault_point"]

FAULT_ENV = "SPARKBARRIER_FAULT"

_FIRING_MODULE = "sparkbarrier.devstack.faults"


def fault_point(name: str, *, fail: Callable[[str], BaseException] | None = None) -> None:
    """Nothing unless ``SPARKBARRIER_FAULT`` is set; then fire ``name`` if it is armed.

    Called by library code on the driver or in executor Python workers; firing kills the
    driver JVM (and this process) or raises ``fail(message)`` (see ``sparkbarrier.devstack.faults``).
    """
    if not os.environ.get(FAULT_ENV):
        return
    try:
        from .devstack.faults import fire
    except ModuleNotFoundError as err:
        if err.name not in ("sparkbarrier.devstack", _FIRING_MODULE):
            raise
        raise ConfigError(
            f"{FAULT_ENV} is set ({os.environ[FAULT_ENV]!r}) but the fault injection code, module "
            f"{_FIRING_MODULE}, is not installed: it ships in the sparkbarrier-devstack distribution "
            f"(pip install ./devstack from a checkout; ./dev installs it), or unset {FAULT_ENV}",
            option=FAULT_ENV) from err
    fire(name, fail=fail)

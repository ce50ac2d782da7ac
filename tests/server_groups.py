"""Session servers that live only as long as the tests that use them (tests only).

A session-scoped server fixture registers its stop with :func:`stop_when_unused`; it
then stops right after the last collected test that uses it (``tests/conftest.py``'s
hooks call :func:`note_users` and :func:`stop_after`), not at the end of the session, so
a group's servers (the fault suite's private stack, the 3-node Kafka cluster, HDFS, the
KDC and its Kerberized servers) do not share the two cores with every later group.
Dependents stop before what they depend on (the KDC last). A fixture's own ``finally``
calls the same stop, which runs once.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

GROUPED_SERVERS = ("private_stack", "kafka_cluster", "hdfs", "kerberos_hbase", "kerberos_kafka", "kdc")
_last_user: dict[str, str] = {}
_stops: dict[str, Callable[[], None]] = {}


def note_users(items: list[pytest.Item]) -> None:
    for item in items:
        for name in GROUPED_SERVERS:
            if name in getattr(item, "fixturenames", ()):
                _last_user[name] = item.nodeid


def stop_after(item: pytest.Item) -> None:
    for name in GROUPED_SERVERS:
        if _last_user.get(name) == item.nodeid and name in _stops:
            _stops.pop(name)()


def stop_when_unused(name: str, stop: Callable[[], None]) -> Callable[[], None]:
    """Register ``stop`` for after the last test using ``name``; returns what the fixture's
    own ``finally`` calls (a no-op once it ran)."""
    done = False

    def once() -> None:
        nonlocal done
        if not done:
            done = True
            stop()

    _stops[name] = once
    return once

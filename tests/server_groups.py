"""Session servers that live only as long as the tests that use them (tests only).

A session-scoped server fixture registers its stop with :func:`stop_when_unused`; it
then stops right after the last collected test that uses it (``tests/conftest.py``'s
hooks call :func:`note_users` and :func:`stop_after`), not at the end of the session, so
a group's servers (the fault suite's private stack, the 3-node Kafka cluster, HDFS, the
KDC and its Kerberized servers) do not share the two cores with every later group.
Dependents stop before what they depend on (the KDC last). A fixture's own ``finally``
calls the same stop, which runs once.

Two workers (pytest-xdist, ``./dev test``): :func:`worker_groups` puts every test of a
file, and every file that uses one of these servers (or the example sink's PostgreSQL),
into one ``xdist_group``, so each session server starts in one worker only, a
module-scoped server (a test file's own HDFS) once, and its last user runs where it
started. Why two workers on two cores: most of a server test's time is waiting (a JVM
starting, a trigger, a poll), so two queues fill the cores the suite left idle.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

GROUPED_SERVERS = ("private_stack", "kafka_cluster", "hdfs", "kerberos_hbase", "kerberos_kafka", "kdc")
# Session servers that are not stopped early but must still run in one worker only.
_ONE_WORKER = (*GROUPED_SERVERS, "postgres_dsn")
_last_user: dict[str, pytest.Item] = {}  # the item itself: xdist's loadgroup renames nodeids
_stops: dict[str, Callable[[], None]] = {}


def note_users(items: list[pytest.Item]) -> None:
    for item in items:
        for name in GROUPED_SERVERS:
            if name in getattr(item, "fixturenames", ()):
                _last_user[name] = item


def stop_after(item: pytest.Item) -> None:
    for name in GROUPED_SERVERS:
        if _last_user.get(name) is item and name in _stops:
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


def worker_groups(items: list[pytest.Item]) -> None:
    """Mark each item with the ``xdist_group`` of its file, files joined by the session
    servers their tests use (union-find over files and server names); then move the
    groups that hold a slow test (``slow``, or under tests/integration or tests/examples)
    ahead of the rest, each group's own order kept.

    Why the order: xdist hands out groups in collection order, so slow groups collected
    last left one worker running them alone at the end while the other idled; started
    first, the many short groups fill in around them (longest first)."""
    parent: dict[str, str] = {}

    def find(node: str) -> str:
        while parent.setdefault(node, node) != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for item in items:
        file = item.nodeid.split("::", 1)[0]
        find(file)
        for name in _ONE_WORKER:
            if name in getattr(item, "fixturenames", ()):
                parent[find(file)] = find(f"server:{name}")
    slow_groups = set()
    for item in items:
        root = find(item.nodeid.split("::", 1)[0])
        item.add_marker(pytest.mark.xdist_group(root.replace("/", ".")))
        if item.get_closest_marker("slow") or item.nodeid.startswith(("tests/integration/", "tests/examples/")):
            slow_groups.add(root)
    items.sort(key=lambda item: find(item.nodeid.split("::", 1)[0]) not in slow_groups)

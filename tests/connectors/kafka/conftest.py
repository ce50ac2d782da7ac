"""Fixture ``kafka``: a :class:`KafkaTool` on the shared ``kafka_bootstrap`` broker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kafka_testkit import KafkaTool


@pytest.fixture
def kafka(kafka_bootstrap: str) -> Iterator[KafkaTool]:
    tool = KafkaTool(kafka_bootstrap)
    yield tool
    tool.close()

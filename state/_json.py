"""The one type of JSON values, for every JSON form sparkbarrier writes or reads.

``json.loads`` returns ``Any``, so a field read from a parsed record was unchecked by the
type checker: a misspelt key or a number used as a mapping passed silently. :data:`Json`
names what JSON can hold; :func:`parse_json` is ``json.loads`` with that type, so a
reader has to narrow each value (``isinstance``, :func:`json_int`) before it uses it.

The containers are ``Sequence`` and ``Mapping`` (read-only, covariant) rather than
``list`` and ``dict``, so that a writer's ``dict[str, int]`` or ``list[str]`` is already
a :data:`Json` without a copy; ``json.loads`` itself gives lists and dicts.
(``bytes`` is a ``Sequence[int]`` and so passes too: a writer still encodes it itself.)

Pure Python, in the protocol floor: ``state/`` and ``connectors/`` both use it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TypeAlias

__all__ = ["Json", "json_int", "json_object", "parse_json"]

Json: TypeAlias = "bool | int | float | str | Sequence[Json] | Mapping[str, Json] | None"


def parse_json(text: str | bytes) -> Json:
    """``json.loads``, typed: raises what it raises (``ValueError``, ``UnicodeDecodeError``)."""
    value: Json = json.loads(text)
    return value


def json_object(value: Json, what: str) -> Mapping[str, Json]:
    """``value`` as a JSON object; ``TypeError`` (naming ``what``) when it is not one.

    ``TypeError`` is what indexing or ``.items()`` on the wrong JSON type raised before
    the reads were typed, so a reader's existing ``except`` still applies.
    """
    if not isinstance(value, Mapping):
        raise TypeError(f"{what} is a {type(value).__name__}, not a JSON object")
    return value


def json_int(value: Json) -> int:
    """``int(value)`` for a JSON value: a number or a numeric string, as ``int()`` takes them.

    Raises ``TypeError`` for null, lists and objects and ``ValueError`` for other strings,
    the errors ``int()`` itself raises, so a reader's existing ``except`` still applies.
    """
    if isinstance(value, (int, float, str)):
        return int(value)
    raise TypeError(f"expected a number, got {type(value).__name__} {value!r}")

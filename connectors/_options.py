"""Declared options: one spec per option, parsed once, documented from the specs.

Spark hands a data source its options as a case-insensitive dict of strings. Each
connector declares an :class:`OptionSpec` per key; :func:`parse_options` validates
every value, rejects unknown keys with the list of valid ones, and returns the parsed
values (:class:`OptionValues`), which the connector reads through typed accessors into
its frozen options dataclass.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TypeAlias, TypeVar

from .._exceptions import ConfigError

__all__ = [
    "TYPE_NAMES",
    "OptionSpec",
    "OptionValue",
    "OptionValues",
    "enum_choices",
    "enum_parser",
    "is_secret_key",
    "options_table",
    "parse_bool",
    "parse_duration_ms",
    "parse_int",
    "parse_non_negative_int",
    "parse_nonempty",
    "parse_optional_port",
    "parse_options",
    "parse_port",
    "parse_positive_int",
    "parse_positive_size",
    "parse_size",
    "parse_string",
    "parse_stripped",
    "parse_timestamp_ms",
    "redact",
]

_SECRET_WORDS = ("password", "secret", "jaas", "token", "key")
# Kafka/Spark option names that contain "key" but never hold secrets.
_NOT_SECRET = {"key.deserializer", "key.serializer", "kafka.key.deserializer", "kafka.key.serializer"}


def is_secret_key(key: str) -> bool:
    """True when the option's value must never be logged or stored."""
    low = key.lower()
    if low in _NOT_SECRET:
        return False
    return any(word in low for word in _SECRET_WORDS)


V = TypeVar("V")


def redact(options: Mapping[str, V]) -> dict[str, V | str]:
    """A copy of ``options`` that is safe to log: secret values replaced."""
    return {k: ("***" if is_secret_key(k) else v) for k, v in options.items()}


def parse_bool(key: str, raw: str) -> bool:
    low = raw.strip().lower()
    if low == "true":
        return True
    if low == "false":
        return False
    raise ConfigError(f"option {key!r} must be 'true' or 'false', got {raw!r}", option=key)


def parse_int(key: str, raw: str, *, minimum: int | None = None) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        raise ConfigError(f"option {key!r} must be a whole number, got {raw!r}", option=key) from None
    if minimum is not None and value < minimum:
        raise ConfigError(f"option {key!r} must be >= {minimum}, got {value}", option=key)
    return value


_SIZE_UNITS = {"": 1, "b": 1, "kb": 1024, "k": 1024, "mb": 1024**2, "m": 1024**2, "gb": 1024**3, "g": 1024**3}
_SIZE_RE = re.compile(r"^\s*(\d+)\s*([a-zA-Z]*)\s*$")


def parse_size(key: str, raw: str) -> int:
    """Bytes from ``"2mb"``, ``"512kb"``, ``"1048576"``."""
    match = _SIZE_RE.match(raw)
    unit = match.group(2).lower() if match else None
    if not match or unit not in _SIZE_UNITS:
        raise ConfigError(
            f"option {key!r} must be a size such as '2mb', '512kb' or a byte count, got {raw!r}",
            option=key,
        )
    return int(match.group(1)) * _SIZE_UNITS[unit]


_DURATION_UNITS = {"ms": 1, "s": 1000, "sec": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000}
_DURATION_RE = re.compile(r"^\s*(\d+)\s*([a-zA-Z]*)\s*$")


def parse_duration_ms(key: str, raw: str) -> int:
    """Milliseconds from ``"1s"``, ``"500ms"``, ``"5m"``; a bare number means ms."""
    match = _DURATION_RE.match(raw)
    unit = (match.group(2).lower() or "ms") if match else None
    if not match or unit not in _DURATION_UNITS:
        raise ConfigError(
            f"option {key!r} must be a duration such as '1s', '500ms' or '5m', got {raw!r}",
            option=key,
        )
    return int(match.group(1)) * _DURATION_UNITS[unit]


def parse_string(_key: str, raw: str) -> str:
    """The value exactly as given."""
    return raw


def parse_stripped(_key: str, raw: str) -> str:
    """The value without surrounding whitespace (may be empty)."""
    return raw.strip()


def parse_nonempty(key: str, raw: str) -> str:
    """The value without surrounding whitespace; empty is an error."""
    value = raw.strip()
    if not value:
        raise ConfigError(f"option {key!r} must not be empty", option=key)
    return value


def parse_positive_int(key: str, raw: str) -> int:
    return parse_int(key, raw, minimum=1)


def parse_non_negative_int(key: str, raw: str) -> int:
    return parse_int(key, raw, minimum=0)


def parse_port(key: str, raw: str) -> int:
    value = parse_int(key, raw, minimum=1)
    if value > 65535:
        raise ConfigError(f"option {key!r} must be a TCP port (1..65535), got {value}", option=key)
    return value


def parse_optional_port(key: str, raw: str) -> int | None:
    """A port, or None for an empty value."""
    return parse_port(key, raw) if raw.strip() else None


def parse_positive_size(key: str, raw: str) -> int:
    value = parse_size(key, raw)
    if value < 1:
        raise ConfigError(f"option {key!r} must be at least 1 byte", option=key)
    return value


def parse_timestamp_ms(key: str, raw: str) -> int:
    """Epoch milliseconds, or an ISO-8601 time (``2026-11-22T10:00:00Z``; no zone = UTC)."""
    text = raw.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    import datetime as dt

    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"option {key!r} takes epoch milliseconds or an ISO-8601 time, got {raw!r}",
                          option=key) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return int(when.timestamp() * 1000)


E = TypeVar("E", bound=enum.Enum)

OptionValue: TypeAlias = bool | int | str | enum.Enum | None
"""What a spec's parser returns (and its default is): the parsers above, or an enum member."""


def enum_choices(cls: type[enum.Enum]) -> tuple[str, ...]:
    """The accepted spellings of a choice option: the enum's values, in order."""
    return tuple(member.value for member in cls)


def enum_parser(cls: type[E]) -> Callable[[str, str], E]:
    """A parser for a choice option; :meth:`OptionSpec.convert` has already checked the spelling."""

    def parse(_key: str, raw: str) -> E:
        return cls(raw)

    return parse


# The one vocabulary of the "type" column in the generated option tables; a choice
# option shows its spellings (``a \\| b``) instead.
TYPE_NAMES = ("bool", "int", "long", "size", "duration", "timestamp", "string")


T = TypeVar("T")


class OptionValues(Mapping[str, OptionValue]):
    """The parsed values of one :func:`parse_options` call, read through typed accessors.

    A spec's parser fixes the type of its key's value, but a mapping of
    :data:`OptionValue` forgets which key holds which type: every read would be a union
    to narrow by hand. Each accessor checks the value's type at run time and returns it narrowed. A
    mismatch means a spec and its reader disagree -- a bug, not a user's mistake -- so it
    raises ``TypeError`` naming the key, never a :class:`ConfigError`; a key no spec
    declares raises ``KeyError``, as indexing the plain dict did.
    """

    __slots__ = ("_values",)

    def __init__(self, values: Mapping[str, OptionValue]) -> None:
        self._values = dict(values)

    def __getitem__(self, key: str) -> OptionValue:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"OptionValues({redact(self._values)!r})"

    def _required(self, key: str, kind: type[T]) -> T:
        value = self._values[key]
        # bool is an int subclass: an int reader must not take a flag.
        if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
            return value
        # The type only, never the value: it may be a secret (``is_secret_key``).
        raise TypeError(f"option {key!r} holds a {type(value).__name__}, its reader wants a "
                        f"{kind.__name__}: the spec and its reader disagree")

    def _optional(self, key: str, kind: type[T]) -> T | None:
        return None if self._values[key] is None else self._required(key, kind)

    def text(self, key: str) -> str:
        """A string value (``parse_string``, ``parse_stripped``, ``parse_nonempty``)."""
        return self._required(key, str)

    def optional_text(self, key: str) -> str | None:
        """A string value whose spec's default is None (None: the option was not set)."""
        return self._optional(key, str)

    def integer(self, key: str) -> int:
        """A whole number (ports, counts, sizes, durations, timestamps); never a bool."""
        return self._required(key, int)

    def optional_integer(self, key: str) -> int | None:
        """A whole number whose spec's default is None (None: the option was not set)."""
        return self._optional(key, int)

    def flag(self, key: str) -> bool:
        """A ``parse_bool`` value."""
        return self._required(key, bool)

    def choice(self, key: str, cls: type[E]) -> E:
        """A choice option's enum member (``enum_parser(cls)``)."""
        return self._required(key, cls)


@dataclass(frozen=True)
class OptionSpec:
    """One option: its key (as documented), how to parse it, its default, its meaning."""

    key: str
    parse: Callable[[str, str], OptionValue]
    default: OptionValue
    description: str
    required: bool = False
    type_name: str = "string"
    choices: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if self.type_name not in TYPE_NAMES:
            raise ValueError(f"option spec {self.key!r}: type_name {self.type_name!r} is not one of {TYPE_NAMES}")

    def convert(self, raw: str) -> OptionValue:
        if self.choices:
            low = raw.strip().lower()
            if low not in self.choices:
                raise ConfigError(
                    f"option {self.key!r} must be one of {', '.join(self.choices)}; got {raw!r}",
                    option=self.key,
                )
            return self.parse(self.key, low)
        return self.parse(self.key, raw)


def parse_options(
    raw: Mapping[str, str],
    specs: Iterable[OptionSpec],
    *,
    prefixes: Iterable[str] = (),
    ignored: Iterable[str] = ("path",),
    source_name: str = "data source",
    renamed: Mapping[str, str] | None = None,
) -> tuple[OptionValues, dict[str, str]]:
    """Validate ``raw`` against ``specs``.

    Returns ``(values, passthrough)``: ``values`` maps every spec key to its parsed
    value (or default); ``passthrough`` holds the keys that start with one of
    ``prefixes`` (e.g. ``kafka.``), lower-cased, copied untouched. Keys are matched
    case-insensitively because Spark's option map is case-insensitive. A key in
    ``renamed`` (old -> new) is an error naming the new key: silently ignoring it would
    run the sink with the default.
    """
    by_key = {s.key.lower(): s for s in specs}
    prefixes = tuple(p.lower() for p in prefixes)
    ignored_keys = {k.lower() for k in ignored}
    values: dict[str, OptionValue] = {s.key: s.default for s in by_key.values()}
    passthrough: dict[str, str] = {}
    seen: set[str] = set()
    renamed_keys = {k.lower(): v for k, v in (renamed or {}).items()}
    for key, value in raw.items():
        low = key.lower()
        if low in renamed_keys:
            raise ConfigError(f"option {key!r} of {source_name} is now {renamed_keys[low]!r} (same values); "
                              f"set {renamed_keys[low]!r} instead", option=key)
        if low in ignored_keys:
            continue
        spec = by_key.get(low)
        if spec is not None:
            values[spec.key] = spec.convert(str(value))
            seen.add(spec.key)
        elif prefixes and low.startswith(prefixes):
            passthrough[low] = str(value)
        else:
            valid = sorted(s.key for s in by_key.values())
            extra = f" or any key starting with {', '.join(repr(p) for p in prefixes)}" if prefixes else ""
            raise ConfigError(
                f"unknown option {key!r} for {source_name}; valid options are: "
                f"{', '.join(valid)}{extra}",
                option=key,
            )
    missing = [s.key for s in by_key.values() if s.required and s.key not in seen]
    if missing:
        raise ConfigError(
            f"{source_name} needs option(s) {', '.join(repr(m) for m in missing)}",
            option=missing[0],
        )
    return OptionValues(values), passthrough


def options_table(specs: Iterable[OptionSpec]) -> str:
    """A Markdown table of the options, for docs/options.md and its siblings (generated, never hand-written)."""
    lines = ["| option | type | default | meaning |", "| --- | --- | --- | --- |"]
    for s in specs:
        shown: object
        if isinstance(s.default, bool):
            shown = str(s.default).lower()
        elif isinstance(s.default, enum.Enum):
            shown = s.default.value
        else:
            shown = s.default
        default = "(required)" if s.required else "" if s.default in (None, "") else f"`{shown}`"
        kind = " \\| ".join(s.choices) if s.choices else s.type_name
        lines.append(f"| `{s.key}` | {kind} | {default} | {s.description} |")
    return "\n".join(lines)

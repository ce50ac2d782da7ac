"""Parsed option values (``connectors/_options.py``): typed reads that catch a spec and its
reader disagreeing. Parsing and its user-facing errors are tested per connector
(tests/connectors/kafka/test_options.py and the HBase option tests)."""

from __future__ import annotations

import enum

import pytest

from sparkbarrier.connectors._options import (
    OptionSpec,
    enum_parser,
    parse_bool,
    parse_optional_port,
    parse_options,
    parse_positive_int,
    parse_stripped,
)


class _Color(str, enum.Enum):
    RED = "red"
    BLUE = "blue"


SPECS = (
    OptionSpec("name", parse_stripped, "", "a string"),
    OptionSpec("count", parse_positive_int, 3, "an int", type_name="int"),
    OptionSpec("port", parse_optional_port, None, "an optional int", type_name="int"),
    OptionSpec("on", parse_bool, False, "a flag", type_name="bool"),
    OptionSpec("color", enum_parser(_Color), _Color.RED, "a choice", choices=("red", "blue")),
    OptionSpec("secret.password", parse_stripped, "", "a secret"),
)


def test_accessors_return_parsed_values_and_defaults() -> None:
    values, _ = parse_options({"name": " x ", "PORT": "9090", "on": "true", "color": "Blue"}, SPECS)
    assert values.text("name") == "x" and values.integer("count") == 3
    assert values.optional_integer("port") == 9090 and values.flag("on") is True
    assert values.choice("color", _Color) is _Color.BLUE
    assert dict(values) == {"name": "x", "count": 3, "port": 9090, "on": True, "color": _Color.BLUE,
                            "secret.password": ""}


def test_an_unset_optional_value_is_none() -> None:
    values, _ = parse_options({}, SPECS)
    assert values.optional_integer("port") is None and values["port"] is None


def test_a_reader_that_disagrees_with_its_spec_is_a_type_error_naming_the_key() -> None:
    values, _ = parse_options({"secret.password": "hunter2"}, SPECS)
    with pytest.raises(TypeError, match="'on' holds a bool, its reader wants a int"):
        values.integer("on")  # bool is an int subclass, still not a number
    with pytest.raises(TypeError, match="'count'"):
        values.text("count")
    with pytest.raises(TypeError, match="'name'"):
        values.optional_integer("name")
    with pytest.raises(TypeError, match="'secret.password' holds a str") as caught:
        values.flag("secret.password")
    assert "hunter2" not in str(caught.value)
    with pytest.raises(KeyError):
        values.text("undeclared")


def test_repr_hides_secret_values() -> None:
    values, _ = parse_options({"secret.password": "hunter2"}, SPECS)
    assert "hunter2" not in repr(values) and "'***'" in repr(values)

"""The fast decoder says exactly what `json.loads` says: the same value, or invalid."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coding_agent_exporter.sources.decode import loads

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def verdict(decode: Any, data: bytes) -> tuple[str, str]:
    try:
        return ("ok", repr(decode(data)))
    except (ValueError, RecursionError):
        return ("invalid", "")


@given(st.binary(max_size=60))
def test_any_bytes_get_the_standard_librarys_verdict(data: bytes) -> None:
    assert verdict(loads, data) == verdict(json.loads, data)


@given(_JSON)
def test_valid_json_decodes_to_the_same_value(value: object) -> None:
    for text in (json.dumps(value), json.dumps(value, ensure_ascii=False)):
        assert verdict(loads, text.encode()) == verdict(json.loads, text.encode())


@pytest.mark.parametrize(
    "data",
    [
        b'{"a": NaN}',
        b'{"a": -Infinity}',
        b'{"a": 1e400}',
        b'{"a": "\\ud800"}',
        b'\xef\xbb\xbf{"a": 1}',
        '{"a": "é"}'.encode("utf-16"),
        b"123456789012345678901234567890",
    ],
)
def test_what_only_the_standard_library_accepts_still_decodes(data: bytes) -> None:
    assert verdict(loads, data) == verdict(json.loads, data)
    assert verdict(loads, data)[0] == "ok"


def test_nan_stays_nan() -> None:
    value = loads(b'{"a": NaN}')
    assert isinstance(value, dict) and math.isnan(value["a"])


@pytest.mark.parametrize("data", [b"{not json", b"[1, 2", b'{"a": 1}x', b'{"a": "\xff"}'])
def test_invalid_json_is_a_value_error(data: bytes) -> None:
    with pytest.raises(ValueError):
        loads(data)


def test_nesting_too_deep_is_invalid_not_a_crash() -> None:
    with pytest.raises(ValueError):
        loads(b"[" * 100_000)

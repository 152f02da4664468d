"""JSON decoding: msgspec's speed with the standard library's verdict.

`loads` decodes with msgspec (about 10x faster than `json` on agent journals). msgspec is
stricter than `json` in a few corners (`NaN` and `Infinity`, numbers beyond a double, lone
surrogate escapes, a byte-order mark, UTF-16/32 input): a line it refuses is handed to `json`,
so what decodes, and what counts as invalid, is exactly what `json.loads` says. Nesting too
deep for either decoder is invalid too (`ValueError`), not a crash of the reading loop.

`lean(schema)` decodes only the fields a reader looks at (a harness's `TypedDict` schema, which
msgspec decodes straight into dicts: no object made per record and converted after), into the
same dicts and lists: skipped fields are not built, fields typed `msgspec.Raw` stay
undecoded JSON (`whole` decodes one). A line that does not fit the schema is decoded whole by
`loads`, so the verdict on a line is still `json.loads`'s, except that the bytes of skipped
fields are not checked for valid UTF-8.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import msgspec

__all__ = ["Decode", "lean", "loads", "whole"]

Data = bytes | memoryview | str
Decode = Callable[[Data], object]

_decode = msgspec.json.Decoder().decode


def loads(data: Data) -> object:
    """The JSON value of `data`; `ValueError` when `json.loads` would refuse it."""
    try:
        return _decode(data)
    except (msgspec.DecodeError, RecursionError):
        pass
    try:
        value: object = json.loads(bytes(data) if isinstance(data, memoryview) else data)
    except RecursionError as error:
        raise ValueError(f"nested too deeply: {error}") from None
    return value


def lean(schema: type) -> Decode:
    """A decoder building only `schema`'s fields (see the module's text)."""
    decode: Callable[[Data], object] = msgspec.json.Decoder(schema).decode

    def run(data: Data) -> object:
        try:
            return decode(data)
        except (msgspec.DecodeError, RecursionError):
            return loads(data)

    return run


def whole(value: object) -> object:
    """`value`, with an undecoded `msgspec.Raw` decoded (a lean decoder's skipped JSON)."""
    return loads(bytes(memoryview(value))) if isinstance(value, msgspec.Raw) else value

"""An object's attributes by name, whether it has a `__dict__` or was compiled by mypyc.

The catch-up cache keeps the state as its attributes (`runtime.engine`), and `asleep.Asleep`
pickles its own. A class compiled by mypyc (`setup.py`) has no `__dict__`: its attributes are
the names its class lists (`__mypyc_attrs__`, those of its bases included), each set only once
assigned.
"""

from __future__ import annotations

from typing import Any


def attributes(obj: object) -> dict[str, Any]:
    """`obj`'s attributes, by name (a new dict)."""
    names: tuple[str, ...] | None = getattr(type(obj), "__mypyc_attrs__", None)
    if names is None:
        return dict(vars(obj))
    return {name: getattr(obj, name) for name in names if hasattr(obj, name)}


def assign(obj: object, values: dict[str, Any]) -> None:
    """Set `obj`'s attributes to `values` (others left as they are)."""
    for name, value in values.items():
        setattr(obj, name, value)

"""Which code wrote a catch-up cache: a digest of the source of every module that decides what a
catch-up builds (`READING` and what they import, found in their source), of which of them run
compiled, and of the Python running them. A cache is used only by code of the same digest
(`cache.Cache`), so an edit of a reader, the state or the reading loop starts from the files
again, while one of only what is published keeps the cache."""

from __future__ import annotations

import hashlib
import os
import re
import sys
from functools import cache
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]
"""The whole package (this module is in `coding_agent_exporter/runtime/`)."""
READING = (
    "runtime/engine.py",
    "runtime/config.py",
    "runtime/cache.py",
    "sources/processes.py",
    "sources/terminals.py",
)
"""What decides what a catch-up builds: the reading loop (and through its imports the sources,
harnesses, events and state), the configuration that makes the harnesses and what they may ask
of the machine (`Probes`), this cache."""
DATA = ("state/prices.json",)
"""Data the reading uses: the prices the state's costs come from."""
VERSION_ONLY = "__init__.py"
"""The package's own module holds only its version: a new version that reads the same keeps
the cache."""


@cache
def code_digest() -> str:
    """A digest of the source of the modules that decide what a catch-up builds (`reading`),
    of which of them run compiled (`compiled`), and of the Python running it."""
    digest = hashlib.sha256(sys.version.encode())
    built = compiled(PACKAGE)
    for name in [*sorted(reading()), *DATA]:
        digest.update(name.encode() + (b" compiled" if name in built else b"") + b"\0")
        digest.update((PACKAGE / name).read_bytes() + b"\0")
    return digest.hexdigest()


def file_digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "unreadable"


def reading() -> set[str]:
    """`READING` and every module of the package they import, anywhere in their source, with
    the packages holding them (an import runs their `__init__.py`): paths relative to the
    package, less `VERSION_ONLY`. The imports are found by their shape in the text (a start
    must not parse 50 modules); one written in a docstring only adds a module."""
    found: set[str] = set()
    todo = list(READING)
    while todo:
        name = todo.pop()
        if name in found or name == VERSION_ONLY:
            continue
        found.add(name)
        folders = name.split("/")[:-1]
        todo += ["/".join([*folders[:i], "__init__.py"]) for i in range(1, len(folders) + 1)]
        todo += _imported(name, (PACKAGE / name).read_text())
    return found


_FROM = re.compile(r"^[ \t]*from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)", re.M)
_IMPORT = re.compile(r"^[ \t]*import[ \t]+coding_agent_exporter\.([\w.]+)", re.M)


def _imported(name: str, source: str) -> list[str]:
    """The package's modules that module `name`, of source `source`, imports."""
    found = [m for w in _IMPORT.findall(source) if (m := _module(w.split("."))) is not None]
    for dots, module, names in _FROM.findall(source):
        if dots:
            base = [*name.split("/")[: -len(dots)], *module.split(".")]
        elif module.split(".")[0] == "coding_agent_exporter":
            base = module.split(".")[1:]
        else:
            continue
        base = [part for part in base if part]
        listed = re.sub(r"#[^\n]*|[()]", "", names).split(",")
        wanted = [[*base, n.split()[0]] for n in listed if n.strip()] + [base]
        found += [m for w in wanted if (m := _module(w)) is not None]
    return found


def _module(parts: list[str]) -> str | None:
    """The source file of module `parts` (a package: its `__init__.py`), if the package has it."""
    stem = "/".join(parts)
    for candidate in (f"{stem}.py", f"{stem}/__init__.py" if stem else "__init__.py"):
        if candidate in _sources(PACKAGE):
            return candidate
    return None


@cache
def _sources(package: Path) -> frozenset[str]:
    """Every module of `package`, relative to it (one walk, not a `stat` per imported name)."""
    return frozenset(name for name in _files(package) if name.endswith(".py"))


@cache
def compiled(package: Path) -> frozenset[str]:
    """The modules of `package` that Python imports from a C extension beside their source (a
    wheel compiled by mypyc: `setup.py`), as their sources' paths. A compiled class may pickle
    otherwise than its pure self: a cache is read only by the build that wrote it."""
    found = set()
    for name in _files(package):
        suffix = next((s for s in EXTENSION_SUFFIXES if name.endswith(s)), None)
        if suffix is not None:
            found.add(name.removesuffix(suffix) + ".py")
    return frozenset(found)


@cache
def _files(package: Path) -> frozenset[str]:
    return frozenset(
        os.path.relpath(os.path.join(folder, name), package)
        for folder, _, names in os.walk(package)
        for name in names
    )

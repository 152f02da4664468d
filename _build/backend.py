"""The PEP 517 backend (`pyproject.toml`, `backend-path`): setuptools', asking for mypy only for
a wheel that will be compiled (`setup.py`).

`pip install .` builds a wheel: it gets mypy (mypyc) and what its type check imports (`TYPED`)
as build requirements and compiles the per-record modules. An editable install (`pip install
-e`, the tests' and `.ci/run`'s) and a source distribution stay pure Python and need no mypy;
so does any build under `CODING_AGENT_EXPORTER_PURE_PYTHON=1`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403  (every hook not overridden here)

PURE = "CODING_AGENT_EXPORTER_PURE_PYTHON"
MYPYC = "mypy>=1.10"
"""What compiles: mypyc comes with mypy (the version the tests type-check with)."""
TYPED = (
    "msgspec>=0.18",
    "zstandard>=0.22",
    "psutil>=5.9",
    "pyyaml>=6",
    "types-psutil",
    "types-PyYAML",
)
"""What mypyc's type check imports beside the package (a dependency, or its stubs): pip builds a
wheel before it installs the dependencies, in an environment of its own holding only what this
asks for; without them mypy fails on the first `import msgspec` and the wheel is pure."""


@contextmanager
def _pure() -> Iterator[None]:
    """Run a hook with `setup.py` building pure Python (no mypyc imported, nothing compiled)."""
    before = os.environ.get(PURE)
    os.environ[PURE] = "1"
    try:
        yield
    finally:
        if before is None:
            del os.environ[PURE]
        else:
            os.environ[PURE] = before


def get_requires_for_build_wheel(config_settings: Any = None) -> list[str]:
    with _pure():
        requires: list[str] = _setuptools.get_requires_for_build_wheel(config_settings)
    return requires if os.environ.get(PURE) == "1" else [*requires, MYPYC, *TYPED]


def prepare_metadata_for_build_wheel(metadata_directory: str, config_settings: Any = None) -> str:
    with _pure():
        name: str = _setuptools.prepare_metadata_for_build_wheel(
            metadata_directory, config_settings
        )
    return name


def get_requires_for_build_editable(config_settings: Any = None) -> list[str]:
    with _pure():
        requires: list[str] = _setuptools.get_requires_for_build_editable(config_settings)
    return requires


def prepare_metadata_for_build_editable(
    metadata_directory: str, config_settings: Any = None
) -> str:
    with _pure():
        name: str = _setuptools.prepare_metadata_for_build_editable(
            metadata_directory, config_settings
        )
    return name


def build_editable(
    wheel_directory: str, config_settings: Any = None, metadata_directory: str | None = None
) -> str:
    with _pure():
        name: str = _setuptools.build_editable(wheel_directory, config_settings, metadata_directory)
    return name


def get_requires_for_build_sdist(config_settings: Any = None) -> list[str]:
    with _pure():
        requires: list[str] = _setuptools.get_requires_for_build_sdist(config_settings)
    return requires


def build_sdist(sdist_directory: str, config_settings: Any = None) -> str:
    with _pure():
        name: str = _setuptools.build_sdist(sdist_directory, config_settings)
    return name

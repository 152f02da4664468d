"""The build: the per-record modules compiled with mypyc where it can, else pure Python.

pyproject.toml holds the project's metadata; this file adds only the compiled modules. They are
compiled from the very typed Python they are (mypyc, from mypy), into C extensions beside the
`.py` files, which Python then imports first. The build falls back to a pure wheel, with a
warning, when mypyc is not installed, when no C compiler or no `Python.h` answers, or when the
compile fails; and builds pure without trying when `CODING_AGENT_EXPORTER_PURE_PYTHON=1`
(`_build/backend.py` sets it for editable installs and source distributions).
`CODING_AGENT_EXPORTER_REQUIRE_COMPILED=1` turns every fallback into a failure (CI).
"""

from __future__ import annotations

import os
import sys
import sysconfig
import tempfile
import warnings
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

PURE = "CODING_AGENT_EXPORTER_PURE_PYTHON"
REQUIRE = "CODING_AGENT_EXPORTER_REQUIRE_COMPILED"
COMPILED = (
    "coding_agent_exporter/events.py",
    "coding_agent_exporter/sources/decode.py",
    "coding_agent_exporter/sources/tail.py",
    "coding_agent_exporter/harnesses/fields.py",
    "coding_agent_exporter/harnesses/claude_code/fields.py",
    "coding_agent_exporter/harnesses/claude_code/journal.py",
    "coding_agent_exporter/harnesses/claude_code/workflow.py",
    "coding_agent_exporter/harnesses/codex/fields.py",
    "coding_agent_exporter/harnesses/codex/rollout.py",
    "coding_agent_exporter/harnesses/codex/tools.py",
    "coding_agent_exporter/state/asleep.py",
    "coding_agent_exporter/state/attributes.py",
    "coding_agent_exporter/state/base.py",
    "coding_agent_exporter/state/responses.py",
    "coding_agent_exporter/state/seen.py",
    "coding_agent_exporter/state/session.py",
    "coding_agent_exporter/state/spend.py",
    "coding_agent_exporter/state/state.py",
    "coding_agent_exporter/state/totals.py",
    "coding_agent_exporter/state/windows.py",
    "coding_agent_exporter/state/work.py",
)
"""The modules every record goes through (read, decoded, turned into events, folded); each
must be mypyc-safe: no `__dict__`, no monkeypatching, what the cache pickles reducible
(`tests/test_compiled.py` proves the outputs equal the pure modules')."""


class PureFallback(Exception):
    """Why this build cannot compile."""


def _fallback(why: str) -> None:
    if os.environ.get(REQUIRE) == "1":
        sys.exit(f"coding-agent-exporter: cannot compile ({why}) and {REQUIRE}=1")
    warnings.warn(f"coding-agent-exporter: building pure Python: {why}", stacklevel=2)


def _check_compiler() -> None:
    """A C compiler that builds against this Python's headers, or `PureFallback`."""
    include = Path(sysconfig.get_paths()["include"])
    if not (include / "Python.h").is_file():
        raise PureFallback(f"no Python.h in {include}")
    from setuptools._distutils.ccompiler import new_compiler
    from setuptools._distutils.errors import CCompilerError, DistutilsError
    from setuptools._distutils.sysconfig import customize_compiler

    compiler = new_compiler()
    customize_compiler(compiler)
    with tempfile.TemporaryDirectory() as scratch:
        source = Path(scratch, "probe.c")
        source.write_text("#include <Python.h>\nint probe(void) { return 0; }\n")
        try:
            compiler.compile([str(source)], output_dir=scratch, include_dirs=[str(include)])
        except (CCompilerError, DistutilsError, OSError) as error:
            raise PureFallback(f"no working C compiler ({error})") from None


def compiled_modules() -> list[Any]:
    """The extensions to build (none: a pure wheel)."""
    if os.environ.get(PURE) == "1":
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        _fallback("mypyc is not installed (it comes with mypy)")
        return []
    try:
        _check_compiler()
        return list(mypycify(list(COMPILED), opt_level="3", group_name="coding_agent_exporter"))
    except PureFallback as why:
        _fallback(str(why))
    except (Exception, SystemExit) as error:  # mypyc refused the code: a type error it found
        _fallback(f"mypyc failed: {error!r}")
    return []


class BuildExt(build_ext):
    """Compiles the extensions; a compile that fails leaves the pure modules (a warning)."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as error:
            if os.environ.get(REQUIRE) == "1":
                raise
            _fallback(f"the C compile failed: {error!r}")
            for output in self.get_outputs():
                Path(output).unlink(missing_ok=True)
            self.extensions = []


class BuildPy(build_py):
    """Copies the modules, first removing the extensions an earlier build left in the build
    folder (pip builds in the checkout's `build/`): a wheel holds only what this build made."""

    def run(self) -> None:
        root = Path(self.build_lib)
        for found in [
            *root.glob("coding_agent_exporter*"),
            *root.glob("coding_agent_exporter/**/*"),
        ]:
            if found.is_file() and found.name.endswith(tuple(EXTENSION_SUFFIXES)):
                found.unlink()
        super().run()


if __name__ == "__main__":
    setup(ext_modules=compiled_modules(), cmdclass={"build_ext": BuildExt, "build_py": BuildPy})

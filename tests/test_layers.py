"""The package's layout is its data flow: each stage imports only the stages before it, and a
harness does no I/O (ARCHITECTURE.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from .conftest import ROOT

PACKAGE = ROOT / "coding_agent_exporter"
ALLOWED = {
    "events": set(),
    "sources": {"events"},
    "harnesses": {"events", "sources"},
    "state": {"events"},
    "prometheus": {"events", "state"},
    "traces": {"events", "state", "sources"},  # `sources.statedir`: the state folder's files
    "otlp": {"traces", "sources"},  # the registry's families, sent like spans (`traces.sdk`'s TLS)
    "web": {"events", "state", "prometheus"},
}
"""Stage → the stages it may import (besides itself and the package's `__version__`); `runtime`
may import every one."""
IO_MODULES = {"os", "io", "psutil", "sqlite3", "subprocess", "socket", "shutil", "tempfile"}
IO_CALLS = {"open", "read_text", "read_bytes", "write_text", "stat", "exists", "iterdir", "glob"}


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def stage_of(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0].removesuffix(".py") if len(rel.parts) > 1 else rel.stem


def imported_stages(path: Path, root: Path = ROOT) -> set[str]:
    """The stages of the package that `path` (in a checkout at `root`) imports."""
    tree = ast.parse(path.read_text())
    here = list(path.relative_to(root).with_suffix("").parts)[:-1]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - node.level + 1]
                target = [*base, *(node.module.split(".") if node.module else [])]
            else:
                target = (node.module or "").split(".")
            if target[0] != "coding_agent_exporter":
                continue
            if len(target) > 1:
                found.add(target[1])
            else:  # `from coding_agent_exporter import x` / `from .. import x`
                found |= {alias.name for alias in node.names if alias.name != "__version__"}
        elif isinstance(node, ast.Import):
            found |= {
                a.name.split(".")[1]
                for a in node.names
                if a.name.startswith("coding_agent_exporter.")
            }
    return found


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_a_stage_imports_only_the_stages_before_it(path: Path) -> None:
    stage = stage_of(path)
    if stage in ("runtime", "__init__", "__main__"):
        return
    others = imported_stages(path) - {stage}
    assert others <= ALLOWED[stage], f"{stage} may not import {sorted(others - ALLOWED[stage])}"


HARNESS_MODULES = sorted((PACKAGE / "harnesses").rglob("*.py"))
AGENT_PACKAGES = sorted(p.parent for p in (PACKAGE / "harnesses").glob("*/__init__.py"))


@pytest.mark.parametrize(
    "path", HARNESS_MODULES, ids=lambda p: str(p.relative_to(PACKAGE / "harnesses"))
)
def test_a_harness_does_no_io(path: Path) -> None:
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names.append(node.module or "" if isinstance(node, ast.ImportFrom) else "")
            assert not {n.split(".")[0] for n in names} & IO_MODULES, ast.unparse(node)
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            assert name not in IO_CALLS, f"line {node.lineno}: {ast.unparse(node)}"


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    """The walk above finds what it must: a state module that imports the runtime."""
    module = tmp_path / "coding_agent_exporter" / "state" / "bad.py"
    module.parent.mkdir(parents=True)
    module.write_text(
        "from ..runtime.engine import Engine\nfrom coding_agent_exporter.web import views\n"
    )
    assert imported_stages(module, tmp_path) == {"runtime", "web"}


@pytest.mark.parametrize("package", AGENT_PACKAGES, ids=lambda p: p.name)
def test_an_agent_is_one_package_with_a_readme_that_imports_no_other_agent(package: Path) -> None:
    """`harnesses/<agent>/`: its reader modules, a README of what it reads, and imports of the
    shared interface (`base`, `fields`) but of no other agent's package."""
    readme = package / "README.md"
    assert readme.is_file(), f"{package.name} has no README.md"
    text = readme.read_text()
    for section in (
        "## Files read",
        "## Versions recorded",
        "## What it reveals",
        "## What it cannot tell",
    ):
        assert section in text, f"{readme}: no {section!r} section"
    others = {p.name for p in AGENT_PACKAGES} - {package.name}
    for module in package.rglob("*.py"):
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level >= 2 and node.module:
                assert node.module.split(".")[0] not in others, f"{module}: {ast.unparse(node)}"


def test_every_registered_harness_lives_in_its_own_package() -> None:
    from coding_agent_exporter.harnesses import HARNESSES

    for name, harness in HARNESSES.items():
        parts = harness.__module__.split(".")
        assert parts[:2] == ["coding_agent_exporter", "harnesses"] and len(parts) == 4, name

"""The compiled build gives what the pure modules give (`setup.py`: the per-record modules
compiled by mypyc from the same typed Python).

Over every recorded scenario, the installed package and the pure source tree, each imported by
a process of its own (`outputs_of`), catch up with the catch-up cache on and compare: the
exposition, `sessions --all --include-internal --json`, and the snapshot the cache holds (the
state, every follower and reader, every sleeping file), loaded back from the file each wrote,
made plain values (`plain`). The pure modules stay the reference. On a pure install there is
nothing to compare and the module skips, unless `CODING_AGENT_EXPORTER_REQUIRE_COMPILED=1`
(`.ci/wheel`, which installs the compiled wheel): then it fails.
"""

from __future__ import annotations

import ast
import copyreg
import dataclasses
import importlib
import json
import os
import subprocess
import sys
from array import array
from collections import deque
from collections.abc import Iterator
from pathlib import Path, PurePath
from pickle import PickleBuffer
from typing import Any

import pytest
from prometheus_client import generate_latest

from coding_agent_exporter.runtime.app import App
from coding_agent_exporter.runtime.config import parse
from coding_agent_exporter.runtime.digest import PACKAGE, compiled
from coding_agent_exporter.web.views import session_rows

from .conftest import NOW, ROOT, all_scenarios, home_flags, scenario_id

REQUIRE = "CODING_AGENT_EXPORTER_REQUIRE_COMPILED"
REQUIRED = os.environ.get(REQUIRE) == "1"  # read at import: each test's environment is cleared
BUILT = compiled(PACKAGE)

pytestmark = pytest.mark.skipif(
    not BUILT and not REQUIRED, reason=f"a pure install: nothing compiled ({REQUIRE}=1 fails)"
)


def compiled_by_setup() -> list[str]:
    """The modules `setup.py` compiles (its `COMPILED`), relative to the package."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "COMPILED":
            paths: tuple[str, ...] = ast.literal_eval(node.value)
            return [path.removeprefix("coding_agent_exporter/") for path in paths]
    raise AssertionError("setup.py names no COMPILED modules")


def test_every_module_setup_compiles_is_imported_compiled() -> None:
    modules = compiled_by_setup()
    assert set(modules) == BUILT, f"{REQUIRE}=1 and this install is not the compiled build"
    for name in modules:
        module = importlib.import_module("coding_agent_exporter." + name[:-3].replace("/", "."))
        assert module.__file__ is not None and not module.__file__.endswith(".py"), name


def outputs(scenario: Path, state: Path) -> dict[str, Any]:
    """What a catch-up over `scenario` with its cache in `state` gives, as plain values."""
    argv = ["metrics", *home_flags(scenario / "home"), "--state.dir", str(state)]
    app = App(
        parse(argv, {"HOME": "/home/user"}),
        process_metrics=False,
        clock=lambda: NOW,
        probe=lambda _: None,
        cache=True,
    )
    app.catch_up()
    app.engine.save_cache()
    rows = session_rows(app.state, app.config.project, history=True, internal=True)
    assert app.engine.cache is not None
    snapshot = app.engine.cache.load()
    assert snapshot is not None, "the cache just written does not load"
    return {
        "exposition": generate_latest(app.registry).decode(),
        "sessions": json.loads(json.dumps(rows)),
        "snapshot": plain(snapshot),
    }


def plain(value: object, within: frozenset[int] = frozenset()) -> Any:
    """`value` as JSON values, the same for a compiled object and its pure self: a class by its
    name, a dataclass by its fields, any other object by what it pickles (`__reduce_ex__`), a
    sleeping file woken; an object met again inside itself (`within`) by its class's name."""
    if id(value) in within:
        return ["again", type(value).__name__]
    if not isinstance(value, bool | int | float | str | bytes | PurePath | type):
        within |= {id(value)}
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, PickleBuffer):
        return bytes(value.raw()).hex()
    if isinstance(value, array):
        return [value.typecode, value.tolist()]
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, type) or callable(value):
        return f"{getattr(value, '__module__', '?')}.{getattr(value, '__qualname__', '?')}"
    if isinstance(value, dict):
        return sorted(([plain(k, within), plain(v, within)] for k, v in value.items()), key=repr)
    if isinstance(value, list | tuple | deque):
        return [plain(v, within) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((plain(v, within) for v in value), key=repr)
    if type(value).__name__ == "Sleepers":
        return [plain(x, within) for x in _woken(value)]
    if dataclasses.is_dataclass(value):
        fields = dataclasses.fields(value)
        return [
            type(value).__name__,
            {f.name: plain(getattr(value, f.name), within) for f in fields},
        ]
    return [type(value).__name__, *_reduced(value, within)]


def _reduced(value: object, within: frozenset[int]) -> list[Any]:
    reduced = value.__reduce_ex__(4)
    assert isinstance(reduced, tuple), value
    made, args, *rest = reduced
    state = rest[0] if rest else None
    if isinstance(state, tuple) and len(state) == 2 and state[0] is None:
        state = state[1]  # (None, slots): a pure class with slots and no `__getstate__`
    if made is copyreg.__newobj__:
        args = args[1:]  # the class itself
    return [plain(args, within), plain(state, within)]


def _woken(sleepers: Any) -> Iterator[tuple[Any, ...]]:
    for at in range(len(sleepers)):
        yield (sleepers.sources[at], sleepers.names[at], sleepers.key(at), *sleepers.woken(at))


def all_outputs(out: Path, scratch: Path) -> None:
    """`outputs` of every scenario, in this process, as JSON in `out` (by scenario id)."""
    found = {scenario_id(s): outputs(s, scratch / scenario_id(s)) for s in all_scenarios()}
    out.write_text(json.dumps(found))


def outputs_of(package: Path, scratch: Path) -> dict[str, Any]:
    """`all_outputs` from a process of its own that imports `package`: the source tree's (run
    in the checkout, its folder first on the path) or the installed one (run in `scratch`, the
    checkout last on the path, for `tests` only). Both with the same hash seed: which session
    falls asleep first, and so the rows of the cache's columns, follow the order of a set."""
    out = scratch / "outputs.json"
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CODING_AGENT_EXPORTER_")}
    environ.pop("PYTHONPATH", None)
    environ["PYTHONHASHSEED"] = "0"
    script = (
        "import sys, pathlib\n"
        f"sys.path.append({str(ROOT)!r})\n"
        "from coding_agent_exporter.runtime.digest import PACKAGE\n"
        f"assert PACKAGE == pathlib.Path({str(package)!r}), PACKAGE\n"
        "from tests.test_compiled import all_outputs\n"
        "all_outputs(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]))\n"
    )
    cwd = ROOT if package == ROOT / "coding_agent_exporter" else scratch
    run = [sys.executable, "-c", script, str(out), str(scratch)]
    subprocess.run(run, cwd=cwd, env=environ, check=True, timeout=600)
    found: dict[str, Any] = json.loads(out.read_text())
    return found


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    """The outputs of this install and of the pure source tree."""
    source = ROOT / "coding_agent_exporter"
    assert not compiled(source), "the source tree holds compiled modules"
    assert source != PACKAGE, "this install is the source tree: nothing to compare"
    mine = outputs_of(PACKAGE, tmp_path_factory.mktemp("installed"))
    return mine, outputs_of(source, tmp_path_factory.mktemp("pure"))


@pytest.mark.timeout(600)
@pytest.mark.parametrize("scenario", all_scenarios(), ids=scenario_id)
def test_the_compiled_build_gives_what_the_pure_one_does(
    scenario: Path, both: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    mine, theirs = (found[scenario_id(scenario)] for found in both)
    assert mine["exposition"] == theirs["exposition"]
    assert mine["sessions"] == theirs["sessions"]
    assert mine["snapshot"] == theirs["snapshot"]

"""Linux-only calls live only in `sources/`, each where only Linux's own probes reach it.

The walk reads the code (not comments or docstrings) of every module of the package for what
exists only on Linux, or only where `fork` is safe: a path under `/proc`, `os.pread`/`pwrite`,
`pidfd_open`, anything `inotify_*`, `os.major`/`os.minor`/`os.makedev`, `O_CLOEXEC`,
`O_NONBLOCK`, `getloadavg`, `os.set_blocking`, `os.fork`/`forkpty`/`register_at_fork` and the
`fork`/`forkserver` start methods (as a string, whoever it is given to). Outside `sources/` none
may appear. Inside, each place (module and function) must be in `ALLOWED`, which says why only
Linux's own probes reach it; `UNGATED` lists the places still reached on every system, which
the file-reading work of issue #31 removes (a strict xfail below keeps that list honest).

What this cannot see: a call made through a name built at run time. The stand-ins
(`tests/test_standin.py`) are the run-time check: there these functions are missing or `/proc`
is closed, and the exporter still works."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from .conftest import ROOT

PACKAGE = ROOT / "coding_agent_exporter"
OS_ONLY = {
    "pread", "pwrite", "pidfd_open", "major", "minor", "makedev", "O_CLOEXEC", "O_NONBLOCK",
    "getloadavg", "set_blocking", "fork", "forkpty", "register_at_fork",
}  # fmt: skip
"""`os.<name>`: what CPython lacks on Windows (or, for `fork`, what is unsafe on macOS)."""
NAMES = re.compile(
    r"^(inotify_\w+|pidfd_open|pread|pwrite|O_CLOEXEC|O_NONBLOCK|getloadavg|forkpty|register_at_fork)$"
)
"""Identifiers and strings (a `getattr(os, "pread")`, a libc symbol) that are Linux's alone."""
PROC = re.compile(r"(^|[^\w.])/proc(/|$)")
START_METHODS = {"fork", "forkserver"}

ALLOWED: dict[tuple[str, str], str] = {
    ("sources/locks.py", "<module>"): "LOCKS names /proc/locks; only read_locks reads it",
    ("sources/locks.py", "file_key"): (
        "os.major/minor: called by folder_keys only with native=True, which by_writer_lock "
        "passes only when it read /proc/locks, which it reads only with native probes"
    ),
    ("sources/terminals.py", "_standard_input"): (
        "/proc/<pid>/fd/0: omp_terminal calls it only when platform.current().native"
    ),
    ("sources/waiters.py", "PidfdWaiter.__init__"): (
        "pidfd_open checked, os.set_blocking on its pipe: made only when choose_waiter names "
        "pidfd, which it does only with native probes and a working pidfd"
    ),
    ("sources/waiters.py", "PidfdWaiter.add"): "pidfd_open: a PidfdWaiter exists only natively",
    ("sources/procwatch.py", "pidfds_available"): "returns False unless the probes are native",
    ("sources/platform.py", "worker_start"): "`fork` only under current().native",
    ("sources/platform.py", "load_average"): (
        "os.getloadavg only under current().native; else psutil's (macOS), never on Windows"
    ),
    ("sources/fsobserver.py", "<module>"): (
        "watchdog's inotify classes: imported in a try that takes any exception for no inotify"
    ),
    ("sources/fsobserver.py", "_PromptObserver.__init__"): (
        "the prompt inotify observer: make() builds it only under current().native"
    ),
    ("sources/inotify.py", "Probe.why_not"): (
        "the inotify limit probe: watch.Watcher makes one only under current().native"
    ),
    ("sources/inotify.py", "_libc"): "looked up by Probe only (above)",
    ("sources/inotify.py", "watched_inodes"): (
        "/proc/self/fd*: asked by watch.Watcher._look only under current().native"
    ),
    ("sources/livefiles.py", "KqueueFollower._watch"): (
        "O_CLOEXEC in the kqueue follower, made only on macOS (where it exists)"
    ),
    ("sources/mounts.py", "mounts"): "/proc/mounts read only under WSL (a Linux)",
    ("sources/reading.py", "_open_posix"): (
        "O_CLOEXEC, O_NONBLOCK: POSIX opens only (open_regular takes _open_windows on Windows)"
    ),
    ("sources/reading.py", "pread_for"): (
        "os.pread chosen only with Linux's own probes or on macOS, where it exists"
    ),
    ("sources/tail.py", "JsonlTail._read_fd"): "the `pread` reading.pread_for chose (above)",
    ("sources/tail.py", "JsonlTail._seam_moved"): "the `pread` reading.pread_for chose",
    ("sources/tail.py", "JsonlTail._scan"): "the `pread` reading.pread_for chose",
    ("sources/tail.py", "_seam"): "the `pread` reading.pread_for chose",
}
"""(module under the package, function) → why only Linux's own probes reach it there."""

UNGATED: dict[tuple[str, str], str] = {}
"""Places reached on every system: none left (each would be a bug on macOS or Windows)."""


def uses(tree: ast.AST) -> Iterator[tuple[str, int, str]]:
    """(function, line, what) for each Linux-only use in a module's code."""
    docstrings = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }

    def visit(node: ast.AST, scope: list[str]) -> Iterator[tuple[str, int, str]]:
        where = ".".join(scope) or "<module>"
        for found in _linux_only(node, docstrings):
            yield where, getattr(node, "lineno", 0), found
        inner = scope
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            inner = [*scope, node.name]
        for child in ast.iter_child_nodes(node):
            yield from visit(child, inner)

    yield from visit(tree, [])


def _linux_only(node: ast.AST, docstrings: set[int]) -> Iterator[str]:
    if isinstance(node, ast.Attribute):
        if isinstance(node.value, ast.Name) and node.value.id == "os" and node.attr in OS_ONLY:
            yield f"os.{node.attr}"
        elif NAMES.match(node.attr):
            yield node.attr
    elif isinstance(node, ast.Name) and NAMES.match(node.id):
        yield node.id
    elif isinstance(node, ast.keyword) and node.arg and NAMES.match(node.arg):
        yield node.arg
    elif isinstance(node, ast.alias) and NAMES.match(node.name):
        yield node.name
    elif isinstance(node, ast.ImportFrom) and node.module:
        if any(NAMES.match(part) for part in node.module.split(".")):
            yield node.module
        if node.module == "os":
            yield from (f"os.{a.name}" for a in node.names if a.name in OS_ONLY)
    elif isinstance(node, ast.Constant) and isinstance(node.value, str):
        if id(node) in docstrings:
            return
        if PROC.search(node.value) or NAMES.match(node.value) or node.value in START_METHODS:
            yield repr(node.value)


@cache
def places(root: Path = PACKAGE) -> dict[tuple[str, str], list[str]]:
    """(module, function) → what Linux-only it uses, with line numbers, for a package at `root`."""
    found: dict[tuple[str, str], list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        for where, line, what in uses(ast.parse(path.read_text())):
            found.setdefault((rel, where), []).append(f"line {line}: {what}")
    return found


def test_no_module_outside_sources_names_a_linux_only_call() -> None:
    outside = {k: v for k, v in places().items() if not k[0].startswith("sources/")}
    assert outside == {}, "Linux-only calls belong in sources/, behind current().native"


def test_each_linux_only_call_in_sources_sits_where_only_native_probes_reach() -> None:
    inside = {k: v for k, v in places().items() if k[0].startswith("sources/")}
    unexplained = {k: v for k, v in inside.items() if k not in ALLOWED and k not in UNGATED}
    assert unexplained == {}, "add each to ALLOWED saying why only native probes reach it"
    stale = (set(ALLOWED) | set(UNGATED)) - set(inside)
    assert stale == set(), "these places use nothing Linux-only any more: remove them"


def test_no_linux_only_call_is_reached_on_every_system() -> None:
    assert UNGATED == {}


def test_the_walk_finds_a_linux_only_call_added_anywhere(tmp_path: Path) -> None:
    """The walk sees what it must: a runtime module naming /proc, pread through getattr, a
    load average and a forked pool, and a source module with an unexplained pidfd; not the
    same words in a docstring or a comment."""
    package = tmp_path / "coding_agent_exporter"
    (package / "runtime").mkdir(parents=True)
    (package / "sources").mkdir()
    (package / "runtime" / "bad.py").write_text(
        '"""Reads /proc/self/stat and os.pread, in words only."""\n'
        "import os, multiprocessing  # os.getloadavg in a comment\n"
        "def f(pid):\n"
        "    '''/proc again, a docstring'''\n"
        "    read = getattr(os, 'pread')\n"
        "    load = os.getloadavg()\n"
        "    pool = multiprocessing.get_context('fork')\n"
        "    return open(f'/proc/{pid}/stat').read()\n"
    )
    (package / "sources" / "new.py").write_text(
        "import os\nclass W:\n    def add(self, pid):\n        return os.pidfd_open(pid)\n"
    )
    found = places(package)
    assert found == {
        ("runtime/bad.py", "f"): [
            "line 5: 'pread'",
            "line 6: os.getloadavg",
            "line 7: 'fork'",
            "line 8: '/proc/'",
        ],
        ("sources/new.py", "W.add"): ["line 4: os.pidfd_open"],
    }
    assert ("sources/new.py", "W.add") not in ALLOWED  # so the test above would fail on it

"""Named mutations of the product code: each must make at least one test fail.

    .venv/bin/python tests/mutations.py            # every mutation (~3 min)
    .venv/bin/python tests/mutations.py --list
    .venv/bin/python tests/mutations.py label-cap-removed needs-user-mapping-broken

Run on demand, not by the suite (pytest collects only `test_*.py`). Each mutation is a small,
plausible bug: one exact piece of text in one file of `coding_agent_exporter/` replaced by
another. The checkout (without .git and .venv) is copied to a temporary folder, the baseline
run there first (the tests named below must pass unmutated), then each mutation is applied to a
fresh copy of the package and its tests are run there with `PYTHONPATH` pointing at the copy
(subprocesses the tests start, `python -m coding_agent_exporter`, import the copy too; the
script checks which package they import). The working tree is never changed.

A mutation is *killed* when its tests fail (pytest exit 1), *survived* when they pass, and an
*error* when its text is not found exactly once (the code moved: update the mutation) or pytest
could not run (any other exit). Exit status 1 when any survived or errored. The last result is
in docs/development.md.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "coding_agent_exporter"
IGNORED = shutil.ignore_patterns(
    ".git", ".venv", "__pycache__", "*.egg-info", ".mypy_cache", ".ruff_cache", ".pytest_cache"
)


@dataclass(frozen=True)
class Mutation:
    name: str
    path: str  # under coding_agent_exporter/
    old: str
    new: str
    tests: tuple[str, ...]  # pytest node ids, from the checkout's root
    why: str


MUTATIONS = (
    Mutation(
        "label-cap-removed",
        "state/base.py",
        '        if len(values) >= MAX_LABEL_VALUES:\n            return "other"\n',
        '        if False:\n            return "other"\n',
        ("tests/test_state.py",),
        "tool and sub-agent type labels unbounded (docs/metrics.md promises 200 and `other`)",
    ),
    Mutation(
        "growing-response-cost-counted-whole",
        "state/spend.py",
        "self.cost[(agent, model, cwd, ESTIMATED)] += cost - before",
        "self.cost[(agent, model, cwd, ESTIMATED)] += cost",
        ("tests/test_cost.py",),
        "a response whose usage grows adds its whole cost again at each copy, not the growth",
    ),
    Mutation(
        "seen-ids-check-disabled",
        "state/responses.py",
        '            if self._seen.add(agent, "message", event.message_id):\n'
        "                return  # a response of a finished session",
        '            if self._seen.add(agent, "message", event.message_id) and False:\n'
        "                return  # a response of a finished session",
        ("tests/test_state.py",),
        "a response read again after leaving the recent window counts a second time",
    ),
    Mutation(
        "needs-user-mapping-broken",
        "state/labels.py",
        '"waiting": "needs_user"',
        '"waiting": "running"',
        ("tests/test_live_replay.py", "tests/test_live.py::test_serve_pushes_a_live_index_change"),
        "a session waiting for the user shows as running (test_live's read once hung on it)",
    ),
    Mutation(
        "live-rows-not-pushed",
        "web/live.py",
        "changed = {} if reset else self._changed(rows_of(state, self.project, keys))",
        "changed = {}",
        ("tests/test_live.py::test_serve_pushes_a_live_index_change",),
        "/api/events never sends a changed row (test_live's read once hung 12 minutes on it)",
    ),
    Mutation(
        "paired-move-not-woken",
        "sources/fsobserver.py",
        "                    self._not_empty.wait(left)\n",
        "                    self._not_empty.release()\n"
        "                    time.sleep(left)  # as watchdog's own queue: deaf to the pair\n"
        "                    self._not_empty.acquire()\n",
        ("tests/test_fsobserver.py",),
        "a rename holds the events behind it for the whole hold even once it was paired",
    ),
    Mutation(
        "scrape-renders-under-the-lock",
        "prometheus/collectors.py",
        "            spend = shown(self.state.spend, now)\n"
        "        yield from self._live(live)\n"
        "        yield self._recent(recent)\n"
        "        yield from self._totals(totals)\n"
        "        yield from families(spend, self.project, now, self.limit)\n",
        "            spend = shown(self.state.spend, now)\n"
        "            yield from self._live(live)\n"
        "            yield self._recent(recent)\n"
        "            yield from self._totals(totals)\n"
        "            yield from families(spend, self.project, now, self.limit)\n",
        ("tests/test_load.py::test_a_scrape_lets_the_state_go_before_it_renders",),
        "a scrape holds the state's lock while it renders: the reading waits (issue 7)",
    ),
    Mutation(
        "sent-traces-not-noted",
        "traces/checkpoint.py",
        '            self.sent[f"{trace_id:032x}"] = ended  # its open spans',
        "            pass  # its open spans",
        ("tests/test_restart.py::test_sigkill_while_following_live_sessions_then_restart",),
        "the checkpoint forgets which turns were sent: a restart sends them again",
    ),
)


def run_tests(checkout: Path, tests: tuple[str, ...]) -> tuple[int, str]:
    """pytest over `tests` in `checkout`, importing the package from there: exit code, summary."""
    env = {**os.environ, "PYTHONPATH": str(checkout), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("UPDATE_GOLDEN", None)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests]
    done = subprocess.run(command, cwd=checkout, env=env, capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    return done.returncode, lines[-1] if lines else done.stderr.strip()[-200:]


def imported_from(checkout: Path) -> Path:
    """Where a Python started as the tests start one imports the package from."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    code = f"import {PACKAGE}; print({PACKAGE}.__file__)"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=checkout.parent, env=env, capture_output=True, text=True
    )
    return Path(out.stdout.strip()).parent


def apply(package: Path, mutation: Mutation) -> str | None:
    """Apply `mutation` to the copy `package`; why it cannot be applied, or None."""
    path = package / mutation.path
    text = path.read_text()
    found = text.count(mutation.old)
    if found != 1:
        return f"its text is found {found} times in {PACKAGE}/{mutation.path}"
    path.write_text(text.replace(mutation.old, mutation.new))
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="mutations to run (default: all)")
    parser.add_argument("--list", action="store_true", help="list the mutations and stop")
    args = parser.parse_args()
    chosen = [m for m in MUTATIONS if not args.names or m.name in args.names]
    unknown = set(args.names) - {m.name for m in MUTATIONS}
    if args.list or unknown:
        for m in MUTATIONS:
            print(f"{m.name}: {m.why}\n    {PACKAGE}/{m.path}; {' '.join(m.tests)}")
        return 2 if unknown else 0
    with tempfile.TemporaryDirectory(prefix="cae-mutations-") as scratch:
        checkout = Path(scratch) / "checkout"
        shutil.copytree(ROOT, checkout, ignore=IGNORED, symlinks=True)
        package = checkout / PACKAGE
        pristine = Path(scratch) / "pristine"
        shutil.copytree(package, pristine, ignore=IGNORED)
        if imported_from(checkout) != package:
            print(f"the copy's package is not the one imported: {imported_from(checkout)}")
            return 1
        every = tuple(dict.fromkeys(t for m in chosen for t in m.tests))
        code, summary = run_tests(checkout, every)
        print(f"baseline ({len(every)} test files or ids): {summary}")
        if code != 0:
            return 1
        results = []
        for mutation in chosen:
            shutil.rmtree(package)
            shutil.copytree(pristine, package)
            started = time.monotonic()
            problem = apply(package, mutation)
            if problem is None:
                code, summary = run_tests(checkout, mutation.tests)
                outcome = {0: "SURVIVED", 1: "killed"}.get(code, f"error (pytest exit {code})")
            else:
                outcome, summary = "error", problem
            took = time.monotonic() - started
            results.append(outcome)
            print(f"{mutation.name}: {outcome} in {took:.0f} s: {summary}", flush=True)
    killed = results.count("killed")
    print(f"{killed} of {len(results)} mutations killed")
    return 0 if killed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())

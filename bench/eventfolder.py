#!/usr/bin/env python3
"""Issue 36: what one file per event costs, OpenHands' way (`events/event-NNNNN-<uuid>.json`).

    python bench/eventfolder.py [--calls 2000] [--conversations 1]

Writes synthetic conversations (`tests/test_openhands.write_long_conversation`: a prompt, per
call an action and an observation file, an answer: 2 x calls + 2 event files each) into a
scratch home, then reads it with the engine twice:

* `stream`: the harness as it is: each events folder ONE follower (`sources.docfolder`);
* `per-file`: the same harness told to follow each event file as a document of its own
  (what reading them as ordinary "doc" files would cost);

and prints, for each: the followers kept, the Python memory the engine holds after the
catch-up (tracemalloc: what it allocated and still holds, the state included; after a warm-up
catch-up of each, so what a process allocates once is not counted), the catch-up's time, and
what one more event costs at its folder's change (time of `Engine.changed`).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from coding_agent_exporter.harnesses.base import FileKind  # noqa: E402
from coding_agent_exporter.harnesses.openhands import OpenHands  # noqa: E402
from coding_agent_exporter.runtime.engine import Engine, Source  # noqa: E402
from coding_agent_exporter.state.state import State  # noqa: E402
from tests.test_openhands import action, observation, write_long_conversation  # noqa: E402


class PerFile(OpenHands):
    """Each event file a document of its own, with a reader of its own (the cost avoided)."""

    def doc_folder(self, rel: PurePosixPath) -> bool:
        return False

    def match(self, rel: PurePosixPath) -> FileKind | None:
        if rel.parent.name == "events" and rel.name.startswith("event-"):
            return "doc"
        return super().match(rel)

    def reader(self, rel: PurePosixPath):  # type: ignore[no-untyped-def]
        if rel.parent.name == "events":
            return super().reader(rel.parent)
        return super().reader(rel)


def measure(home: Path, harness: OpenHands, calls: int) -> dict[str, float]:
    tracemalloc.start()
    base = tracemalloc.take_snapshot()
    t0 = time.perf_counter()
    engine = Engine([Source(harness, home)], State(), workers=0)
    engine.catch_up()
    took = time.perf_counter() - t0
    held = sum(s.size_diff for s in tracemalloc.take_snapshot().compare_to(base, "filename"))
    tracemalloc.stop()
    folder = next((home / "conversations").iterdir())
    n = len(list((folder / "events").glob("event-*.json")))
    extra = folder / "events" / f"event-{n:05d}-{n:08x}-ffff.json"
    extra.write_text(json.dumps(action(f"chatcmpl-x{n}", f"call_x{n}", calls + 1)))
    t1 = time.perf_counter()
    engine.changed([extra])
    one = time.perf_counter() - t1
    extra.unlink()
    return {"followers": len(engine._files), "held_mb": held / 2**20, "catch_up_s": took,
            "one_more_ms": one * 1000}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--conversations", type=int, default=1)
    args = parser.parse_args()
    assert observation  # the shapes come from the test module
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / ".openhands"
        for i in range(args.conversations):
            folder = home / "conversations" / f"{i:032x}"
            (folder / "events").mkdir(parents=True)
            write_long_conversation(folder, args.calls)
        files = len(list(home.glob("conversations/*/events/event-*.json")))
        print(f"{args.conversations} conversation(s), {files} event files")
        measure(home, PerFile(), args.calls)  # warm-up: what the first catch-up of a process
        measure(home, OpenHands(), args.calls)  # allocates once (imports, caches) not counted
        for name, harness in (("stream", OpenHands()), ("per-file", PerFile())):
            got = measure(home, harness, args.calls)
            print(f"{name:9s}", "  ".join(f"{k}={v:.2f}" if isinstance(v, float) else
                                          f"{k}={v}" for k, v in got.items()))  # fmt: skip


if __name__ == "__main__":
    main()

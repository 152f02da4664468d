"""The console at `/` in a real browser: Debian's Chromium, driven headless by Playwright (from
PyPI, pointed at /usr/bin/chromium; `.ci/run` installs both), against a live `serve` over copies
of recorded fixtures in tmp_path, every harness but Claude Code's off.

Sessions are made live as the other end-to-end tests do (`tests/backends.py`): a `sleep` stands
in for the agent's process and its `sessions/<pid>.json` live index is written, then rewritten.
Waits are Playwright's (a selector that must appear within a timeout), never sleeps. The page
runs under the server's Content-Security-Policy; a violation or an uncaught error fails the test.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from tests.backends import get, run_exporter, wait_for, write_index
from tests.conftest import FIXTURES, GOLDEN, expected, missing_tool
from tests.test_web_tls import fetch as fetch_tls
from tests.test_web_tls import web_config  # noqa: F401 (a fixture: TLS and a basic-auth user)

CHROMIUM = Path("/usr/bin/chromium")
if not CHROMIUM.exists():
    missing_tool("no /usr/bin/chromium: install Debian's chromium (.ci/run does)", module=True)
try:
    from playwright import sync_api
except ImportError:
    missing_tool("no playwright: pip install playwright (the test extra has it)", module=True)

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))
try:
    from console import OTHERS, journal, write_sessions  # type: ignore[import-not-found]
finally:
    sys.path.remove(str(BENCH))

V = FIXTURES / "claude-code" / "2.1.332"
FOREGROUND = "cd064097-7a37-447e-8a55-7688bfbba846"  # subagent-foreground
TWO_TOOLS = "d7b6130e-91a6-49f0-9d06-b99e184783dd"  # print-two-tools
INTERACTIVE = "971b287f-0952-4ff3-8a23-8b842ccd6d13"  # interactive
ROW = "tr.row[data-session='{}']"
GRAFANA = "http://grafana.example:3000"
JAEGER = "http://jaeger.example:16686/trace/{trace_id}"
DASH = "\u2013"  # between the first and last row numbers of the summary


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield chromium
        chromium.close()


class Page:
    """A browser tab at 1400x900 that records what would break the page: uncaught errors and
    Content-Security-Policy violations."""

    def __init__(
        self,
        browser: Any,
        width: int = 1400,
        height: int = 900,
        scheme: str = "light",
        zone: str = "UTC",
    ) -> None:
        self.context = browser.new_context(
            viewport={"width": width, "height": height},
            color_scheme=scheme,
            timezone_id=zone,
            locale="en-US",
        )
        self.page = self.context.new_page()
        self.problems: list[str] = []
        self.page.on("pageerror", lambda error: self.problems.append(f"error: {error}"))
        self.page.on("console", self._console)

    def _console(self, message: Any) -> None:
        if "Content Security Policy" in message.text:
            self.problems.append(f"CSP: {message.text}")

    def close(self) -> None:
        self.context.close()
        assert not self.problems, self.problems


@pytest.fixture
def tab(browser: Any) -> Iterator[Any]:
    page = Page(browser)
    yield page.page
    page.close()


def home_of(tmp_path: Path, *scenarios: str) -> Path:
    """A Claude Code home holding copies of the recorded scenarios' journals."""
    home = tmp_path / "claude"
    (home / "sessions").mkdir(parents=True)
    for name in scenarios:
        shutil.copytree(V / name / "home" / "projects", home / "projects", dirs_exist_ok=True)
    return home


def serve(home: Path, tmp_path: Path) -> Any:
    return run_exporter(home, tmp_path, *OTHERS)


@pytest.fixture
def stand_ins() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes that stand in for running agents (their pids go into live index entries)."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        process.kill()
        process.wait()


def stand_in(started: list[subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(["sleep", "300"])
    started.append(process)
    return process


def open_console(tab: Any, url: str, address: str = "#/") -> None:
    tab.goto(f"{url}/{address}")
    tab.wait_for_selector("main[data-rendered]", timeout=10_000)


def test_a_session_appears_and_changes_state_when_its_file_does(
    tmp_path: Path, tab: Any, stand_ins: list[subprocess.Popen[bytes]], probes: str
) -> None:
    """Claude Code rewrites `sessions/<pid>.json` when it starts work and when it waits: each
    rewrite shows in the open page, pushed over /api/events (no reload), in order. When the
    exporter goes away, the page says it is reconnecting.
    How fast: `bench/latency.py` (the push) and `bench/console.py` (the drawing); the times
    printed here are only for the eye. Run with Linux's own probes, then the portable ones."""
    home = home_of(tmp_path, "subagent-foreground")
    with serve(home, tmp_path) as url:
        open_console(tab, url)
        tab.wait_for_selector("#live[data-state='live']", timeout=10_000)  # /api/events
        assert tab.locator("tr.row").count() == 0  # nothing is live yet
        process = stand_in(stand_ins)
        took = []
        for status, shown in (
            ({"status": "busy"}, "running"),
            ({"status": "waiting", "waitingFor": "permission prompt"}, "needs_user"),
            ({"status": "idle"}, "idle"),
        ):
            start = time.monotonic()
            write_index(home, process, FOREGROUND, **status)
            tab.wait_for_selector(f"{ROW.format(FOREGROUND)}.s-{shown}", timeout=30_000)
            took.append(round((time.monotonic() - start) * 1000))
        print(f"file change to page: {took} ms")
    # the exporter stopped: the page says so (the browser keeps trying to reconnect)
    tab.wait_for_selector("#live[data-state='reconnecting']", timeout=5000)
    assert tab.locator("#live").inner_text() == "reconnecting…"


def test_a_session_waiting_for_you_comes_first_with_its_reason_and_since_when(
    tmp_path: Path, tab: Any, stand_ins: list[subprocess.Popen[bytes]]
) -> None:
    home = home_of(tmp_path, "print-two-tools", "interactive", "subagent-foreground")
    for session, status in (
        (TWO_TOOLS, {"status": "busy"}),
        (INTERACTIVE, {"status": "idle"}),
        (FOREGROUND, {"status": "waiting", "waitingFor": "permission prompt"}),
    ):
        write_index(home, stand_in(stand_ins), session, **status)
    with serve(home, tmp_path) as url:
        open_console(tab, url)
        tab.wait_for_selector(f"{ROW.format(INTERACTIVE)}", timeout=5000)
        order = tab.eval_on_selector_all("tr.row", "rows => rows.map(r => r.dataset.session)")
        assert order == [FOREGROUND, TWO_TOOLS, INTERACTIVE]
        groups = tab.eval_on_selector_all("tr.group-head th", "ths => ths.map(t => t.textContent)")
        assert groups == ["waiting for you", "running", "idle"]
        assert tab.title() == "(1 waiting) coding-agent-exporter"  # seen from another tab too
        menu = tab.eval_on_selector_all("#f-state option", "os => os.map(o => o.textContent)")
        assert menu == ["All states", "waiting for you (1)", "running (1)", "idle (1)"]
        assert tab.eval_on_selector_all("#f-agent option", "os => os.map(o => o.value)") == [
            "",
            "claude-code",
        ]
        state = tab.locator(ROW.format(FOREGROUND)).locator(".c-state")
        assert re.fullmatch(r"waiting · permission prompt for (<1 min|\d+ min)", state.inner_text())
        since = state.locator("time").get_attribute("datetime")
        assert since and since.endswith("Z")
        assert state.locator("time").get_attribute("title")  # the exact local time on hover
        tab.select_option("#f-state", "running")
        tab.wait_for_selector(f"#summary:text-is('1{DASH}1 of 1 live session (3 before filters)')")
        assert tab.eval_on_selector_all("tr.row", "rs => rs.map(r => r.dataset.session)") == [
            TWO_TOOLS
        ]


def test_cells_never_wrap_at_1400_px_and_a_phone_gets_one_card_per_session(
    tmp_path: Path, browser: Any, stand_ins: list[subprocess.Popen[bytes]]
) -> None:
    home = home_of(tmp_path, "print-two-tools", "subagent-foreground")
    write_index(
        home, stand_in(stand_ins), FOREGROUND, status="waiting", waitingFor="permission prompt"
    )
    with serve(home, tmp_path) as url:
        wide = Page(browser)
        open_console(wide.page, url, "#/?history=1")
        tall = wide.page.eval_on_selector_all(
            "tr.row td",
            "tds => tds.filter(td => td.getBoundingClientRect().height > "
            "2 * parseFloat(getComputedStyle(td).lineHeight)).map(td => td.className)",
        )
        assert tall == []
        overflow = wide.page.evaluate(
            "[document.querySelector('table.sessions').scrollWidth, "
            "document.querySelector('.table-wrap').clientWidth]"
        )
        assert overflow[0] <= overflow[1], f"the table needs {overflow[0]} px of {overflow[1]}"
        wide.close()
        phone = Page(browser, 390, 844)
        open_console(phone.page, url, "#/?history=1")
        width = phone.page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"the page is {width} px wide on a 390 px phone"
        assert phone.page.locator("thead").bounding_box()["height"] <= 1  # no header row: cards
        phone.close()


def test_a_title_with_html_in_it_shows_as_text(tmp_path: Path, tab: Any) -> None:
    home = tmp_path / "claude"
    title = '<img src=x onerror="window.pwned=1"><b>bold</b> & <script>window.pwned=2</script>'
    session_id, _ = journal(home, 0, title)
    with serve(home, tmp_path) as url:
        open_console(tab, url, "#/?history=1")
        link = tab.locator(ROW.format(session_id)).locator(".c-title a")
        assert link.inner_text() == title
        assert tab.locator("main img, main b, main script").count() == 0
        link.click()
        tab.wait_for_selector("#session-title", timeout=5000)
        assert tab.locator("#session-title").inner_text() == title
        assert tab.locator("main img, main b, main script").count() == 0
        assert tab.evaluate("window.pwned") is None


def test_filters_and_paging_over_ten_thousand_sessions(tmp_path: Path, tab: Any) -> None:
    home = tmp_path / "claude"
    write_sessions(home, 10_000)
    with run_exporter(home, tmp_path, *OTHERS, ready=False) as url:
        wait_for("the exporter to listen", lambda: get(url + "/-/healthy")[0] == 200)
        open_console(tab, url, "#/?history=1")
        catching_up = get(url + "/-/ready")[0] == 503
        print(f"the page was drawn {'before' if catching_up else 'after'} the catch-up ended")
        if catching_up:  # the page was told so, and says it
            assert tab.locator("#catching-up").is_visible()
        tab.wait_for_selector("#catching-up", state="hidden", timeout=60_000)
        summary = tab.locator("#summary")
        tab.wait_for_selector(f"#summary:text-is('1{DASH}100 of 10,000 sessions')", timeout=10_000)
        assert summary.inner_text() == f"1{DASH}100 of 10,000 sessions"
        assert tab.locator("tr.row").count() == 100
        projects = tab.eval_on_selector_all("#f-project option", "os => os.map(o => o.value)")
        assert len(projects) == 51 and projects[0] == ""  # "All projects" and the 50 of them

        first_page = tab.eval_on_selector_all("tr.row", "rows => rows.map(r => r.dataset.session)")
        tab.click("text=Older →")
        tab.wait_for_selector(f"#summary:text('101{DASH}200 of 10,000 sessions')", timeout=5000)
        second_page = tab.eval_on_selector_all("tr.row", "rows => rows.map(r => r.dataset.session)")
        assert len(second_page) == 100 and not set(first_page) & set(second_page)
        assert "offset=100" in tab.url

        tab.select_option("#f-project", "/home/user/work/project-7")
        tab.wait_for_selector(f"#summary:text('1{DASH}100 of 200 sessions')", timeout=5000)
        projects_shown = tab.eval_on_selector_all(
            "tr.row .c-project", "cs => cs.map(c => c.innerText)"
        )
        assert set(projects_shown) == {"/home/user/work/project-7"}

        tab.fill("#f-q", "TASK 4207:")  # any case; 4207 % 50 == 7
        tab.wait_for_selector(f"#summary:text('1{DASH}1 of 1 session')", timeout=5000)
        assert tab.locator("tr.row .c-title").inner_text() == (
            "task 4207: fix the build of project-7"
        )
        tab.select_option("#f-project", "/home/user/work/project-8")
        tab.wait_for_selector("#summary:text('No sessions match these filters.')", timeout=5000)

        tab.go_back()  # the filters live in the address: back is the page before
        tab.wait_for_selector(f"#summary:text('1{DASH}1 of 1 session')", timeout=5000)
        assert tab.input_value("#f-project") == "/home/user/work/project-7"


def test_tab_to_a_row_and_enter_opens_the_session(tmp_path: Path, tab: Any) -> None:
    home = home_of(tmp_path, "subagent-foreground")
    with serve(home, tmp_path) as url:
        open_console(tab, url, "#/?history=1")
        tab.wait_for_selector(ROW.format(FOREGROUND), timeout=5000)
        for _ in range(30):
            tab.keyboard.press("Tab")
            if tab.evaluate("!!document.activeElement.closest('tr.row')"):
                break
        else:
            pytest.fail("no row could be reached with Tab")
        assert tab.evaluate("document.activeElement.matches(':focus-visible')")
        tab.keyboard.press("Enter")
        tab.wait_for_selector("#session-title", timeout=5000)
        assert tab.url.endswith(f"#/session/claude-code/{FOREGROUND}")
        assert tab.evaluate("document.activeElement.id") == "session-title"  # focus moved on
        assert tab.locator("#session-title").inner_text() == (
            "SCENARIO:agent count the files with an agent"
        )


Golden = dict[str, list[tuple[int, str, float, float]]]


def golden_trees(name: str) -> Golden:
    """trace id → [(depth, span name, start after the root's, duration)] in the golden's
    depth-first order (times in seconds, to the millisecond)."""
    trees: Golden = {}
    current: list[tuple[int, str, float, float]] = []
    for line in (GOLDEN / "traces" / f"{name}.txt").read_text().splitlines():
        if line.startswith("trace "):
            current = trees.setdefault(line.split()[1], [])
            continue
        depth = (len(line) - len(line.lstrip(" "))) // 2 - 1
        found = re.match(r"(.+?) \+([\d.]+)s ([\d.]+)s", line.strip())
        assert found, line
        current.append((depth, found[1], float(found[2]), float(found[3])))
    return trees


DRAWN = """turns => turns.map(t => [t.dataset.traceId,
  [...t.querySelectorAll('li.span')].map(li => {
    let depth = 0;  // how deep the item is in the drawn lists
    for (let up = li.parentElement.closest('li.span'); up; up = up.parentElement.closest('li.span'))
      depth++;
    const bar = li.querySelector(':scope > .line .bar');
    return [depth, li.querySelector('.span-label').textContent, Number(li.dataset.depth),
      parseFloat(bar.style.left), parseFloat(bar.style.width),
      li.querySelector(':scope > .line .dur').textContent];
  })])"""
"""Per turn drawn: (trace id, [(nesting depth, span name, indentation level, bar's left and
width in % of the turn, duration shown)])."""


def test_the_session_view_draws_the_recorded_subagent_turn_as_its_waterfall(
    tmp_path: Path, tab: Any
) -> None:
    facts = expected(V / "subagent-foreground")["sessions"][0]
    (subagent,) = facts["subagents"]
    home = home_of(tmp_path, "subagent-foreground")
    links = ("--web.grafana-url", GRAFANA, "--web.trace-url", JAEGER)
    with run_exporter(home, tmp_path, *OTHERS, *links) as url:
        open_console(tab, url, f"#/session/claude-code/{FOREGROUND}")
        tab.wait_for_selector("ul.waterfall", timeout=10_000)
        drawn = dict(tab.eval_on_selector_all("details.turn", DRAWN))
        golden = golden_trees("2.1.332-subagent-foreground")
        assert set(drawn) == set(golden)
        for trace, spans in golden.items():
            nesting = [(depth, name) for depth, name, *_ in drawn[trace]]
            assert nesting == [(depth, name) for depth, name, *_ in spans], trace  # one tree
            assert all(line[0] == line[2] for line in drawn[trace])  # drawn indented so
            span = max(start + length for *_, start, length in spans)  # the turn's time axis
            for line, (*_, start, length) in zip(drawn[trace], spans, strict=True):
                left, width, shown = line[3:]
                assert abs(left - start / span * 100) < 0.5, (trace, line)  # where it began
                assert abs(width - max(length / span * 100, 0.4)) < 0.5, (trace, line)
                assert length < 1 and shown == f"{round(length * 1000)} ms", (trace, line)

        # the recorded facts (the stub's log), not our own output
        lines = [(d, n) for spans in drawn.values() for d, n, *_ in spans]
        chats = [n for _, n in lines if n.startswith("chat ")]
        assert len(chats) == facts["messages"]  # every response, the sub-agent's too
        assert set(chats) == {f"chat {facts['model']}"}
        (turn,) = [
            t for t, spans in drawn.items() if any("execute_tool Agent" in s[1] for s in spans)
        ]
        tree = [(d, n) for d, n, *_ in drawn[turn]]
        at = tree.index((1, "execute_tool Agent"))
        assert tree[at + 1] == (2, f"invoke_agent {subagent['type']}")
        below = [n for d, n in tree[at + 2 :] if d >= 3]
        assert below.count(f"chat {facts['model']}") == subagent["messages"]
        assert [n for n in below if n.startswith("execute_tool")] == [
            f"execute_tool {tool}" for tool, n in subagent["by_tool"].items() for _ in range(n)
        ]
        tools = [n for d, n in lines if d == 1 and n.startswith("execute_tool")]
        assert tools == [
            f"execute_tool {t}" for t, n in facts["tool_calls"]["by_tool"].items() for _ in range(n)
        ]

        chart = tab.locator(".tokens-chart svg")
        assert int(chart.get_attribute("data-total") or 0) == sum(facts["tokens"].values())
        assert int(chart.get_attribute("data-points") or 0) == facts["messages"]

        sub = tab.locator(f"li[data-subagent='{subagent['id']}']")
        assert subagent["type"] in sub.inner_text() and subagent["description"] in sub.inner_text()

        agent_span = tab.locator(
            f"details.turn[data-trace-id='{turn}'] li.span[data-operation='invoke_agent']"
        ).nth(1)
        agent_span.locator(":scope > .line .span-name").click()
        assert subagent["id"] in agent_span.locator(":scope > .span-details").inner_text()
        grafana = tab.locator(".links a").get_attribute("href") or ""
        assert grafana.startswith(f"{GRAFANA}/d/") and f"var-session={FOREGROUND}" in grafana
        traces = tab.eval_on_selector_all(
            "details.turn",
            "ts => ts.map(t => [t.dataset.traceId, t.querySelector('.trace-link a').href])",
        )
        assert traces == [[t, JAEGER.format(trace_id=t)] for t in golden]
        # content is never shown unless --traces.capture-content is on
        assert "gen_ai.input.messages" not in tab.inner_text("main")


def test_a_live_turn_is_drawn_running_then_redrawn_when_it_ends_with_its_failed_tool_marked(
    tmp_path: Path, tab: Any, stand_ins: list[subprocess.Popen[bytes]]
) -> None:
    """print-two-tools' journal cut after the first tool's result, its session live and busy: the
    turn is drawn running, its open spans marked. The rest of the journal appended, the page
    redraws the turn from the pushed row alone: completed, the recorded failing Bash marked."""
    facts = expected(V / "print-two-tools")["sessions"][0]
    home = home_of(tmp_path, "print-two-tools")
    (path,) = home.glob(f"projects/*/{TWO_TOOLS}.jsonl")
    lines = path.read_text().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if '"tool_result"' in line) + 1
    path.write_text("".join(lines[:cut]))
    write_index(home, stand_in(stand_ins), TWO_TOOLS, status="busy")
    with serve(home, tmp_path) as url:
        open_console(tab, url, f"#/session/claude-code/{TWO_TOOLS}")
        tab.wait_for_selector("#live[data-state='live']", timeout=10_000)
        tab.wait_for_selector("details.turn.running[data-outcome='running']", timeout=10_000)
        assert tab.locator("li.span .open-mark").count() >= 2  # the turn and the pending tool
        with path.open("a") as journal_file:
            journal_file.write("".join(lines[cut:]))
        tab.wait_for_selector("details.turn[data-outcome='completed']", timeout=5000)
        assert tab.locator("li.span .open-mark").count() == 0
        chats = tab.locator("li.span[data-operation='chat']").count()
        assert chats == facts["messages"]
        tools = tab.eval_on_selector_all(
            "li.span[data-operation='execute_tool']",
            "ls => ls.map(l => [l.dataset.name, l.classList.contains('error')])",
        )
        assert [name for name, _ in tools] == ["execute_tool Bash"] * facts["tool_calls"][
            "by_tool"
        ]["Bash"]
        assert [failed for _, failed in tools].count(True) == facts["tool_calls"]["error"]
        assert tools[-1][1]  # the second command exits 3 (the scenario's description)
        failed = tab.locator("li.span.error .error-mark")
        assert failed.count() == 1 and "error" in failed.inner_text()


def test_a_wait_for_you_under_way_is_drawn_under_the_blocked_tool_call(
    tmp_path: Path, tab: Any, stand_ins: list[subprocess.Popen[bytes]]
) -> None:
    """print-two-tools cut after its first tool call (no result yet) while its live index says
    it waits on a permission prompt: the running turn shows the wait under that call."""
    home = home_of(tmp_path, "print-two-tools")
    (path,) = home.glob(f"projects/*/{TWO_TOOLS}.jsonl")
    lines = path.read_text().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if '"type":"tool_use","id"' in line) + 1
    path.write_text("".join(lines[:cut]))
    agent = stand_in(stand_ins)
    write_index(home, agent, TWO_TOOLS, status="waiting", waitingFor="permission prompt")
    with serve(home, tmp_path) as url:
        open_console(tab, url, f"#/session/claude-code/{TWO_TOOLS}")
        wait = tab.wait_for_selector("li.span[data-operation='wait']", timeout=10_000)
        assert wait.get_attribute("data-name") == "wait permission prompt"
        parent = wait.evaluate("n => n.parentElement.closest('li.span').dataset.name")
        assert parent == "execute_tool Bash"
        assert tab.locator("details.turn[data-outcome='running']").count() == 1


def test_a_session_too_long_to_replay_whole_says_its_earlier_turns_are_left_out(
    tmp_path: Path, tab: Any
) -> None:
    """A journal past the replay's 16 MiB (the recorded print-two-tools turn again and again
    under fresh ids): its last turns are drawn, and the page says the earlier ones are not."""
    home = home_of(tmp_path, "print-two-tools")
    (path,) = home.glob(f"projects/*/{TWO_TOOLS}.jsonl")
    turn = path.read_bytes()
    with path.open("wb") as out:
        n = 0
        while out.tell() < 17 * 1024 * 1024:
            copy = turn.replace(b"msg_stub_", f"msg_{n:07d}_".encode())
            copy = re.sub(rb'"(uuid|parentUuid)":"[0-9a-f]{8}', rb'"\1":"%08x' % n, copy)
            out.write(copy.replace(b"toolu_stub_", f"toolu_{n:07d}_".encode()))
            n += 1
    with serve(home, tmp_path) as url:
        open_console(tab, url, f"#/session/claude-code/{TWO_TOOLS}")
        note = tab.wait_for_selector("p.skipped", timeout=30_000)
        assert "Earlier turns are left out" in note.inner_text()
        assert tab.locator("details.turn").count() == 50  # the last 50 of those read


CONTRAST = """() => {
  const rgb = (text) => (text.match(/[\\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => [r, g, b].map((c) => c / 255)
    .map((c) => (c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4))
    .reduce((sum, c, i) => sum + c * [0.2126, 0.7152, 0.0722][i], 0);
  const background = (node) => {
    for (; node; node = node.parentElement) {
      const color = rgb(getComputedStyle(node).backgroundColor);
      if (color.length === 3 || color[3] > 0) return color.slice(0, 3);
    }
    return [255, 255, 255];
  };
  const low = [];
  for (const node of document.querySelectorAll("body *")) {
    const own = [...node.childNodes].some((c) => c.nodeType === 3 && c.textContent.trim());
    if (!own || !node.getClientRects().length) continue;
    const [a, b] = [lum(rgb(getComputedStyle(node).color)), lum(background(node))];
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    if (ratio < 4.5) low.push(`${node.tagName}.${node.className}: ${ratio.toFixed(2)}`);
  }
  return low;
}"""
"""Every visible text against the background it sits on: the elements under 4.5:1 (WCAG AA)."""


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_text_meets_wcag_aa_contrast_in_both_colour_schemes(
    tmp_path: Path, browser: Any, stand_ins: list[subprocess.Popen[bytes]], scheme: str
) -> None:
    home = home_of(tmp_path, "print-two-tools", "subagent-foreground", "interactive")
    write_index(
        home, stand_in(stand_ins), FOREGROUND, status="waiting", waitingFor="permission prompt"
    )
    write_index(home, stand_in(stand_ins), TWO_TOOLS, status="busy")
    with serve(home, tmp_path) as url:
        tab = Page(browser, scheme=scheme)
        open_console(tab.page, url, "#/?history=1")
        assert tab.page.evaluate(CONTRAST) == []
        open_console(tab.page, url, f"#/session/claude-code/{FOREGROUND}")
        tab.page.wait_for_selector("ul.waterfall", timeout=10_000)
        tab.page.locator("li.span .span-name").nth(3).click()  # an open span's attributes
        assert tab.page.evaluate(CONTRAST) == []
        tab.close()


def test_a_long_session_shows_its_last_fifty_turns_then_all_of_them(
    tmp_path: Path, tab: Any
) -> None:
    session_id, _ = journal(tmp_path / "claude", 3, turns=60)
    with serve(tmp_path / "claude", tmp_path) as url:
        open_console(tab, url, f"#/session/claude-code/{session_id}")
        tab.wait_for_selector("ul.waterfall", state="attached", timeout=10_000)
        turns = tab.locator("details.turn")
        assert turns.count() == 50
        assert tab.locator("#h-turns").inner_text() == "Turns (the last 50 of 60)"
        assert turns.first.locator(".turn-no").inner_text() == "Turn 11"
        assert tab.locator("details.turn[open]").count() == 10  # the last ten unfolded
        tab.click("text=Show 60 turns")
        tab.wait_for_selector("#h-turns:text-is('Turns')", timeout=5000)
        assert turns.count() == 60 and turns.first.locator(".turn-no").inner_text() == "Turn 1"
        chart = tab.locator(".tokens-chart svg")
        assert chart.get_attribute("data-points") == "60"  # one response a turn


def test_times_are_the_viewers_local_times(tmp_path: Path, browser: Any) -> None:
    """A viewer in New York sees the recorded start (09:19:40 UTC) as 04:19:40 AM EST, on hover
    in the list and in the session's header."""
    home = home_of(tmp_path, "subagent-foreground")
    with serve(home, tmp_path) as url:
        row = json.loads(get(f"{url}/api/sessions/claude-code/{FOREGROUND}")[1])
        started = datetime.fromisoformat(row["started_at"]).astimezone(ZoneInfo("America/New_York"))
        local = started.strftime("%I:%M:%S %p ") + (started.tzname() or "")
        assert local == "04:19:40 AM EST"
        updated = datetime.fromisoformat(row["updated_at"]).astimezone(ZoneInfo("America/New_York"))
        tab = Page(browser, zone="America/New_York")
        open_console(tab.page, url, "#/?history=1")
        hover = tab.page.locator(f"{ROW.format(FOREGROUND)} .c-activity time")
        assert hover.get_attribute("datetime") == row["updated_at"]
        assert updated.strftime("%I:%M:%S %p ") + (updated.tzname() or "") in (
            hover.get_attribute("title") or ""
        )
        tab.page.click(f"{ROW.format(FOREGROUND)} .c-title a")
        tab.page.wait_for_selector("#session-title", timeout=5000)
        assert local in tab.page.locator(".fact", has_text="Started").inner_text()
        tab.close()


def test_the_console_works_over_tls_with_basic_auth(
    tmp_path: Path, browser: Any, request: pytest.FixtureRequest
) -> None:
    """Behind `--web.config.file` the browser is asked for the user once: the page, its files,
    the API and the event stream all pass with it."""
    config = request.getfixturevalue("web_config")
    home = home_of(tmp_path, "subagent-foreground")
    with run_exporter(
        home, tmp_path, *OTHERS, "--web.config.file", str(config), ready=False
    ) as url:
        secure = url.replace("http://", "https://")
        ca = config.parent / "server.crt"
        wait_for("https", lambda: fetch_tls(secure + "/-/ready", ca, "s3cret") == 200)
        context = browser.new_context(
            ignore_https_errors=True,  # the test's own self-signed certificate
            http_credentials={"username": "prometheus", "password": "s3cret"},
        )
        page = context.new_page()
        page.goto(f"{secure}/#/?history=1", timeout=30_000)
        page.wait_for_selector(ROW.format(FOREGROUND), timeout=30_000)
        page.wait_for_selector("#live[data-state='live']", timeout=10_000)
        context.close()
        context = browser.new_context(ignore_https_errors=True)  # no password: nothing
        with pytest.raises(sync_api.Error, match="ERR_INVALID_AUTH_CREDENTIALS"):
            context.new_page().goto(f"{secure}/")  # asked for a user, none given
        context.close()


def test_a_dashboard_link_that_does_not_know_the_agent_opens_the_session(
    tmp_path: Path, tab: Any
) -> None:
    """Grafana's tables link to `#/session/<agent>/<id>` with the agent they have, which may be
    none (dashboards/grafana_json.py console_url): the id alone finds the session."""
    home = home_of(tmp_path, "subagent-foreground")
    with serve(home, tmp_path) as url:
        open_console(tab, url, f"#/session//{FOREGROUND}")
        tab.wait_for_selector("ul.waterfall", timeout=10_000)
        assert tab.locator("#session-title").inner_text() == (
            "SCENARIO:agent count the files with an agent"
        )
        assert tab.locator(".fact:has(dt:text-is('Agent')) dd").inner_text() == (
            "claude-code 2.1.332"
        )


@pytest.mark.parametrize("scenario", ["subagent-nested", "subagent-nested-fails"])
def test_the_session_view_draws_nested_subagents_at_every_level(
    tmp_path: Path, tab: Any, scenario: str
) -> None:
    """A recorded lead → middle agent → grandchild (Claude Code 2.1.332): the sub-agent tree
    holds the grandchild inside its parent's item, with the state its launching call gave it,
    and the turn's waterfall nests each level under the call that started it, as the traces
    export it (the golden) and as the recording's files say (each `.meta.json`'s parent)."""
    facts = expected(V / scenario)["sessions"][0]
    session = facts["session_id"]
    metas = {
        p.name.removesuffix(".meta.json").removeprefix("agent-"): json.loads(p.read_text())
        for p in (V / scenario / "home" / "projects").rglob("agent-*.meta.json")
    }
    (grandchild,) = [a for a, m in metas.items() if m.get("parentAgentId")]
    middle = metas[grandchild]["parentAgentId"]
    states = {s["id"]: s["state"] for s in facts["subagents"]}
    home = home_of(tmp_path, scenario)
    with run_exporter(home, tmp_path, *OTHERS) as url:
        open_console(tab, url, f"#/session/claude-code/{session}")
        tab.wait_for_selector("ul.waterfall", timeout=10_000)
        inner = tab.locator(f"li[data-subagent='{middle}'] li[data-subagent='{grandchild}']")
        assert inner.count() == 1  # drawn inside its parent's item
        for agent_id, state in states.items():
            item = tab.locator(f"li[data-subagent='{agent_id}'] > .sub .state")
            assert item.inner_text() == state, agent_id
        drawn = dict(tab.eval_on_selector_all("details.turn", DRAWN))
        golden = golden_trees(f"2.1.332-{scenario}")
        assert set(drawn) == set(golden)
        for trace, spans in golden.items():
            nesting = [(depth, name) for depth, name, *_ in drawn[trace]]
            assert nesting == [(depth, name) for depth, name, *_ in spans], trace
        (turn,) = [t for t, spans in drawn.items() if any("Agent" in s[1] for s in spans)]
        tree = [(d, n) for d, n, *_ in drawn[turn]]
        agents = [d for d, n in tree if n.startswith("invoke_agent general-purpose")]
        assert agents == [2, 4]  # the middle agent under the lead's call, its child under its own
        assert tree[tree.index((4, "invoke_agent general-purpose")) - 1] == (
            3,
            "execute_tool Agent",
        )

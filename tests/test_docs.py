"""The docs keep up with the code: every long option of every command's `--help` is in the
flag tables of docs/configuration.md (in the same row as its environment variable), and every
relative link of README.md and docs/*.md points at a file that exists, and at a heading of
that page when it names one (`page.md#anchor`, GitHub's slugs)."""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

import pytest

from coding_agent_exporter.runtime.config import parser

ROOT = Path(__file__).resolve().parent.parent
CONFIGURATION = ROOT / "docs" / "configuration.md"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NOT_FLAGS = {"-h", "--help", "--version"}
ENV = re.compile(r"\[env (CODING_AGENT_EXPORTER_[A-Z0-9_]+)\]")

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)", re.DOTALL)
INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$", re.MULTILINE)
HTML = re.compile(r"<(?:a|img)\b[^>]*?\b(?:href|src)=\"([^\"]+)\"", re.IGNORECASE)
HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$", re.MULTILINE)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:|^//")


def options() -> list[tuple[str, str, str | None]]:
    """(command, long option, the environment variable its help names, or None), for every
    command of the parser."""
    top = parser({"HOME": "/home/user"})
    commands = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    found = []
    for command, sub in commands.choices.items():
        for action in sub._actions:
            env = ENV.search(action.help or "")
            for option in action.option_strings:
                if option.startswith("--") and option not in NOT_FLAGS:
                    found.append((command, option, env.group(1) if env else None))
    return found


OPTIONS = options()
SERVE = {option for command, option, _ in OPTIONS if command == "serve"}
FLAGS = sorted({(option, env) for _, option, env in OPTIONS if option in SERVE})
OWN = sorted({(command, option) for command, option, _ in OPTIONS if option not in SERVE})


def strip_code(text: str) -> str:
    """The page without its code blocks and code spans (no links or headings in those)."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def table_rows(path: Path) -> list[str]:
    text = FENCE.sub("", path.read_text())
    return [line for line in text.splitlines() if line.lstrip().startswith("|")]


def test_the_parser_is_what_the_tests_expect() -> None:
    """Every flag `serve` takes has an environment variable named after it: if `--help` stopped
    naming them, the test below would stop checking them."""
    assert len(FLAGS) > 20 and {"sessions", "traces"} <= {command for command, _ in OWN}
    for option, env in FLAGS:
        positive = option.replace("--no-", "--", 1)
        name = positive.lstrip("-").replace(".", "_").replace("-", "_").upper()
        assert env == f"CODING_AGENT_EXPORTER_{name}", option


@pytest.mark.parametrize(("option", "env"), FLAGS, ids=[option for option, _ in FLAGS])
def test_every_flag_is_in_the_configuration_page(option: str, env: str | None) -> None:
    rows = [row for row in table_rows(CONFIGURATION) if f"`{option}`" in row]
    assert rows, f"{option} is not in a table of {CONFIGURATION.relative_to(ROOT)}"
    if env is not None:
        assert any(f"`{env}`" in row for row in rows), (
            f"{option}: its environment variable {env} is not in its row of "
            f"{CONFIGURATION.relative_to(ROOT)}"
        )


@pytest.mark.parametrize(("command", "option"), OWN, ids=[f"{c} {o}" for c, o in OWN])
def test_every_flag_of_one_command_is_in_the_configuration_page(command: str, option: str) -> None:
    rows = table_rows(CONFIGURATION)
    assert any(f"`{option}`" in row and f"`{command}`" in row for row in rows), (
        f"`{command} {option}` is not in a table of {CONFIGURATION.relative_to(ROOT)}"
    )


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: its text (no markup), lower case, without punctuation but
    `-` and `_`, spaces as `-`."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "")
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: Counter[str] = Counter()
    found = set()
    for match in HEADING.finditer(FENCE.sub("", path.read_text())):
        base = slug(match.group(1))
        found.add(base if not seen[base] else f"{base}-{seen[base]}")
        seen[base] += 1
    return found


def links(path: Path) -> list[str]:
    text = strip_code(path.read_text())
    patterns = (INLINE_LINK, REFERENCE, HTML)
    found = [match.group(1) for pattern in patterns for match in pattern.finditer(text)]
    return [target for target in found if not SCHEME.match(target)]


def test_slugs_are_githubs() -> None:
    assert slug("The bundled stack: dashboards, alerts, docker compose") == (
        "the-bundled-stack-dashboards-alerts-docker-compose"
    )
    assert slug("What each agent's files reveal") == "what-each-agents-files-reveal"
    assert slug("`--web.config.file` and [TLS](x.md)") == "--webconfigfile-and-tls"
    assert slug("OTEL_* variables") == "otel_-variables"


def test_links_are_found() -> None:
    """The README links to every page of docs/ (so the test below has something to check)."""
    readme = links(ROOT / "README.md")
    for page in PAGES[1:]:
        if page.name != "README.md":
            assert f"docs/{page.name}" in readme, page.name
    assert links(CONFIGURATION) and anchors(CONFIGURATION) >= {"flags", "web-config-file"}


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_relative_links_point_at_what_exists(page: Path) -> None:
    broken = []
    for target in links(page):
        name, _, anchor = target.partition("#")
        path = (page.parent / name).resolve() if name else page
        if not path.is_relative_to(ROOT):
            broken.append(f"{target}: outside the repository")
        elif not path.exists():
            broken.append(f"{target}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            broken.append(f"{target}: no heading #{anchor} in {path.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)

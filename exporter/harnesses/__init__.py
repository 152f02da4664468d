"""The registry of harnesses: adding an agent is one module and one line here."""

from __future__ import annotations

from .base import FileKind, FileReader, Harness, RecordRejected, TableLog, TableReader
from .claude_code import ClaudeCode
from .codex import Codex
from .gemini_cli import GeminiCli
from .grok import Grok
from .opencode import OpenCode
from .pi import OhMyPi, Pi
from .vibe import Vibe

HARNESSES: dict[str, type[Harness]] = {
    ClaudeCode.name: ClaudeCode,
    Codex.name: Codex,
    GeminiCli.name: GeminiCli,
    OpenCode.name: OpenCode,
    Grok.name: Grok,
    Pi.name: Pi,
    OhMyPi.name: OhMyPi,
    Vibe.name: Vibe,
}


def make(name: str, model: str | None = None) -> Harness:
    """A harness, given the model its agent's settings name (only Vibe needs one)."""
    return Vibe(model) if name == Vibe.name else HARNESSES[name]()


__all__ = [
    "HARNESSES",
    "FileKind",
    "FileReader",
    "Harness",
    "RecordRejected",
    "TableLog",
    "TableReader",
    "make",
]

"""The registry of harnesses: adding an agent is one module and one line here."""

from __future__ import annotations

from .base import FileKind, FileReader, Harness, TableLog, TableReader
from .claude_code import ClaudeCode
from .codex import Codex
from .gemini_cli import GeminiCli
from .grok import Grok
from .opencode import OpenCode
from .pi import OhMyPi, Pi

HARNESSES: dict[str, type[Harness]] = {
    ClaudeCode.name: ClaudeCode,
    Codex.name: Codex,
    GeminiCli.name: GeminiCli,
    OpenCode.name: OpenCode,
    Grok.name: Grok,
    Pi.name: Pi,
    OhMyPi.name: OhMyPi,
}

__all__ = ["HARNESSES", "FileKind", "FileReader", "Harness", "TableLog", "TableReader"]

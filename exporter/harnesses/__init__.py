"""The registry of harnesses: adding an agent is one module and one line here."""

from __future__ import annotations

from .base import FileKind, FileReader, Harness, TableLog, TableReader
from .claude_code import ClaudeCode
from .codex import Codex
from .gemini_cli import GeminiCli
from .opencode import OpenCode

HARNESSES: dict[str, type[Harness]] = {
    ClaudeCode.name: ClaudeCode,
    Codex.name: Codex,
    GeminiCli.name: GeminiCli,
    OpenCode.name: OpenCode,
}

__all__ = ["HARNESSES", "FileKind", "FileReader", "Harness", "TableLog", "TableReader"]

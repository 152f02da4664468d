"""The registry of harnesses: adding an agent is one module and one line here."""

from __future__ import annotations

from .base import FileKind, FileReader, Harness
from .claude_code import ClaudeCode
from .codex import Codex

HARNESSES: dict[str, type[Harness]] = {
    ClaudeCode.name: ClaudeCode,
    Codex.name: Codex,
}

__all__ = ["HARNESSES", "FileKind", "FileReader", "Harness"]

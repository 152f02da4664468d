"""Gemini CLI: what its files say (see README.md beside this file)."""

from .harness import GeminiCli

__all__ = ["GeminiCli"]

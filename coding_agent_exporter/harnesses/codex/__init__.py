"""OpenAI Codex: what its files say (see README.md beside this file)."""

from .harness import Codex

__all__ = ["Codex"]

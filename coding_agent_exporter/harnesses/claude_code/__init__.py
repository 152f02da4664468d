"""Claude Code: what its files say (see README.md beside this file)."""

from .harness import ClaudeCode

__all__ = ["ClaudeCode"]

"""GitHub Copilot CLI: what its files say (see README.md beside this file)."""

from .harness import Copilot

__all__ = ["Copilot"]

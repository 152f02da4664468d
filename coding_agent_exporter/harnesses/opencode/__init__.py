"""OpenCode: what its files say (see README.md beside this file)."""

from .harness import OpenCode

__all__ = ["OpenCode"]

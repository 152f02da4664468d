"""Cline CLI: what its files say (see README.md beside this file)."""

from .harness import Cline

__all__ = ["Cline"]

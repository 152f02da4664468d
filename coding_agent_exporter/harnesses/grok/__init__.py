"""Grok Build: what its files say (see README.md beside this file)."""

from .harness import Grok

__all__ = ["Grok"]

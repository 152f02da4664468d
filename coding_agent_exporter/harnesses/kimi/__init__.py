"""Kimi CLI: what its files say (see README.md beside this file)."""

from .harness import Kimi

__all__ = ["Kimi"]

"""Kilo Code CLI: what its files say (see README.md beside this file)."""

from .harness import KiloCode

__all__ = ["KiloCode"]

"""Hermes Agent: what its files say (see README.md beside this file)."""

from .harness import Hermes

__all__ = ["Hermes"]

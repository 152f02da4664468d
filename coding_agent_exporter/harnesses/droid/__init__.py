"""Factory Droid: what its files say (see README.md beside this file)."""

from .harness import Droid

__all__ = ["Droid"]

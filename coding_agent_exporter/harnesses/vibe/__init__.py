"""Mistral Vibe: what its files say (see README.md beside this file)."""

from .harness import Vibe

__all__ = ["Vibe"]

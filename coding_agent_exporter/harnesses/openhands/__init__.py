"""OpenHands CLI (PyPI `openhands`): its conversation folders (see README.md)."""

from .harness import OpenHands

__all__ = ["OpenHands"]

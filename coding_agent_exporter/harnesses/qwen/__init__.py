"""Qwen Code: what its files say (see README.md beside this file)."""

from .harness import QwenCode

__all__ = ["QwenCode"]

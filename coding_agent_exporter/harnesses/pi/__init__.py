"""pi and oh-my-pi: what its files say (see README.md beside this file)."""

from .harness import OhMyPi, Pi

__all__ = ["OhMyPi", "Pi"]

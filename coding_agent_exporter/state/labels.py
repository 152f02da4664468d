"""How values become label values: the project from a cwd, the live state from a status word."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePath
from typing import Literal

ProjectMode = Literal["path", "basename", "none"]
STATES = ("needs_user", "running", "background", "idle", "unknown")
"""Live states, in the order the console and `sessions` sort them: needs_user first."""
_STATUS = {"busy": "running", "waiting": "needs_user", "shell": "background", "idle": "idle"}


def live_state(status: str | None) -> str:
    """The agent's own status word → our state; an unknown or missing word is never guessed."""
    return _STATUS.get(status or "", "unknown")


@dataclass(frozen=True, slots=True)
class ProjectLabel:
    mode: ProjectMode = "path"
    home: str = ""

    def __call__(self, cwd: str | None) -> str:
        if not cwd or self.mode == "none":
            return ""
        if self.mode == "basename":
            return PurePath(cwd).name
        home = self.home.rstrip("/\\")  # Windows' cwds use backslashes
        if home and (cwd == home or cwd.startswith((home + "/", home + "\\"))):
            return "~" + cwd[len(home) :]
        return cwd

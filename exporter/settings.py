"""Settings of an agent that the exporter must know before reading its files.

Vibe keeps its sessions in `logs/session/` under its home unless its `config.toml` says
otherwise (`[session_logging] save_dir`), and a session may not name its model (2.26's TUI):
the config's `active_model` is then the one it used. Only `config.toml` is opened, never a
credential file; a config that cannot be read or parsed is logged and the defaults hold.
"""

from __future__ import annotations

import logging
import tomllib
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class VibeSettings:
    sessions: Path
    model: str | None


def vibe_settings(vibe_home: Path, session_dir: str = "") -> VibeSettings:
    """Where Vibe's sessions are (`session_dir` wins when given) and its configured model."""
    config = _read_toml(vibe_home / "config.toml")
    logging_table = config.get("session_logging")
    save_dir = logging_table.get("save_dir") if isinstance(logging_table, dict) else None
    if session_dir:
        sessions = Path(session_dir).expanduser()
    elif isinstance(save_dir, str) and save_dir:
        sessions = Path(save_dir).expanduser()
    else:
        sessions = vibe_home / "logs" / "session"
    model = config.get("active_model")
    return VibeSettings(sessions, model if isinstance(model, str) and model else None)


def _read_toml(path: Path) -> dict[str, object]:
    try:
        with path.open("rb") as file:
            return tomllib.load(file)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as error:
        log.warning("vibe: %s: %s (using the default session folder and model)", path, error)
        return {}

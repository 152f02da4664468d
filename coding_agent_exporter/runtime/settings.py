"""An agent's own settings, read before its files: the one file of an agent's folder read whole.

A harness may name a TOML file below its home (`settings_file`, e.g. Vibe's `config.toml`); it is
read here and handed to the harness's pure `settings`, with the values of its own flags, to find
where its files are and the model it is set to. Only that file is opened, never a credential
file; a file that cannot be read or parsed is logged and the defaults hold.
"""

from __future__ import annotations

import logging
import tomllib
from collections.abc import Mapping
from pathlib import Path

from ..harnesses import Harness
from ..harnesses.base import Document, Settings

log = logging.getLogger(__name__)


def settings_of(
    harness: type[Harness], home: Path, options: Mapping[str, str] | None = None
) -> Settings:
    """What `harness` makes of its home, its settings file and its flags' values."""
    document = (
        _read_toml(harness.name, home / harness.settings_file) if harness.settings_file else {}
    )
    return harness.settings(home, options or {}, document)


def _read_toml(name: str, path: Path) -> Document:
    try:
        with path.open("rb") as file:
            return tomllib.load(file)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as error:
        log.warning("%s: %s: %s (its defaults hold)", name, path, error)
        return {}

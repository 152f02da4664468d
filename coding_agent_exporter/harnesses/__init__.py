"""The registry of harnesses: adding an agent is one package (`harnesses/<agent>/`, its reader
modules and a README of what it reads) and one line here. `base` is the interface every harness
implements; `fields` the helpers they share."""

from __future__ import annotations

from .base import (
    FileKind,
    FileReader,
    Harness,
    Probes,
    RecordRejected,
    Settings,
    TableLog,
    TableReader,
)
from .claude_code import ClaudeCode
from .cline import Cline
from .codex import Codex
from .copilot import Copilot
from .droid import Droid
from .gemini_cli import GeminiCli
from .grok import Grok
from .hermes import Hermes
from .kilo import KiloCode
from .kimi import Kimi
from .opencode import OpenCode
from .openhands import OpenHands
from .pi import OhMyPi, Pi
from .qwen import QwenCode
from .vibe import Vibe

HARNESSES: dict[str, type[Harness]] = {
    ClaudeCode.name: ClaudeCode,
    Cline.name: Cline,
    Codex.name: Codex,
    Copilot.name: Copilot,
    Droid.name: Droid,
    GeminiCli.name: GeminiCli,
    OpenCode.name: OpenCode,
    OpenHands.name: OpenHands,
    Grok.name: Grok,
    Hermes.name: Hermes,
    KiloCode.name: KiloCode,
    Kimi.name: Kimi,
    Pi.name: Pi,
    OhMyPi.name: OhMyPi,
    QwenCode.name: QwenCode,
    Vibe.name: Vibe,
}


def make(name: str, settings: Settings, probes: Probes) -> Harness:
    """The harness of agent `name`, made from what its settings say and what it may ask."""
    return HARNESSES[name].made(settings, probes)


__all__ = [
    "HARNESSES",
    "FileKind",
    "FileReader",
    "Harness",
    "Probes",
    "RecordRejected",
    "Settings",
    "TableLog",
    "TableReader",
    "make",
]

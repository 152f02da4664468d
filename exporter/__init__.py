"""coding-agent-exporter: Prometheus metrics and OTLP traces from coding-agent session files.

The package is laid out as the data flows (see ARCHITECTURE.md):
`sources` (bytes, file events, processes) → `harnesses` (one per agent: records in, `events`
out) → `state` (what is known) → `prometheus`, `traces`, `web` (what is published), with
`runtime` (CLI, config, the reading loop) on top. No package imports one to its right.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("coding-agent-exporter")
except PackageNotFoundError:  # running from a checkout without install
    __version__ = "0.0.0+unknown"

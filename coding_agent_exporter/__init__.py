"""coding-agent-exporter: Prometheus metrics and OTLP traces from coding-agent session files.

The package is laid out as the data flows (see ARCHITECTURE.md):
`sources` (bytes, file events, processes) → `harnesses` (one per agent: records in, `events`
out) → `state` (what is known) → `prometheus`, `traces`, `web` (what is published), with
`runtime` (CLI, config, the reading loop) on top. No package imports one to its right.
"""

__version__ = "0.1.0"
"""The one place the version is written (`pyproject.toml` reads it): asking the installed
package's metadata instead costs every start ~60 ms of imports."""

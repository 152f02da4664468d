"""coding-agent-exporter: Prometheus metrics and OTLP traces from coding-agent session files."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("coding-agent-exporter")
except PackageNotFoundError:  # running from a checkout without install
    __version__ = "0.0.0+unknown"

"""What goes out as OTLP metrics: `bridge` reads the /metrics families from the registry at each
export, `push` sends them (wired from the OTEL_* variables), `resource` names the machine and
the user for metrics and spans alike.
"""

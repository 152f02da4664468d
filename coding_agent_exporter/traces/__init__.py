"""What goes to OTLP: `spans` turns the work the state counted into one trace per turn with
the OpenTelemetry API only; `sdk` wires the SDK from the standard OTEL_* variables (the one place
that does); `semconv`, `redact` and `checkpoint` serve them.
"""

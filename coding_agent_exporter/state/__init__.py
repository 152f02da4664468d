"""All that the exporter knows, folded from the harnesses' events, and nothing else.

`state.State` folds events into `session` records, history totals and live entries; `liveness`
decides which live entries hold a session (given a probe from `sources`); `health` holds what
the reading loop counted about itself. What is published (`prometheus`, `traces`, `web`) is
read from here; this package imports nothing from those, nor from `runtime`.
"""

"""The HTTP side: `server` serves /metrics, the console (`static/`), its JSON (`api`), the rows
that change (`live`) and the probes (`webconfig`: TLS and basic auth); `views` turns sessions
into the rows of the console and of the `sessions` command; `notify` is Alertmanager's webhook.
"""

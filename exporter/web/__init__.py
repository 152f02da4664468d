"""The HTTP side: `server` serves /metrics, the landing page and the probes (`webconfig`: TLS
and basic auth); `views` turns sessions into the rows of that page and of the `sessions` command.
"""

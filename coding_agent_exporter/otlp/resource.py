"""The OTLP resource of metrics and spans alike: which exporter, on which machine, for whom.

service.name (OTEL_SERVICE_NAME, default coding-agent-exporter), service.version,
host.name (this machine's name), service.instance.id (stable across restarts: derived from the
host name and the state folder, so one user's exporter on one machine is one instance),
user.name (`--label.user`, only when given). OTEL_RESOURCE_ATTRIBUTES adds more and may set
host.name and service.instance.id itself; `--label.user` wins over a user.name in it.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Mapping
from pathlib import Path

from opentelemetry.sdk.resources import OTELResourceDetector, Resource

from .. import __version__

SERVICE_NAME = "coding-agent-exporter"
_INSTANCES = uuid.UUID("5b0c3c0e-5f4e-4a8e-9a43-2f1c6c1f0a21")
"""The namespace of the instance ids (UUID version 5)."""


def resource(
    environ: Mapping[str, str], user: str | None = None, state_dir: Path | None = None
) -> Resource:
    host = socket.gethostname()
    instance = uuid.uuid5(_INSTANCES, f"{host}\n{state_dir or ''}")
    machine = Resource({"host.name": host, "service.instance.id": str(instance)})
    service = {"service.name": environ.get("OTEL_SERVICE_NAME") or SERVICE_NAME}
    service["service.version"] = __version__
    found = Resource.create(service).merge(machine)  # over the SDK's random instance id
    found = found.merge(OTELResourceDetector().detect())  # OTEL_RESOURCE_ATTRIBUTES wins
    found = found.merge(Resource({"service.name": service["service.name"]}))
    if user:
        found = found.merge(Resource({"user.name": user}))
    return found

"""`--web.config.file`: TLS and basic auth for /metrics, in the format of Prometheus'
exporter-toolkit, so one file serves node_exporter and this exporter alike:

    tls_server_config:
      cert_file: server.crt
      key_file: server.key
      client_ca_file: ca.crt            # optional: ask clients for a certificate
      client_auth_type: RequireAndVerifyClientCert   # or NoClientCert (default)
      min_version: TLS12                # TLS12 (default) or TLS13
    basic_auth_users:
      prometheus: $2y$10$...            # bcrypt hash (htpasswd -nBC 10 "" | tr -d ':')

Relative paths are relative to the file. Errors name the file and the key.
"""

from __future__ import annotations

import base64
import binascii
import ssl
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import bcrypt

_AUTH_TYPES = {
    "NoClientCert": ssl.CERT_NONE,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
}
_VERSIONS = {"TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}


class WebConfigError(ValueError):
    pass


@dataclass
class WebConfig:
    tls: ssl.SSLContext | None = None
    users: dict[str, bytes] = field(default_factory=dict)  # name → bcrypt hash
    _verified: set[tuple[str, bytes]] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def allows(self, authorization: str | None) -> bool:
        """Whether a request with this Authorization header may see anything."""
        if not self.users:
            return True
        if not authorization or not authorization.startswith("Basic "):
            return False
        try:
            decoded = base64.b64decode(authorization[6:], validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            return False
        user, _, password = decoded.partition(":")
        hashed = self.users.get(user)
        if hashed is None:
            return False
        key = (user, password.encode())
        with self._lock:  # bcrypt is slow on purpose: remember a password that matched
            if key in self._verified:
                return True
        if not bcrypt.checkpw(password.encode(), hashed):
            return False
        with self._lock:
            self._verified.add(key)
        return True


def load(path: Path) -> WebConfig:
    import yaml  # here: only a start with --web.config.file needs it (50 ms to import)

    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as error:
        raise WebConfigError(f"{path}: {error}") from error
    if not isinstance(data, dict):
        raise WebConfigError(f"{path}: expected a mapping at the top")
    unknown = set(data) - {"tls_server_config", "basic_auth_users", "http_server_config"}
    if unknown:
        raise WebConfigError(f"{path}: unknown keys {sorted(unknown)}")
    config = WebConfig()
    if data.get("tls_server_config"):
        config.tls = _tls(path, data["tls_server_config"])
    users = data.get("basic_auth_users") or {}
    if not isinstance(users, dict):
        raise WebConfigError(f"{path}: basic_auth_users must map user names to bcrypt hashes")
    for user, hashed in users.items():
        if not isinstance(hashed, str) or not hashed.startswith("$2"):
            raise WebConfigError(f"{path}: basic_auth_users.{user} is not a bcrypt hash")
        config.users[str(user)] = hashed.encode()
    return config


def _tls(path: Path, tls: Any) -> ssl.SSLContext:
    if not isinstance(tls, dict) or not tls.get("cert_file") or not tls.get("key_file"):
        raise WebConfigError(f"{path}: tls_server_config needs cert_file and key_file")
    base = path.parent
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    version = tls.get("min_version", "TLS12")
    if version not in _VERSIONS:
        raise WebConfigError(f"{path}: tls_server_config.min_version {version!r}: TLS12 or TLS13")
    context.minimum_version = _VERSIONS[version]
    cert, key = base / tls["cert_file"], base / tls["key_file"]
    try:
        context.load_cert_chain(cert, key)
        auth = tls.get("client_auth_type", "NoClientCert")
        if auth not in _AUTH_TYPES:
            raise WebConfigError(f"{path}: client_auth_type {auth!r}: one of {sorted(_AUTH_TYPES)}")
        context.verify_mode = _AUTH_TYPES[auth]
        if tls.get("client_ca_file"):
            context.load_verify_locations(base / tls["client_ca_file"])
        elif context.verify_mode != ssl.CERT_NONE:
            raise WebConfigError(f"{path}: client_auth_type {auth} needs client_ca_file")
    except (OSError, ssl.SSLError) as error:
        raise WebConfigError(f"{path}: tls_server_config ({cert}, {key}): {error}") from error
    return context

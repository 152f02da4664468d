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


MAX_PASSWORD = 72
"""Bytes of a password bcrypt looks at; a longer one is refused (bcrypt 4.1+ raises on it)."""


@dataclass
class WebConfig:
    tls: ssl.SSLContext | None = None
    users: dict[str, bytes] = field(default_factory=dict)  # name → bcrypt hash
    _verified: set[tuple[str, bytes]] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _dummy: bytes | None = None  # a hash of the users' cost, checked for an unknown user

    def allows(self, authorization: str | None) -> bool:
        """Whether a request with this Authorization header may see anything. As
        exporter-toolkit does: the scheme in any case (RFC 9110 §11.1), an unknown user costs
        a bcrypt check as a known one does (no user names told by timing), a password bcrypt
        cannot take (over 72 bytes) is refused like a wrong one."""
        if not self.users:
            return True
        scheme, _, credentials = (authorization or "").strip().partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            decoded = base64.b64decode(credentials.strip(), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            return False
        user, _, text = decoded.partition(":")
        password = text.encode()
        hashed = self.users.get(user)
        key = (user, password)
        with self._lock:  # bcrypt is slow on purpose: remember a password that matched
            if hashed is not None and key in self._verified:
                return True
        matched = _check(password, hashed if hashed is not None else self.dummy())
        if not matched or hashed is None:
            return False
        with self._lock:
            self._verified.add(key)
        return True

    def dummy(self) -> bytes:
        """A hash of the configured users' cost, of no password anyone has."""
        if self._dummy is None:
            cost = next(iter(self.users.values()))[4:6]
            rounds = int(cost) if cost.isdigit() else 12
            self._dummy = bcrypt.hashpw(b"no user has this password", bcrypt.gensalt(rounds))
        return self._dummy


def _check(password: bytes, hashed: bytes) -> bool:
    """bcrypt's verdict, the time taken also for a password too long for it."""
    if len(password) > MAX_PASSWORD:
        bcrypt.checkpw(b"", hashed)  # as long as a check: the length is not told by timing
        return False
    try:
        return bcrypt.checkpw(password, hashed)
    except ValueError:  # a malformed hash in the config: nobody matches it
        return False


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
    if config.users:
        config.dummy()  # made now, not by the first request for an unknown user
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

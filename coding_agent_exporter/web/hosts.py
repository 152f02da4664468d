"""Which `Host` and `Origin` a request may name: the defence against DNS rebinding.

A web page whose name an attacker re-points at 127.0.0.1 runs in the user's browser and can
reach an exporter listening there; the browser then sends the attacker's name as `Host` (and,
on the requests a script makes across origins, as `Origin`). So every request must name a host
this exporter is known by, as Jupyter, Vite and webpack-dev-server require:

- the loopback names and addresses (`localhost`, `*.localhost`, `127.0.0.0/8`, `::1`);
- the listen address, and when it is a wildcard (`0.0.0.0`, `::`), this machine's host names
  and the addresses of its interfaces (a Prometheus elsewhere scrapes it by one of those);
- the host of `--web.external-url` (a proxy in front of it);
- the names of `--web.allowed-hosts` (`*` allows every host: for a proxy that rewrites `Host`).

`Origin`, where a request carries one (a browser's script reaching across origins), must name
one of those hosts too. A request that fails is answered 403 and is not served. `/metrics` and
the health endpoints are answered whatever they name: a Prometheus elsewhere may know the
machine by any DNS name, and they hold no prompt, title or content (the console and its API,
which do, are what a rebinding page is after).
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

import psutil

__all__ = ["HostPolicy"]

LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})
WILDCARDS = frozenset({"", "0.0.0.0", "::"})


@dataclass(frozen=True, slots=True)
class HostPolicy:
    """The host names and addresses requests may name (lower case, without port)."""

    names: frozenset[str]
    anything: bool = False

    @classmethod
    def of(
        cls, listen: str, external_url: str | None = None, extra: Iterable[str] = ()
    ) -> HostPolicy:
        wanted = {name.strip().lower() for name in extra if name.strip()}
        if "*" in wanted:
            return cls(frozenset(), anything=True)
        names = {listen.lower().strip("[]")} | wanted
        if external_url:
            names.add((urlsplit(external_url).hostname or "").lower())
        if listen.strip("[]") in WILDCARDS:
            names |= _this_machine()
        return cls(frozenset(n for n in names if n))

    def allows_host(self, header: str | None) -> bool:
        """A `Host` header (HTTP/1.1 requires one) naming a host this exporter is known by."""
        if self.anything:
            return True
        host = _host_of(header)
        return host is not None and self._known(host)

    def allows_origin(self, header: str | None) -> bool:
        """No `Origin` (a same-origin navigation or a tool), or one naming a known host."""
        if header is None or self.anything:
            return True
        parts = urlsplit(header.strip())
        return parts.scheme in ("http", "https") and self._known((parts.hostname or "").lower())

    def _known(self, host: str) -> bool:
        if host in self.names or host in LOOPBACK_NAMES or host.endswith(".localhost"):
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False


def _host_of(header: str | None) -> str | None:
    """The host of a `Host` header (`name`, `name:port`, `[v6]:port`), lower case; None when
    missing or malformed."""
    if not header:
        return None
    text = header.strip().lower()
    if text.startswith("["):  # an IPv6 address
        end = text.find("]")
        rest = text[end + 1 :] if end > 0 else ":x"
        if rest and not (rest.startswith(":") and rest[1:].isdigit()):
            return None
        return text[1:end]
    host, _, port = text.partition(":")
    if port and not port.isdigit():
        return None
    return host or None


def _this_machine() -> set[str]:
    """The host names and interface addresses of this machine (a wildcard listen address)."""
    names = {socket.gethostname().lower()}
    with contextlib.suppress(OSError):
        names.add(socket.getfqdn().lower())
    try:
        interfaces = list(psutil.net_if_addrs().values())
    except (OSError, RuntimeError):
        interfaces = []
    for addresses in interfaces:
        for address in addresses:
            if address.family in (socket.AF_INET, socket.AF_INET6):
                names.add(address.address.split("%", 1)[0].lower())
    return names

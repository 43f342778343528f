"""The SSRF guard: which URLs the scraper may fetch, checked before every hop.

A page found on the web may point anywhere, including the cloud metadata
service (``169.254.169.254``), the host's own admin ports or the office LAN.
The guard refuses, by default, every address that is not globally routable:
private, loopback, link-local, multicast, reserved, unspecified, CGNAT, and
IPv6 forms that embed one of those (IPv4-mapped, 6to4, Teredo, NAT64).

It checks three places, because each alone can be dodged:

* the URL itself (:meth:`UrlGuard.check_url`): scheme, malformed hosts, and IP
  literals in every spelling the OS accepts (``2130706433``, ``0x7f.1``,
  ``0177.0.0.1``, ``127.1``), since aiohttp never asks a resolver about those;
* every address a name resolves to (:class:`GuardedResolver`, plugged into
  aiohttp's connector): one bad address refuses the whole name, and aiohttp
  connects only to the addresses this resolver vetted, so a DNS answer cannot
  change between the check and the connect;
* every redirect target (the fetcher calls :meth:`UrlGuard.check_url` again).

Allow-list mode: ``allow`` names hosts (``"intranet.example"``) or networks
(``"127.0.0.1"``, ``"10.0.0.0/8"``) that are permitted even though private;
with ``exclusive=True`` *only* those may be fetched (a deployment that scrapes
its own sites). A host allowed by name trusts what that name resolves to.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver
from yarl import URL

from ._exceptions import BlockedAddress, BlockedScheme

__all__ = ["GuardedResolver", "IPAddress", "UrlGuard", "is_public_address"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_Network = ipaddress.IPv4Network | ipaddress.IPv6Network

_ALLOWED_SCHEMES = frozenset({"http", "https"})
# Python's ``is_global`` misses a few ranges that are not publicly routable.
_EXTRA_BLOCKED: tuple[_Network, ...] = tuple(
    ipaddress.ip_network(n)
    for n in (
        "0.0.0.0/8",  # "this network"
        "100.64.0.0/10",  # CGNAT
        "192.0.0.0/24",  # IETF protocol assignments
        "198.18.0.0/15",  # benchmarking
        "224.0.0.0/4",  # multicast (is_global is True for some of it)
        "240.0.0.0/4",  # reserved
        "255.255.255.255/32",
        "64:ff9b:1::/48",  # local-use NAT64
        "ff00::/8",  # multicast
    )
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_HOST_CHARS = re.compile(r"^[a-z0-9._-]+$")


def _embedded_v4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if int(ip) >> 32 == 0 and int(ip) > 1:  # deprecated IPv4-compatible ::a.b.c.d
        return ipaddress.IPv4Address(int(ip))
    return None


def is_public_address(ip: IPAddress) -> bool:
    """Whether ``ip`` is globally routable (and embeds no non-public IPv4)."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.scope_id:
            return False
        inner = _embedded_v4(ip)
        if inner is not None and not is_public_address(inner):
            return False
    if not ip.is_global or ip.is_multicast or ip.is_reserved or ip.is_unspecified:
        return False
    return not any(ip in net for net in _EXTRA_BLOCKED if net.version == ip.version)


def parse_ip_literal(host: str) -> IPAddress | None:
    """The address a host string denotes as a literal, in any form the OS accepts.

    ``socket.inet_aton`` accepts the legacy forms (decimal ``2130706433``, octal
    ``0177.0.0.1``, hex ``0x7f.1``, short ``127.1``) exactly as ``getaddrinfo``
    would, so a host it parses is an IPv4 address whatever it looks like.
    """
    h = host.strip("[]").rstrip(".")
    if ":" in h:
        try:
            return ipaddress.IPv6Address(h)
        except ValueError:
            return None
    try:
        return ipaddress.IPv4Address(socket.inet_aton(h))
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class UrlGuard:
    """Decides whether a URL or an address may be fetched.

    Args:
        allow: hosts (exact names) or networks/addresses (CIDR) permitted even
            though they are not public; empty by default.
        exclusive: if true, nothing outside ``allow`` may be fetched at all.
        enabled: ``False`` turns the address checks off (schemes are still
            checked); for trusted benchmarks only.
    """

    allow: tuple[str, ...] = ()
    exclusive: bool = False
    enabled: bool = True
    _hosts: frozenset[str] = field(init=False, repr=False, compare=False)
    _networks: tuple[_Network, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        hosts: set[str] = set()
        nets: list[_Network] = []
        for entry in self.allow:
            try:
                nets.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
            except ValueError:
                hosts.add(entry.lower().rstrip("."))
        if self.exclusive and not self.allow:
            raise ValueError("exclusive allow-list mode needs at least one `allow` entry")
        object.__setattr__(self, "_hosts", frozenset(hosts))
        object.__setattr__(self, "_networks", tuple(nets))

    @classmethod
    def allowing(cls, *entries: str, exclusive: bool = False) -> UrlGuard:
        """A guard with an allow-list (e.g. ``UrlGuard.allowing("127.0.0.1")`` in tests)."""
        return cls(allow=tuple(entries), exclusive=exclusive)

    def host_allowed_by_name(self, host: str) -> bool:
        return host.lower().rstrip(".") in self._hosts

    def address_allowed(self, ip: IPAddress, *, host: str = "") -> bool:
        """Whether a connection to ``ip`` (reached via ``host``) is permitted."""
        if not self.enabled:
            return True
        if host and self.host_allowed_by_name(host):
            return True
        if any(ip.version == n.version and ip in n for n in self._networks):
            return True
        if self.exclusive:
            return False
        return is_public_address(ip)

    def check_url(self, url: URL | str) -> URL:
        """Refuse a URL by scheme, malformed host or IP literal; return it without credentials.

        Names are checked later, when :class:`GuardedResolver` resolves them.

        Raises:
            BlockedScheme: not http/https.
            BlockedAddress: no host, a malformed host, or a refused IP literal.
        """
        u = url if isinstance(url, URL) else URL(url)
        text = str(u)
        if u.scheme not in _ALLOWED_SCHEMES:
            raise BlockedScheme(f"scheme {u.scheme or '(none)'!r} is not allowed", url=text)
        host = u.host
        if not host:
            raise BlockedAddress("URL has no host", url=text)
        ip = parse_ip_literal(host)
        if ip is not None:
            if not self.address_allowed(ip):
                raise BlockedAddress(f"address {ip} is not allowed", url=text)
            if ip.version == 4 and host != str(ip):
                u = u.with_host(str(ip))  # aiohttp accepts only the canonical spelling
        else:
            name = (u.raw_host or host).lower().rstrip(".")  # IDNA (punycode) form
            if not _HOST_CHARS.match(name) or ".." in name:
                raise BlockedAddress(f"malformed host {host!r}", url=text)
            # with an allowed *network*, a name may still be admitted once it resolves
            if (self.enabled and self.exclusive and not self._networks
                    and not self.host_allowed_by_name(name)):
                raise BlockedAddress(f"host {host!r} is not on the allow-list", url=text)
            loopback_name = name in ("localhost", "localhost.localdomain") or name.endswith(
                ".localhost"
            )
            if self.enabled and loopback_name and not self.host_allowed_by_name(name):
                raise BlockedAddress(f"host {host!r} is loopback", url=text)
        if u.user is not None or u.password is not None:
            u = u.with_user(None)  # never forward credentials embedded in a URL
        return u

    def check_addresses(self, host: str, addresses: Iterable[str]) -> None:
        """Refuse ``host`` if ANY address it resolved to is refused (or none came back)."""
        seen = False
        for raw in addresses:
            seen = True
            ip = parse_ip_literal(raw)
            if ip is None or not self.address_allowed(ip, host=host):
                raise BlockedAddress(f"host {host!r} resolves to refused address {raw}")
        if not seen:
            raise BlockedAddress(f"host {host!r} resolved to no address")


class GuardedResolver(AbstractResolver):
    """An aiohttp resolver that vets every address before the connector may use it.

    Args:
        guard: the policy.
        inner: the real resolver (aiohttp's default if ``None``); tests inject a
            fake one mapping names to addresses.
    """

    def __init__(self, guard: UrlGuard, inner: AbstractResolver | None = None) -> None:
        self._guard = guard
        self._inner = inner
        self._owns_inner = inner is None

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        if self._inner is None:
            self._inner = DefaultResolver()
        results = await self._inner.resolve(host, port, family)
        self._guard.check_addresses(host, [r["host"] for r in results])
        return results

    async def close(self) -> None:
        if self._inner is not None and self._owns_inner:
            await self._inner.close()


def static_results(host: str, port: int, addresses: Iterable[str]) -> list[ResolveResult]:
    """Resolve results for fixed addresses (for resolvers that map names themselves)."""
    out: list[ResolveResult] = []
    for a in addresses:
        fam = socket.AF_INET6 if ":" in a else socket.AF_INET
        r: dict[str, Any] = {"hostname": host, "host": a, "port": port, "family": fam,
                             "proto": 0, "flags": socket.AI_NUMERICHOST}
        out.append(r)  # type: ignore[arg-type]
    return out

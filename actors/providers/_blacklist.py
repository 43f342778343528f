"""URL blacklist: wildcard and regex rules, compiled once into one regular expression.

Rules:
    ``*://*.example.com/*``   wildcard over the whole (normalised) URL; ``*``
                              is any run of characters, ``?`` one character,
                              and ``*.`` right after ``://`` also matches the
                              bare domain (``example.com`` itself).
    ``/example\\.(net|org)/``  a regular expression between slashes, searched
                              anywhere in the URL.
    ``example.com``           a bare domain: that site and its subdomains.

Matching is case-insensitive. Everything is compiled at construction (site
rules into a host table, the rest into one expression per kind), so checking a
result compiles nothing and costs about the same whatever the number of rules.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["Blacklist", "BlacklistRuleError"]


class BlacklistRuleError(ValueError):
    """A blacklist rule is not a valid wildcard or regular expression."""


_BARE_DOMAIN = re.compile(r"^[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?\.[a-z]{2,}$", re.IGNORECASE)


_DOMAIN_RULE = re.compile(
    r"^(?P<scheme>\*|https?)://(?P<sub>\*\.)?(?P<host>[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?)/\*$",
    re.IGNORECASE,
)


def _wildcard(rule: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(rule):
        if rule.startswith("://*.", i):
            out.append(r"://(?:[^/]*\.)?")
            i += 5
            continue
        ch = rule[i]
        if ch == "*":
            out.append(".*")
        elif ch == "?":
            out.append(".")
        else:
            out.append(re.escape(ch))
        i += 1
    out.append(r"\Z")
    return "".join(out)


class Blacklist:
    """A compiled set of URL rules.

    Site rules (``*://*.site.com/*``, ``https://site.com/*``, ``site.com``) go
    into a host table checked label by label, so thousands of them cost a few
    dictionary lookups per URL; other wildcards become one anchored expression
    and regex rules one searched expression, each compiled once here.

    Args:
        rules: wildcard, bare-domain and ``/regex/`` rules (blank ones ignored).

    Raises:
        BlacklistRuleError: a rule is malformed (the message names it).
    """

    __slots__ = ("_hosts", "_regex", "_wildcards", "rules")

    def __init__(self, rules: Iterable[str] = ()) -> None:
        self.rules = tuple(r.strip() for r in rules if r and r.strip())
        # host -> [(scheme or "*", include subdomains)]
        self._hosts: dict[str, list[tuple[str, bool]]] = {}
        wildcards: list[tuple[str, str]] = []
        regexes: list[tuple[str, str]] = []
        for rule in self.rules:
            if len(rule) >= 2 and rule.startswith("/") and rule.endswith("/"):
                regexes.append((rule, rule[1:-1]))
                continue
            if _BARE_DOMAIN.match(rule):
                self._hosts.setdefault(rule.lower(), []).append(("*", True))
                continue
            site = _DOMAIN_RULE.match(rule)
            if site is not None:
                self._hosts.setdefault(site["host"].lower(), []).append(
                    (site["scheme"].lower(), site["sub"] is not None))
                continue
            if "://" not in rule and not rule.startswith("*"):
                raise BlacklistRuleError(
                    f"blacklist rule {rule!r}: use a wildcard over the URL "
                    "(`*://*.site.com/*`), a bare domain, or a /regex/")
            wildcards.append((rule, _wildcard(rule)))
        self._wildcards = self._combine(wildcards)
        self._regex = self._combine(regexes)

    @staticmethod
    def _combine(parts: list[tuple[str, str]]) -> re.Pattern[str] | None:
        if not parts:
            return None
        combined = "|".join(f"(?:{p})" for _, p in parts)
        try:
            return re.compile(combined, re.IGNORECASE)
        except re.error as exc:
            # Error path only: compile rules one by one to name the bad one.
            for rule, part in parts:
                try:
                    re.compile(part)
                except re.error as one:
                    raise BlacklistRuleError(
                        f"blacklist rule {rule!r} is not a valid regular expression: {one}"
                    ) from exc
            raise BlacklistRuleError(
                f"blacklist rules do not combine into one expression: {exc}") from exc

    def __len__(self) -> int:
        return len(self.rules)

    def __bool__(self) -> bool:
        return bool(self.rules)

    def blocks(self, url: str) -> bool:
        """Whether ``url`` (normalise it first) matches any rule."""
        if self._hosts and self._blocks_host(url):
            return True
        if self._wildcards is not None and self._wildcards.match(url) is not None:
            return True
        return self._regex is not None and self._regex.search(url) is not None

    def _blocks_host(self, url: str) -> bool:
        scheme, sep, rest = url.partition("://")
        if not sep:
            return False
        scheme = scheme.lower()
        host = rest.split("/", 1)[0].rsplit("@", 1)[-1]
        host = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        host = host.lower().rstrip(".")
        exact = True
        while host:
            for rule_scheme, subdomains in self._hosts.get(host, ()):
                if (exact or subdomains) and rule_scheme in ("*", scheme):
                    return True
            host = host.partition(".")[2]
            exact = False
        return False

    def filter(self, urls: Iterable[str]) -> list[str]:
        """The URLs no rule blocks, in order."""
        return [u for u in urls if not self.blocks(u)]

"""Source credibility: a weight per collection and per URL domain (default 1.0).

Official documentation, government, academic and standards sites are primary
sources and weigh more; content farms and SEO aggregators, which rewrite other
pages to rank for queries, weigh less. The reranker adds a small bounded term
for it, conflict resolution prefers the heavier side, and citations show it.

Domain patterns are hosts: a bare domain (``docs.python.org``) matches itself
and its subdomains; a pattern with ``*``/``?`` (``*.gov``) is a glob on the
host. When several match, the most specific one (most literal characters)
wins. A local chunk (``source`` ``local:<collection>``) takes its collection's
weight when one is configured, else its URL's domain weight.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Mapping
from urllib.parse import urlsplit

from streams import EvidenceChunk

__all__ = ["DEFAULT_COLLECTION_WEIGHTS", "DEFAULT_DOMAIN_WEIGHTS", "Credibility"]

_HOST_CACHE = 4096
MIN_WEIGHT = 0.1
MAX_WEIGHT = 10.0

DEFAULT_DOMAIN_WEIGHTS: Mapping[str, float] = {
    # Government, intergovernmental and academic sites: primary sources.
    "*.gov": 1.3,
    "*.gov.uk": 1.3,
    "*.gc.ca": 1.3,
    "*.gov.au": 1.3,
    "*.europa.eu": 1.3,
    "*.int": 1.3,
    "*.mil": 1.2,
    "*.edu": 1.2,
    "*.ac.uk": 1.2,
    # Standards bodies and official language / platform documentation.
    "rfc-editor.org": 1.5,
    "datatracker.ietf.org": 1.5,
    "w3.org": 1.4,
    "docs.python.org": 1.5,
    "peps.python.org": 1.5,
    "developer.mozilla.org": 1.4,
    "learn.microsoft.com": 1.3,
    "docs.oracle.com": 1.3,
    "doc.rust-lang.org": 1.4,
    "go.dev": 1.4,
    "*.readthedocs.io": 1.2,
    # Scholarly records.
    "doi.org": 1.3,
    "arxiv.org": 1.2,
    # An edited reference work: a little above an unknown site.
    "*.wikipedia.org": 1.1,
    # Content farms (the sites the 2011 "Panda" ranking change was reported to
    # target) and aggregators that republish other pages.
    "ehow.com": 0.5,
    "answers.com": 0.5,
    "ezinearticles.com": 0.5,
    "hubpages.com": 0.5,
    "buzzle.com": 0.5,
    "wisegeek.com": 0.5,
    "reference.com": 0.5,
    "ask.com": 0.5,
    "*.pinterest.com": 0.5,
    "answers.yahoo.com": 0.6,
}
"""Built-in domain weights (a tenant's ``[credibility]`` table overrides them)."""

DEFAULT_COLLECTION_WEIGHTS: Mapping[str, float] = {}
"""Built-in collection weights: none (a collection's URLs decide, e.g. docs.python.org)."""


def _check(kind: str, table: Mapping[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in table.items():
        name = str(key).strip().lower()
        if not name:
            raise ValueError(f"empty {kind} name in the credibility table")
        weight = float(value)
        if not math.isfinite(weight) or not MIN_WEIGHT <= weight <= MAX_WEIGHT:
            raise ValueError(
                f"credibility of {kind} {key!r} must be in [{MIN_WEIGHT}, {MAX_WEIGHT}], "
                f"got {value!r}"
            )
        out[name] = weight
    return out


def _literal_chars(pattern: str) -> int:
    return sum(1 for ch in pattern if ch not in "*?[]")


class Credibility:
    """Weights of sources by collection name and URL domain; 1.0 for anything unlisted.

    Immutable: :meth:`merged` returns a new table. ``Credibility()`` is all 1.0
    (no effect anywhere); :meth:`defaults` is the built-in table.

    Raises:
        ValueError: a weight outside ``[0.1, 10]`` or an empty name.
    """

    __slots__ = ("_collections", "_domains", "_hosts", "_order")

    def __init__(
        self,
        domains: Mapping[str, float] | None = None,
        collections: Mapping[str, float] | None = None,
    ) -> None:
        self._domains = _check("domain", domains or {})
        self._collections = _check("collection", collections or {})
        # Most specific first, so the first match wins.
        self._order = sorted(self._domains, key=lambda p: (-_literal_chars(p), p))
        # host -> weight, filled on lookup: the reranker asks for every candidate of every
        # search, and most candidates of a run share a few hosts.
        self._hosts: dict[str, float | None] = {}

    @classmethod
    def defaults(cls) -> Credibility:
        """The built-in table (see :data:`DEFAULT_DOMAIN_WEIGHTS`)."""
        return cls(DEFAULT_DOMAIN_WEIGHTS, DEFAULT_COLLECTION_WEIGHTS)

    def merged(
        self,
        domains: Mapping[str, float] | None = None,
        collections: Mapping[str, float] | None = None,
    ) -> Credibility:
        """This table with ``domains`` / ``collections`` entries added or overriding."""
        return Credibility({**self._domains, **_check("domain", domains or {})},
                           {**self._collections, **_check("collection", collections or {})})

    @property
    def neutral(self) -> bool:
        """True when every weight is 1.0 (the table changes nothing)."""
        return all(w == 1.0 for w in (*self._domains.values(), *self._collections.values()))

    def for_domain(self, host: str) -> float | None:
        """The weight of a host (``None`` when no pattern matches)."""
        host = host.strip().lower().rstrip(".")
        if not host:
            return None
        if host not in self._hosts:
            if len(self._hosts) >= _HOST_CACHE:
                self._hosts.clear()  # bounded: a long-lived server sees many hosts
            self._hosts[host] = self._match(host)
        return self._hosts[host]

    def _match(self, host: str) -> float | None:
        for pattern in self._order:
            if any(ch in pattern for ch in "*?["):
                if fnmatch.fnmatchcase(host, pattern):
                    return self._domains[pattern]
            elif host == pattern or host.endswith("." + pattern):
                return self._domains[pattern]
        return None

    def for_url(self, url: str) -> float | None:
        """The weight of a URL's host (``None`` when no pattern matches or no host)."""
        if not url:
            return None
        try:
            host = urlsplit(url).hostname or ""
        except ValueError:
            return None
        return self.for_domain(host)

    def for_collection(self, name: str) -> float | None:
        """The weight of a collection (``None`` when not listed)."""
        return self._collections.get(name.strip().lower())

    def weight(self, chunk: EvidenceChunk) -> float:
        """A chunk's weight: its collection's, else its URL domain's, else 1.0."""
        source = chunk.source
        if source.startswith("local:"):
            w = self.for_collection(source[len("local:"):])
            if w is not None:
                return w
        w = self.for_url(chunk.url)
        return 1.0 if w is None else w

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Credibility):
            return NotImplemented
        return self._domains == other._domains and self._collections == other._collections

    def __hash__(self) -> int:
        return hash((frozenset(self._domains.items()), frozenset(self._collections.items())))

    def __repr__(self) -> str:
        return (f"Credibility(domains={len(self._domains)} entries, "
                f"collections={self._collections!r})")

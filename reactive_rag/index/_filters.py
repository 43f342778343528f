"""Metadata filters, compiled to a boolean mask over chunks before any top-k."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from actors.providers import language_code, site_matches
from streams import SearchFilters

__all__ = ["DocColumns", "SearchFilter", "date_ordinal"]

_NO_DATE = -1


def date_ordinal(value: str | _dt.date | None) -> int:
    """Days since 0001-01-01 for an ISO date/timestamp (its date part); -1 when absent.

    Raises:
        ValueError: ``value`` is not an ISO date.
    """
    if value is None or value == "":
        return _NO_DATE
    if isinstance(value, _dt.datetime):
        return value.date().toordinal()
    if isinstance(value, _dt.date):
        return value.toordinal()
    return _dt.date.fromisoformat(value[:10]).toordinal()


@dataclass(frozen=True, slots=True)
class DocColumns:
    """A collection's per-document metadata as arrays: what a filter is evaluated on.

    Hosts and languages are coded like document types: ``hosts[i]`` indexes
    ``host_names`` ("" for a document without an http(s) URL), ``languages[i]``
    indexes ``language_names`` ("" for a document without a language).
    """

    types: npt.NDArray[np.int32]
    type_index: Mapping[str, int]
    dates: npt.NDArray[np.int64]
    tags: Mapping[str, npt.NDArray[np.int64]]
    index: Mapping[str, int]
    hosts: npt.NDArray[np.int32]
    host_names: Sequence[str]
    languages: npt.NDArray[np.int32]
    language_names: Sequence[str]

    @property
    def has_languages(self) -> bool:
        """Whether any document says what language it is in."""
        return any(self.language_names)


@dataclass(frozen=True, slots=True)
class SearchFilter:
    """Which chunks a search may return; ``None``/empty means "no constraint".

    Attributes:
        doc_types: Allowed document types (e.g. ``("md", "html")``).
        date_from: Inclusive lower bound (documents without a date are excluded
            as soon as a bound is set).
        date_to: Inclusive upper bound.
        tags: A document matches if it carries any of these tags.
        collections: Allowed collection names (checked by multi-collection callers).
        doc_ids: Allowed document ids.
        sites: Only documents whose http(s) URL's host is one of these or a
            subdomain (``corpus://`` and ``file://`` documents match no site).
        exclude_sites: Never documents on these hosts (or their subdomains).
        languages: Only documents whose ``language`` metadata is one of these
            (primary subtags compared). A collection in which no document has
            a language is not narrowed by it, rather than emptied: the caller
            sees unlabelled results and can say the filter was not applied.
        all_of: Further filters that must hold too (how a provider's own
            filter and a request's combine without losing either).
    """

    doc_types: Sequence[str] | None = None
    date_from: str | _dt.date | None = None
    date_to: str | _dt.date | None = None
    tags: Sequence[str] | None = None
    collections: Sequence[str] | None = None
    doc_ids: Sequence[str] | None = None
    sites: Sequence[str] | None = None
    exclude_sites: Sequence[str] | None = None
    languages: Sequence[str] | None = None
    all_of: tuple[SearchFilter, ...] = ()

    def __post_init__(self) -> None:
        # Fail on a malformed date when the filter is made, not mid-search.
        date_ordinal(self.date_from)
        date_ordinal(self.date_to)

    @classmethod
    def from_request(cls, filters: SearchFilters) -> SearchFilter:
        """The index's form of a search request's filters (dates are already ISO)."""
        return cls(
            doc_types=filters.doc_types or None, date_from=filters.date_from,
            date_to=filters.date_to, sites=filters.sites or None,
            exclude_sites=filters.exclude_sites or None,
            languages=(filters.language,) if filters.language else None,
        )

    def __and__(self, other: SearchFilter) -> SearchFilter:
        """A filter that holds where both hold."""
        if other.is_empty and not other.collections:
            return self
        if self.is_empty and not self.collections:
            return other
        return SearchFilter(all_of=(self, other))

    @property
    def is_empty(self) -> bool:
        """True when the filter restricts nothing within one collection."""
        return not (self.doc_types or self.tags or self.doc_ids or self.sites
                    or self.exclude_sites or self.languages
                    or self.date_from is not None or self.date_to is not None
                    or any(not f.is_empty for f in self.all_of))

    def allows_collection(self, name: str) -> bool:
        """Whether chunks of collection ``name`` may be returned."""
        return ((not self.collections or name in self.collections)
                and all(f.allows_collection(name) for f in self.all_of))

    def mask(self, cols: DocColumns) -> npt.NDArray[np.bool_]:
        """Per-document mask over ``cols`` (vectorised; unknown values match nothing)."""
        n = cols.dates.shape[0]
        mask = np.ones(n, dtype=bool)
        if self.doc_types:
            codes = [cols.type_index[t] for t in self.doc_types if t in cols.type_index]
            mask &= np.isin(cols.types, np.asarray(codes, dtype=np.int32))
        lo = date_ordinal(self.date_from)
        hi = date_ordinal(self.date_to)
        if self.date_from is not None:
            mask &= (cols.dates != _NO_DATE) & (cols.dates >= lo)
        if self.date_to is not None:
            mask &= (cols.dates != _NO_DATE) & (cols.dates <= hi)
        if self.tags:
            tagged = np.zeros(n, dtype=bool)
            for tag in self.tags:
                rows = cols.tags.get(tag)
                if rows is not None:
                    tagged[rows] = True
            mask &= tagged
        if self.doc_ids:
            wanted = np.zeros(n, dtype=bool)
            for doc_id in self.doc_ids:
                row = cols.index.get(doc_id)
                if row is not None:
                    wanted[row] = True
            mask &= wanted
        if self.sites:
            mask &= _coded(cols.hosts, cols.host_names,
                           lambda h: site_matches(h, self.sites or ()))
        if self.exclude_sites:
            mask &= ~_coded(cols.hosts, cols.host_names,
                            lambda h: site_matches(h, self.exclude_sites or ()))
        if self.languages and cols.has_languages:
            wanted_langs = {language_code(x) for x in self.languages}
            mask &= _coded(cols.languages, cols.language_names,
                           lambda lang: bool(lang) and lang in wanted_langs)
        for inner in self.all_of:
            mask &= inner.mask(cols)
        return mask


def _coded(codes: npt.NDArray[np.int32], names: Sequence[str],
           test: Callable[[str], bool]) -> npt.NDArray[np.bool_]:
    """Per-document booleans from a test run once per distinct coded value."""
    hits = np.asarray([test(name) for name in names], dtype=bool)
    if hits.size == 0:
        return np.zeros(codes.shape[0], dtype=bool)
    out: npt.NDArray[np.bool_] = hits[codes]
    return out

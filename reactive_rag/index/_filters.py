"""Metadata filters, compiled to a boolean mask over chunks before any top-k."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["SearchFilter", "date_ordinal"]

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
    """

    doc_types: Sequence[str] | None = None
    date_from: str | _dt.date | None = None
    date_to: str | _dt.date | None = None
    tags: Sequence[str] | None = None
    collections: Sequence[str] | None = None
    doc_ids: Sequence[str] | None = None

    def __post_init__(self) -> None:
        # Fail on a malformed date when the filter is made, not mid-search.
        date_ordinal(self.date_from)
        date_ordinal(self.date_to)

    @property
    def is_empty(self) -> bool:
        """True when the filter restricts nothing within one collection."""
        return not (self.doc_types or self.tags or self.doc_ids
                    or self.date_from is not None or self.date_to is not None)

    def allows_collection(self, name: str) -> bool:
        """Whether chunks of collection ``name`` may be returned."""
        return not self.collections or name in self.collections

    def doc_mask(
        self,
        *,
        doc_types: npt.NDArray[np.int32],
        doc_dates: npt.NDArray[np.int64],
        doc_tags: dict[str, npt.NDArray[np.int64]],
        doc_index: dict[str, int],
        type_codes: Sequence[int] | None = None,
    ) -> npt.NDArray[np.bool_]:
        """Per-document mask from per-document metadata arrays (vectorised).

        ``doc_types`` holds an integer code per document; ``type_codes`` are the
        codes of the wanted types (unknown types simply match nothing).
        """
        n = doc_dates.shape[0]
        mask = np.ones(n, dtype=bool)
        if self.doc_types:
            mask &= np.isin(doc_types, np.asarray(list(type_codes or []), dtype=np.int32))
        lo = date_ordinal(self.date_from)
        hi = date_ordinal(self.date_to)
        if self.date_from is not None:
            mask &= (doc_dates != _NO_DATE) & (doc_dates >= lo)
        if self.date_to is not None:
            mask &= (doc_dates != _NO_DATE) & (doc_dates <= hi)
        if self.tags:
            tagged = np.zeros(n, dtype=bool)
            for tag in self.tags:
                rows = doc_tags.get(tag)
                if rows is not None:
                    tagged[rows] = True
            mask &= tagged
        if self.doc_ids:
            wanted = np.zeros(n, dtype=bool)
            for doc_id in self.doc_ids:
                row = doc_index.get(doc_id)
                if row is not None:
                    wanted[row] = True
            mask &= wanted
        return mask

"""Search filters as providers see them: capability names, unapplied reports, shared checks.

A provider that declares ``supported_filters`` takes ``filters=`` in ``search``
and says, through ``unapplied(filters)``, which requested filters it could not
apply and why (see :class:`~._protocol.FilteringProvider`). The host and date
checks here are shared by the searcher's post-filter and the local corpus, so
"only these sites" means the same thing everywhere.
"""

from __future__ import annotations

import datetime as _dt
import email.utils
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from actors.text import url_host as text_url_host
from streams import SearchFilters

__all__ = [
    "FILTER_NAMES",
    "NO_FILTERS",
    "Clock",
    "FilterPlan",
    "TimeWindow",
    "UnappliedFilter",
    "covering_window",
    "date_bounds",
    "hit_date",
    "language_code",
    "relative_date",
    "site_host",
    "site_matches",
    "supported_filters",
    "unapplied_filters",
    "url_host",
    "utc_today",
]

FILTER_NAMES: frozenset[str] = frozenset(
    {"date", "doc_types", "sites", "exclude_sites", "language"})
"""Every filter name a provider can declare (as in ``SearchFilters.names()``)."""

Clock = Callable[[], _dt.date]
"""Today's date; injected so relative windows ("past week") are testable."""

TimeWindow = Literal["day", "week", "month", "year"]


def utc_today() -> _dt.date:
    """Today in UTC, the default :data:`Clock` (search APIs count days in UTC)."""
    return _dt.datetime.now(_dt.UTC).date()


@dataclass(frozen=True, slots=True)
class UnappliedFilter:
    """One requested filter a provider did not apply, and why (told to the planner)."""

    filter: str
    reason: str

    def describe(self, provider: str) -> str:
        """``"provider: filter (why)"``, the form ``SearchCompleted.unapplied`` carries."""
        return f"{provider}: {self.filter} ({self.reason})"


@dataclass(frozen=True, slots=True)
class FilterPlan:
    """What a web provider sends for some filters, and what it cannot send.

    ``params`` are the API's own parameter names and values (query parameters,
    form fields or JSON body keys; a tuple is a JSON list).
    """

    params: dict[str, str | tuple[str, ...]]
    unapplied: tuple[UnappliedFilter, ...] = ()


NO_FILTERS = FilterPlan(params={})


def supported_filters(provider: object) -> frozenset[str] | None:
    """The filter names ``provider`` declares, or ``None`` if it takes no ``filters=``."""
    value = getattr(provider, "supported_filters", None)
    return value if isinstance(value, frozenset) else None


def unapplied_filters(provider: object, filters: SearchFilters | None
                      ) -> tuple[UnappliedFilter, ...]:
    """What ``provider`` does not apply of ``filters``, never raising.

    A provider without ``supported_filters`` applies nothing; one without an
    ``unapplied`` method applies exactly the names it declares; a broken
    ``unapplied`` falls back to the declaration.
    """
    if filters is None or filters.is_empty:
        return ()
    supported = supported_filters(provider)
    if supported is None:
        return tuple(UnappliedFilter(n, "the provider takes no filters") for n in filters.names())
    fallback = tuple(UnappliedFilter(n, "not supported by the provider")
                     for n in filters.names() if n not in supported)
    method = getattr(provider, "unapplied", None)
    if not callable(method):
        return fallback
    try:
        found = tuple(method(filters))
    except Exception:  # a third party's bug must not fail the search
        return fallback
    if not all(isinstance(u, UnappliedFilter) for u in found):
        return fallback
    return found


# --- hosts -------------------------------------------------------------------------------


def _bare(host: str) -> str:
    host = host.strip().lower().rstrip(".")
    return host.removeprefix("www.")


def url_host(url: str) -> str | None:
    """The http(s) URL's host without ``www.``; ``None`` for other schemes (corpus://, file://)."""
    if not url.strip().lower().startswith(("http://", "https://")):
        return None
    return text_url_host(url) or None


def site_host(site: str) -> str:
    """The host of a site as a user may write it (``example.com``, ``https://www.example.com/x``)."""
    site = site.strip()
    if "://" in site:
        return url_host(site) or ""
    return _bare(site.split("/", 1)[0].split(":", 1)[0])


def site_matches(host: str | None, sites: Iterable[str]) -> bool:
    """Whether ``host`` is one of ``sites`` or a subdomain of one."""
    if not host:
        return False
    for raw in sites:
        site = site_host(raw)
        if site and (host == site or host.endswith("." + site)):
            return True
    return False


# --- dates -------------------------------------------------------------------------------

_TEXT_DATES = ("%B %d, %Y", "%b %d, %Y", "%d %B %Y", "%d %b %Y")


def hit_date(value: str | None) -> _dt.date | None:
    """The date a provider's ``published_at`` names, ``None`` when absent or unreadable.

    Accepts ISO dates/timestamps, RFC 2822 dates and "May 1, 2024"; relative
    ages ("2 days ago") are unreadable on purpose: they depend on when.
    """
    if not value:
        return None
    text = value.strip()
    try:
        return _dt.date.fromisoformat(text[:10])
    except ValueError:
        pass
    for fmt in _TEXT_DATES:
        try:
            return _dt.datetime.strptime(text, fmt).date()
        except ValueError:
            continue
    try:
        return email.utils.parsedate_to_datetime(text).date()
    except (TypeError, ValueError, IndexError):
        return None


def date_bounds(filters: SearchFilters) -> tuple[_dt.date | None, _dt.date | None]:
    """``(date_from, date_to)`` as dates (the validator already made them ISO)."""
    lo = _dt.date.fromisoformat(filters.date_from) if filters.date_from else None
    hi = _dt.date.fromisoformat(filters.date_to) if filters.date_to else None
    return lo, hi


def _months_back(today: _dt.date, months: int) -> _dt.date:
    year, month = divmod(today.year * 12 + today.month - 1 - months, 12)
    month += 1
    for day in range(today.day, 0, -1):
        try:
            return _dt.date(year, month, day)
        except ValueError:
            continue
    raise AssertionError("unreachable")  # pragma: no cover


def covering_window(date_from: _dt.date, today: _dt.date) -> TimeWindow | None:
    """The smallest "past day/week/month/year" that reaches back to all of ``date_from``.

    A window ends now and starts one day/week/month/year before, part-way
    through that day, so it covers ``date_from`` only if ``date_from`` is later.
    ``None``: more than a year back, no window covers it.
    """
    starts: tuple[tuple[TimeWindow, _dt.date], ...] = (
        ("day", today - _dt.timedelta(days=1)),
        ("week", today - _dt.timedelta(days=7)),
        ("month", _months_back(today, 1)),
        ("year", _months_back(today, 12)),
    )
    for window, start in starts:
        if date_from > start:
            return window
    return None


def relative_date(filters: SearchFilters, today: _dt.date, param: str
                  ) -> tuple[TimeWindow | None, UnappliedFilter | None]:
    """A "past day/week/month/year" parameter for the date filter, and what it leaves out.

    Such a window starts before ``date_from`` and always ends now, so a
    start more than a year back, or an end before today, is not expressible.
    """
    lo, hi = date_bounds(filters)
    window = None
    if lo is not None:
        window = covering_window(lo, today)
        if window is None:
            return None, UnappliedFilter(
                "date", f"{param} reaches back at most a year, not to {lo.isoformat()}")
    if hi is not None and hi < today:
        return window, UnappliedFilter(
            "date", f"{param} cannot end before today, so the end {hi.isoformat()} is not sent")
    return window, None


def language_code(language: str) -> str:
    """The primary subtag of a language tag, lower case (``"en-US"`` -> ``"en"``)."""
    return language.strip().replace("_", "-").split("-", 1)[0].lower()

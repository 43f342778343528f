"""Errors of recorded runs (cassettes).

Hierarchy::

    CassetteError
    ├── CassetteFormatError (ValueError)   the file is missing, unreadable or not a cassette
    └── CassetteMiss (ProviderError)       a replayed run asked for something never recorded

A miss is a :class:`~actors.providers.ProviderError` so that a search miss is
reported by the searcher under its own name, like any provider failure; a page
or chat miss fails its actor with the same name. Either way the run ends with
an event that says ``CassetteMiss``, never a hang or a network call.
"""

from __future__ import annotations

from actors.providers import ProviderError

__all__ = ["CassetteError", "CassetteFormatError", "CassetteMiss"]


class CassetteError(Exception):
    """Root of the cassette errors."""


class CassetteFormatError(CassetteError, ValueError):
    """The cassette file cannot be replayed: missing, unreadable, corrupt or another version."""


class CassetteMiss(CassetteError, ProviderError):
    """A replayed run made a request the cassette has no (more) answers for.

    Attributes:
        kind: ``search``, ``page`` or ``chat``.
        key: the request, in the canonical form answers are looked up by.
    """

    counts_as_failure = False

    def __init__(self, message: str, *, kind: str, key: dict[str, object],
                 provider: str = "") -> None:
        ProviderError.__init__(self, message, provider=provider)
        self.kind = kind
        self.key = key

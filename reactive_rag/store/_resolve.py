"""Resolve the run id a user typed, which may be only its first characters.

Run ids are long (32 hex digits over HTTP); people copy the first few. A prefix
that names exactly one stored run stands for it; an exact id always wins, even
when it is also the prefix of a longer one.
"""

from __future__ import annotations

from ._exceptions import AmbiguousRunId, RunNotFound
from ._protocol import RunStore

__all__ = ["resolve_run_id"]

_CANDIDATES = 10  # shown in the error; more than that is "10+"


async def resolve_run_id(store: RunStore, prefix: str, *, tenant: str | None = None) -> str:
    """The whole id of the one stored run whose id is, or starts with, ``prefix``.

    Raises:
        RunNotFound: no run (of ``tenant``) starts with ``prefix``, or it is empty.
        AmbiguousRunId: several do; ``candidates`` lists them (at most 10).
    """
    if not prefix:
        raise RunNotFound(prefix)
    ids = await store.run_ids_with_prefix(prefix, tenant=tenant, limit=_CANDIDATES)
    if prefix in ids:
        return prefix
    if not ids:
        raise RunNotFound(prefix)
    if len(ids) > 1:
        raise AmbiguousRunId(prefix, tuple(ids))
    return ids[0]

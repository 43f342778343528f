"""Who created a collection over the API: a small file beside its generations.

``ROOT/NAME/.owner.json`` holds ``{"tenant", "embedder", "created"}``. It is
written once with ``O_EXCL`` (two creators of one name: one wins) and removed
when the collection is deleted. A collection without it was made by the
operator (the CLI, the default corpus) and belongs to no tenant. The index's
layout ignores dot-files, so searches and builds never see it.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from reactive_rag.index import validate_name

__all__ = ["OWNER_FILE", "Ownership", "claim", "owner_lookup", "read_owner", "release"]

OWNER_FILE = ".owner.json"


@dataclass(frozen=True, slots=True)
class Ownership:
    """A collection created over the API: by whom, and the embedder asked for."""

    tenant: str
    embedder: str
    created: float


def _path(root: Path, name: str) -> Path | None:
    try:
        return root / validate_name(name) / OWNER_FILE
    except ValueError:
        return None  # not a collection name at all: nobody owns it


def read_owner(root: Path, name: str) -> Ownership | None:
    """The collection's creator (None: an operator's collection, or no such name)."""
    path = _path(root, name)
    if path is None:
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Ownership(str(data["tenant"]), str(data["embedder"]), float(data["created"]))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        # unreadable: treat as owned by nobody anyone may name, so nobody may touch it
        return Ownership("", "auto", 0.0)


def claim(root: Path, name: str, tenant: str, embedder: str) -> Ownership | None:
    """Record ``tenant`` as the creator of ``name``; None if someone already did.

    Raises:
        ValueError: an invalid collection name.
    """
    folder = root / validate_name(name)
    folder.mkdir(parents=True, exist_ok=True)
    owner = Ownership(tenant, embedder, time.time())
    try:
        fd = os.open(folder / OWNER_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return None
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump({"tenant": tenant, "embedder": embedder, "created": owner.created}, fh)
        fh.flush()
        os.fsync(fh.fileno())
    return owner


def release(root: Path, name: str) -> None:
    """Forget the creator of ``name`` (its name is free again)."""
    path = _path(root, name)
    if path is not None:
        path.unlink(missing_ok=True)


def owner_lookup(root: Path) -> Callable[[str], str | None]:
    """``owner_of(name)``: the tenant that created collection ``name`` under ``root``."""

    def owner_of(name: str) -> str | None:
        owner = read_owner(root, name)
        return owner.tenant if owner is not None else None

    return owner_of

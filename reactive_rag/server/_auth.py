"""Bearer-token authentication: which tenant is calling, and what it may search.

Tokens are kept only as SHA-256 digests; the presented token is hashed and
compared with every configured digest in constant time (``hmac.compare_digest``
over all of them, never a dict lookup that returns early), so response timing
does not tell how close a guess was.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from aiohttp import web

from ._config import TenantConfig
from ._exceptions import Problem
from ._problems import PROBLEM_CODES

__all__ = ["Authenticator", "OwnerOf", "Tenant", "hash_token"]

OwnerOf = Callable[[str], str | None]
"""The tenant that created a collection over the API (None: an operator's collection)."""


def _no_owners(_collection: str) -> str | None:
    return None


def hash_token(token: str) -> str:
    """The SHA-256 hex digest of a token: what goes into the config file."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class Tenant:
    """The caller of a request."""

    name: str
    config: TenantConfig
    owner_of: OwnerOf = _no_owners

    def allows(self, collection: str) -> bool:
        """True if this tenant may search ``collection``.

        Another tenant's collection only when the config names it (``"*"`` does
        not reach it): shared read-only. Its own collections always.
        """
        owner = self.owner_of(collection)
        if owner is None:
            return self.config.allows(collection)
        return owner == self.name or collection in self.config.collections


class Authenticator:
    """Maps a request to its tenant.

    Args:
        tenants: the tenants table.
        open_mode: no authentication; every request is the only tenant.
        owner_of: who created each collection over the API (default: nobody).
    """

    def __init__(self, tenants: Mapping[str, TenantConfig], *, open_mode: bool,
                 owner_of: OwnerOf = _no_owners) -> None:
        self._tenants = {name: Tenant(name, cfg, owner_of) for name, cfg in tenants.items()}
        self._open = open_mode
        self._digests = [(bytes.fromhex(d), name) for name, cfg in tenants.items()
                         for d in cfg.token_sha256]
        if open_mode and len(self._tenants) != 1:
            raise ValueError("open mode needs exactly one tenant")

    def tenant(self, name: str) -> Tenant:
        """A tenant by name (KeyError if unknown)."""
        return self._tenants[name]

    def authenticate(self, request: web.Request) -> Tenant:
        """The request's tenant.

        The token comes from ``Authorization: Bearer <token>``, or, because
        browsers cannot set headers on ``EventSource``/``WebSocket``, from an
        ``access_token`` query parameter.

        Raises:
            Problem: 401 ``unauthorized`` (the same for a missing, malformed or wrong token).
        """
        if self._open:
            return next(iter(self._tenants.values()))
        token = _bearer(request)
        if token is not None:
            presented = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
            found: str | None = None
            for digest, name in self._digests:  # no early exit: constant time in the table size
                if hmac.compare_digest(presented, digest) and found is None:
                    found = name
            if found is not None:
                return self._tenants[found]
        raise Problem(401, "unauthorized", PROBLEM_CODES["unauthorized"],
                      "send `Authorization: Bearer <token>`",
                      headers={"WWW-Authenticate": 'Bearer realm="reactive-rag"'})


def _bearer(request: web.Request) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    query = request.query.get("access_token")
    return query or None

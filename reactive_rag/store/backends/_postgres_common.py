"""What the PostgreSQL store's modules share: its URL, schema names, and error translation."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import parse_qsl

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict

from .._exceptions import StoreError, StoreUnavailable

__all__ = ["POSTGRES_SCHEMES", "PostgresTarget", "parse_postgres_url", "redact_url", "translated"]

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
"""URL prefixes that name a PostgreSQL run store."""

DEFAULT_SCHEMA = "reactive_rag"
_SCHEMA = re.compile(r"^[a-z_][a-z0-9_]{0,47}$")
_PASSWORD = re.compile(r"(?<=://)([^:/@?#]*):[^@/?#]*@")
_SECRET = re.compile(r"://[^:/@?#]*:([^@/?#]*)@")


def redact_url(url: str) -> str:
    """``url`` with its password (if any) replaced by ``***``: safe to log or show."""
    return _PASSWORD.sub(r"\1:***@", url)


@dataclass(frozen=True, slots=True)
class PostgresTarget:
    """A parsed store URL: what libpq connects to, and the schema the store's tables live in."""

    conninfo: str
    schema: str


def check_schema(schema: str) -> str:
    """``schema`` if it is a plain lower-case SQL name (it is spliced into statements)."""
    if not isinstance(schema, str) or _SCHEMA.fullmatch(schema) is None:
        raise ValueError(f"a PostgreSQL store schema is 1 to 48 of a-z 0-9 _ (not starting "
                         f"with a digit), not {schema!r}")
    return schema


def parse_postgres_url(url: str, schema: str | None = None) -> PostgresTarget:
    """Split a ``postgresql://`` URL into libpq's part and the store's ``?schema=``.

    Any libpq parameter may follow ``?`` (``sslmode``, ``connect_timeout``...);
    ``schema`` is ours (default ``reactive_rag``), and an explicit ``schema``
    argument wins over it.

    Raises:
        ValueError: not a PostgreSQL URL, or one libpq cannot parse; the message
            never repeats the password.
    """
    if not isinstance(url, str) or not url.startswith(POSTGRES_SCHEMES):
        raise ValueError(f"not a PostgreSQL URL (postgresql://...): {redact_url(str(url))!r}")
    base, _, query = url.partition("?")
    query, hash_mark, fragment = query.partition("#")
    # Ours is taken out as written; the rest goes to libpq untouched.
    ours = [item for item in query.split("&") if item.split("=", 1)[0] == "schema"]
    rest = [item for item in query.split("&") if item and item not in ours]
    from_url = [value for _key, value in parse_qsl("&".join(ours), keep_blank_values=True)]
    conninfo = base + ("?" + "&".join(rest) if rest else "") + hash_mark + fragment
    try:
        params = conninfo_to_dict(conninfo)
    except psycopg.Error as exc:
        reason = str(exc).splitlines()[0].replace(conninfo, redact_url(conninfo))
        secret = _SECRET.search(url)
        if secret is not None and secret.group(1):  # libpq may quote a token of it
            reason = reason.replace(secret.group(1), "***")
        raise ValueError(f"bad PostgreSQL URL {redact_url(url)!r}: {reason}") from None
    port = str(params.get("port", ""))
    if port and not all(part.isdigit() for part in port.split(",")):
        raise ValueError(f"bad PostgreSQL URL {redact_url(url)!r}: port {port!r} is not a number")
    chosen = schema if schema is not None else (from_url[-1] if from_url else DEFAULT_SCHEMA)
    return PostgresTarget(conninfo=conninfo, schema=check_schema(chosen))


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """psycopg's errors as the store's: ``StoreUnavailable`` when down or refusing writes.

    Connection failures, a server shutting down, a full disk, a pool with no
    connection to give, a read-only server (a standby after a failover) are all
    retryable; any other database error is a plain ``StoreError``.
    """
    try:
        yield
    except (psycopg.OperationalError, psycopg.InterfaceError,
            pg_errors.ReadOnlySqlTransaction) as exc:
        raise StoreUnavailable(f"PostgreSQL: {_first_line(exc)}") from exc
    except psycopg.Error as exc:
        raise StoreError(f"PostgreSQL: {_first_line(exc)}") from exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__

"""The server-grade run stores: Redis and PostgreSQL, behind the same :class:`RunStore` protocol.

Each is imported on first use, so the ``redis`` package, and ``psycopg`` (the ``postgres``
extra), are only needed by those who use them.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._postgres import PostgresRunStore
    from ._redis import RedisRunStore

__all__ = ["PostgresRunStore", "RedisRunStore"]


def __getattr__(name: str) -> Any:
    if name == "PostgresRunStore":
        from ._postgres import PostgresRunStore

        return PostgresRunStore
    if name == "RedisRunStore":
        from ._redis import RedisRunStore

        return RedisRunStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""What the Redis store's modules share: error translation and reading hash fields."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .._exceptions import StoreError, StoreUnavailable

__all__ = ["text_field", "translated"]


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """Redis errors as the store's: ``StoreUnavailable`` when down, else ``StoreError``."""
    try:
        yield
    except (RedisConnectionError, RedisTimeoutError) as exc:
        raise StoreUnavailable(f"Redis: {exc}") from exc
    except RedisError as exc:
        raise StoreError(f"Redis: {exc}") from exc


def text_field(fields: dict[bytes, bytes], name: str) -> str:
    """A hash field (present) as text."""
    return fields[name.encode()].decode()

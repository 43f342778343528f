"""Cancel requests in the Redis store (:class:`~reactive_rag.store.CancelRequests`).

:class:`RedisCancelTable` is a mixin of :class:`~reactive_rag.store.RedisRunStore`.
Key ``cancels:<owner>`` is a hash: run id -> reason, the cancels recorded for
that owner's runs. One script reads the run's hash and records the request only
while the run is ``running``; another takes (reads and deletes) an owner's hash.
The hash expires ``EXPIRE_MS`` after its last request, so the requests left for
an owner that is gone do not stay.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._cancel_requests import CancelRequest
from .._exceptions import RunNotFound
from ._redis_common import translated

__all__ = ["RedisCancelTable"]

EXPIRE_MS = 10 * 60 * 1000
"""How long an owner's untaken requests stay (its runs were interrupted long before)."""

# KEYS: run hash. ARGV: prefix, run id, tenant ('' = any), reason, expiry ms.
# Returns 1 recorded, 0 not running, -1 no run (or another tenant's).
_REQUEST = """
local f = redis.call('HMGET', KEYS[1], 'tenant', 'status', 'owner')
if not f[1] then return -1 end
if ARGV[3] ~= '' and f[1] ~= ARGV[3] then return -1 end
if f[2] ~= 'running' then return 0 end
local key = ARGV[1] .. 'cancels:' .. f[3]
redis.call('HSET', key, ARGV[2], ARGV[4])
redis.call('PEXPIRE', key, ARGV[5])
return 1
"""

# KEYS: the owner's cancels hash. Returns its fields and values, deleted.
_TAKE = """
local all = redis.call('HGETALL', KEYS[1])
if #all > 0 then redis.call('DEL', KEYS[1]) end
return all
"""


class RedisCancelTable:
    """Records and hands out cancel requests (mixed into ``RedisRunStore``)."""

    _request_cancel: Any
    _take_cancels: Any

    if TYPE_CHECKING:  # provided by RedisRunStore / StoreBase
        prefix: str
        owner: str
        read_only: bool

        def _writable(self) -> None: ...

        def _check_open(self) -> None: ...

        def _run_key(self, run_id: str) -> str: ...

    def _register_cancel_scripts(self, client: Any) -> None:
        self._request_cancel = client.register_script(_REQUEST)
        self._take_cancels = client.register_script(_TAKE)

    async def request_cancel(self, run_id: str, tenant: str | None, reason: str) -> bool:
        """Record a cancel for the run's owner (one script); False unless running."""
        self._writable()
        self._check_open()
        with translated():
            code = await self._request_cancel(
                keys=[self._run_key(run_id)],
                args=[self.prefix, run_id, tenant or "", reason, EXPIRE_MS])
        if int(code) == -1:
            raise RunNotFound(run_id)
        return int(code) == 1

    async def take_cancel_requests(self) -> list[CancelRequest]:
        """Remove and return this owner's requests (one script)."""
        self._check_open()
        if self.read_only:
            return []
        with translated():
            flat = await self._take_cancels(keys=[f"{self.prefix}cancels:{self.owner}"])
        pairs = zip(flat[::2], flat[1::2], strict=True)
        return [CancelRequest(bytes(run).decode(), bytes(why).decode()) for run, why in pairs]

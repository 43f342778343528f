"""Deleting runs from the Redis store (DELETE of one run, and the retention sweep).

:class:`RedisRunDeleter` is a mixin of :class:`~reactive_rag.store.RedisRunStore`.
One script per run removes everything naming it: the ``run:<id>`` hash, the
``ev:<id>`` stream, its cursor in ``tenant:<tenant>`` and (should it linger)
its id in ``running:<owner>``; the script reads the run's status first, so a
``running`` run is never deleted.

The sweep finds candidates in the tenant's sorted set: its members are page
cursors ``<created_us, 16 digits>:<id>``, so those created before the cutoff
are one lexicographic range; the script then checks ``updated_us`` too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._base import PAGE, make_cursor, parse_cursor
from .._exceptions import RunNotFound, RunStillRunning
from ._redis_common import translated

__all__ = ["RedisRunDeleter"]

# KEYS: run hash, event stream. ARGV: prefix, run id, tenant ('' = any), cutoff_us
# ('' = none: delete whatever its age). Returns 1 deleted, 0 changed since the cutoff,
# -1 no run (or another tenant's), -2 running.
_DELETE_RUN = """
local f = redis.call('HMGET', KEYS[1], 'tenant', 'status', 'owner', 'created_us', 'updated_us')
if not f[1] then return -1 end
if ARGV[3] ~= '' and f[1] ~= ARGV[3] then return -1 end
if f[2] == 'running' then return -2 end
if ARGV[4] ~= '' and tonumber(f[5]) >= tonumber(ARGV[4]) then return 0 end
local created = f[4]
local cursor = string.rep('0', 16 - #created) .. created .. ':' .. ARGV[2]
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('ZREM', ARGV[1] .. 'tenant:' .. f[1], cursor)
redis.call('SREM', ARGV[1] .. 'running:' .. f[3], ARGV[2])
return 1
"""


class RedisRunDeleter:
    """Deletes ended runs with everything naming them (mixed into ``RedisRunStore``)."""

    _delete_run: Any

    if TYPE_CHECKING:  # provided by RedisRunStore / StoreBase
        prefix: str

        @property
        def _redis(self) -> Any: ...

        def _writable(self) -> None: ...

        def _run_key(self, run_id: str) -> str: ...

        def _ev_key(self, run_id: str) -> str: ...

    def _register_delete_scripts(self, client: Any) -> None:
        self._delete_run = client.register_script(_DELETE_RUN)

    async def _delete_one(self, run_id: str, tenant: str, cutoff: str) -> int:
        with translated():
            code = await self._delete_run(
                keys=[self._run_key(run_id), self._ev_key(run_id)],
                args=[self.prefix, run_id, tenant, cutoff])
        return int(code)

    async def delete_run(self, run_id: str, tenant: str | None = None) -> None:
        """Delete an ended run and every key naming it (one script)."""
        self._writable()
        code = await self._delete_one(run_id, tenant or "", "")
        if code == -1:
            raise RunNotFound(run_id)
        if code == -2:
            raise RunStillRunning(run_id)

    async def delete_runs_before(self, tenant: str, before_ts: float, *,
                                 limit: int = 100) -> list[str]:
        """Delete up to ``limit`` ended runs of ``tenant`` last changed before ``before_ts``."""
        self._writable()
        if limit < 1:
            raise ValueError("limit must be >= 1")
        cutoff = int(before_ts * 1_000_000)
        top = "(" + make_cursor(cutoff, "")[:-1]  # created_us < cutoff, whatever the id
        low = "-"
        deleted: list[str] = []
        while len(deleted) < limit:
            with translated():
                members = await self._redis.execute_command(
                    "ZRANGE", f"{self.prefix}tenant:{tenant}", low, top, "BYLEX",
                    "LIMIT", 0, PAGE)
            for member in members:
                run_id = parse_cursor(bytes(member).decode())[1]
                code = await self._delete_one(run_id, tenant, str(cutoff))
                if code == -1:  # a cursor left without its run: nothing else names it
                    with translated():
                        await self._redis.zrem(f"{self.prefix}tenant:{tenant}", member)
                elif code == 1:
                    deleted.append(run_id)
                    if len(deleted) == limit:
                        break
            if len(members) < PAGE:
                break
            low = "(" + bytes(members[-1]).decode()
        return deleted

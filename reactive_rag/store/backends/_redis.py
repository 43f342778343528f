"""A server-grade store on Redis Streams (``redis.asyncio``).

Install ``redis`` with ``hiredis`` (``redis[hiredis]``): replaying and
attaching parse many stream entries, and the C parser is several times faster.

Why Redis rather than PostgreSQL: a run's event log *is* a stream, and Redis
Streams give exactly what attach needs: entries keyed by their ``seq``
(entry id ``0-<seq>``, so the server itself refuses a duplicate or an
out-of-order seq), range reads for replay, and ``XREAD BLOCK`` so a reader in
another process follows a live run without polling. Every multi-key change
(append + status, finish, interrupt) is one Lua script, hence atomic. Run it
with AOF on (``appendonly yes``) for durability across a server restart.

Keys (under ``prefix``)::

    run:<id>          hash: tenant, question, mode, status, outcome, owner,
                      created_us, updated_us, last_seq
    ev:<id>           stream: one entry per event, id 0-<seq>, one field d (msgpack)
    tenant:<tenant>   sorted set (lexicographic): one page cursor per run
    running:<owner>   set: ids of that owner's running runs
    cancels:<owner>   hash: run id -> reason, cancels recorded for that owner (see
                      ``_cancels_redis``)
    owners            set: owners that created or reopened runs (swept for expired
                      leases; an owner leaves it once its lease lapsed and it has
                      no running run left)
    lease:<owner>     string: when that owner's lease expires (Unix microseconds,
                      by the writers' clocks); the key's own PX expiry, twice the
                      TTL, only cleans up after owners that are gone
    task:<id>         hash: a background task (see ``_tasks_redis``)
    tasks:unfinished  sorted set by creation time: pending/running task ids
    session:<id>      hash: tenant, data (JSON), ttl_us, created_us, updated_us,
                      expires_us (by the writers' clocks); its own PEXPIRE is the TTL,
                      set again on every use (sliding)
    sessions          sorted set by expires_us: every session id, for the sweep

The scripts build the ``running:<owner>`` key themselves, so this layout is
for a single Redis server (not Redis Cluster). :meth:`RedisRunStore.open` also
finds the owners to sweep by ``SCAN`` over ``running:*``, so that runs written
before leases (and the ``owners`` set) existed, e.g. under owner ``default``,
are recovered too; the periodic sweep reads the ``owners`` set only.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
from collections.abc import Sequence
from typing import Any, cast

import redis.asyncio as aioredis
from pydantic import JsonValue

from streams import DecodeError, Event, Outcome, RunFinished, decode_msgpack, encode_msgpack

from .._base import (
    PAGE,
    StoreBase,
    check_batch,
    make_cursor,
    new_session_args,
    parse_cursor,
    session_data_text,
    session_id_ok,
)
from .._exceptions import (
    RunAlreadyFinished,
    RunExists,
    RunNotFound,
    RunNotResumable,
    RunOwnedElsewhere,
    SeqConflict,
    SessionExists,
    SessionNotFound,
    StoreCorrupt,
    StoreError,
)
from .._protocol import (
    RunMeta,
    RunPage,
    RunRecord,
    RunStatus,
    SessionRecord,
)
from .._sql_rows import INTERRUPTED_REASON
from ._cancels_redis import RedisCancelTable
from ._delete_redis import RedisRunDeleter
from ._redis_common import text_field, translated
from ._tasks_redis import RedisTaskTable

__all__ = ["RedisRunStore"]

_CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'tenant', ARGV[1], 'question', ARGV[2], 'mode', ARGV[3],
    'status', 'running', 'outcome', '', 'owner', ARGV[4], 'created_us', ARGV[5],
    'updated_us', ARGV[5], 'last_seq', 0)
redis.call('ZADD', KEYS[2], 0, ARGV[6])
redis.call('SADD', KEYS[3], ARGV[7])
redis.call('SADD', KEYS[4], ARGV[4])
return 1
"""

# KEYS: run hash, event stream. ARGV: prefix, run id, now_us, final status ('' = none),
# outcome, then (seq, data) pairs. Returns {code, last_seq}:
# 1 appended, 0 nothing new, -1 no run, -2 run closed, -3 seq gap.
_APPEND = """
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return {-1, 0} end
local last = tonumber(redis.call('HGET', KEYS[1], 'last_seq'))
local first = nil
for i = 7, #ARGV, 2 do
  if tonumber(ARGV[i]) > last then first = i; break end
end
if not first then return {0, last} end
if status ~= 'running' then return {-2, last} end
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[6] then return {-4, last} end
if tonumber(ARGV[first]) ~= last + 1 then return {-3, last} end
local seq = ARGV[first]
for i = first, #ARGV, 2 do
  seq = ARGV[i]
  redis.call('XADD', KEYS[2], '0-' .. seq, 'd', ARGV[i + 1])
end
redis.call('HSET', KEYS[1], 'last_seq', seq, 'updated_us', ARGV[3])
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[1], 'status', ARGV[4], 'outcome', ARGV[5])
  local owner = redis.call('HGET', KEYS[1], 'owner')
  redis.call('SREM', ARGV[1] .. 'running:' .. owner, ARGV[2])
end
return {1, tonumber(seq)}
"""

# KEYS: run hash. ARGV: prefix, run id, now_us, outcome. Returns 1, 0 (closed) or -1 (no run).
_FINISH = """
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return -1 end
if status ~= 'running' then return 0 end
redis.call('HSET', KEYS[1], 'status', 'finished', 'outcome', ARGV[4], 'updated_us', ARGV[3])
local owner = redis.call('HGET', KEYS[1], 'owner')
redis.call('SREM', ARGV[1] .. 'running:' .. owner, ARGV[2])
return 1
"""

# Interrupt one run of an owner. KEYS: run hash, event stream, that owner's lease.
# ARGV: prefix, run id, now_us, owner, expected last_seq, terminal event data,
# '1' when the owner's lease must have expired. Returns 1 interrupted, 0 not running
# (or no longer this owner's), -1 no run, -3 last_seq moved on (retry), -5 lease alive.
_INTERRUPT = """
local status = redis.call('HGET', KEYS[1], 'status')
if not status then
  redis.call('SREM', ARGV[1] .. 'running:' .. ARGV[4], ARGV[2])
  return -1
end
local owner = redis.call('HGET', KEYS[1], 'owner')
if status ~= 'running' or owner ~= ARGV[4] then
  redis.call('SREM', ARGV[1] .. 'running:' .. ARGV[4], ARGV[2])
  return 0
end
if ARGV[7] == '1' then
  local expires = redis.call('GET', KEYS[3])
  if expires and tonumber(expires) > tonumber(ARGV[3]) then return -5 end
end
local last = tonumber(redis.call('HGET', KEYS[1], 'last_seq'))
if last ~= tonumber(ARGV[5]) then return -3 end
local seq = last + 1
redis.call('XADD', KEYS[2], '0-' .. seq, 'd', ARGV[6])
redis.call('HSET', KEYS[1], 'status', 'interrupted', 'outcome', 'interrupted',
    'last_seq', seq, 'updated_us', ARGV[3])
redis.call('SREM', ARGV[1] .. 'running:' .. owner, ARGV[2])
return 1
"""

# KEYS: run hash, owners set. ARGV: prefix, run id, now_us, new owner, tenant ('' = any).
# Returns {1, fields...} reopened, {-1} no run (or another tenant's), {-2, status}.
_REOPEN = """
local fields = redis.call('HGETALL', KEYS[1])
if #fields == 0 then return {-1} end
local status = redis.call('HGET', KEYS[1], 'status')
if ARGV[5] ~= '' and redis.call('HGET', KEYS[1], 'tenant') ~= ARGV[5] then return {-1} end
if status ~= 'interrupted' then return {-2, status} end
redis.call('HSET', KEYS[1], 'status', 'running', 'outcome', '', 'owner', ARGV[4],
    'updated_us', ARGV[3])
redis.call('SADD', ARGV[1] .. 'running:' .. ARGV[4], ARGV[2])
redis.call('SADD', KEYS[2], ARGV[4])
local reply = redis.call('HGETALL', KEYS[1])
table.insert(reply, 1, 1)
return reply
"""

# KEYS: owners set, that owner's running set, its lease. ARGV: owner, now_us.
# Drops an owner with no running run and no live lease from the sweep.
_FORGET_OWNER = """
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
local expires = redis.call('GET', KEYS[3])
if expires and tonumber(expires) > tonumber(ARGV[2]) then return 0 end
return redis.call('SREM', KEYS[1], ARGV[1])
"""

# Sessions. Times are integers in microseconds passed as strings; Lua numbers are
# doubles (exact below 2^53) and are written back with %.0f, never tostring.
# KEYS: session hash, sessions zset. ARGV: id, tenant, data, ttl_us, now_us, expires_us,
# px. Returns 1, or 0 when a live session has the id (an expired one is replaced).
_CREATE_SESSION = """
local exp = redis.call('HGET', KEYS[1], 'expires_us')
if exp and tonumber(exp) > tonumber(ARGV[5]) then return 0 end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'tenant', ARGV[2], 'data', ARGV[3], 'ttl_us', ARGV[4],
    'created_us', ARGV[5], 'updated_us', ARGV[5], 'expires_us', ARGV[6])
redis.call('PEXPIRE', KEYS[1], ARGV[7])
redis.call('ZADD', KEYS[2], ARGV[6], ARGV[1])
return 1
"""

# KEYS: session hash, sessions zset. ARGV: id, tenant ('' = any), now_us, data ('' = keep,
# a touch). Slides the expiry; returns {1, fields...}, or {-1} when not visible.
_USE_SESSION = """
local fields = redis.call('HGETALL', KEYS[1])
if #fields == 0 then return {-1} end
local now = tonumber(ARGV[3])
if tonumber(redis.call('HGET', KEYS[1], 'expires_us')) <= now then return {-1} end
if ARGV[2] ~= '' and redis.call('HGET', KEYS[1], 'tenant') ~= ARGV[2] then return {-1} end
local ttl = tonumber(redis.call('HGET', KEYS[1], 'ttl_us'))
local expires = string.format('%.0f', now + ttl)
redis.call('HSET', KEYS[1], 'expires_us', expires)
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[1], 'data', ARGV[4], 'updated_us', ARGV[3])
end
redis.call('PEXPIRE', KEYS[1], string.format('%.0f', math.max(1, math.ceil(ttl / 1000))))
redis.call('ZADD', KEYS[2], expires, ARGV[1])
local reply = redis.call('HGETALL', KEYS[1])
table.insert(reply, 1, 1)
return reply
"""

# KEYS: session hash, sessions zset. ARGV: id, tenant ('' = any), now_us.
# Returns 1 deleted, 0 not visible (missing, expired, another tenant's).
_DELETE_SESSION = """
local exp = redis.call('HGET', KEYS[1], 'expires_us')
if not exp then
  redis.call('ZREM', KEYS[2], ARGV[1])
  return 0
end
if tonumber(exp) <= tonumber(ARGV[3]) then return 0 end
if ARGV[2] ~= '' and redis.call('HGET', KEYS[1], 'tenant') ~= ARGV[2] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
"""

# KEYS: session hash, sessions zset. ARGV: id, now_us. Deletes the session if it expired
# (or Redis already dropped it): 1; 0 when it is live (its score is set right again).
_SWEEP_SESSION = """
local exp = redis.call('HGET', KEYS[1], 'expires_us')
if exp and tonumber(exp) > tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[2], exp, ARGV[1])
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
"""


def _glob_escape(text: str) -> str:
    """``text`` matched literally by a Redis ``SCAN MATCH`` pattern."""
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)


class RedisRunStore(RedisTaskTable, RedisRunDeleter, RedisCancelTable, StoreBase):
    """Runs and events in Redis (hashes, streams, sorted sets).

    Args:
        url: ``redis://host:port/db``.
        prefix: namespace of every key (lets tests and deployments share a server).
        owner: see :class:`StoreBase` (its lease is the ``lease:<owner>`` key).
        block_s: how long one ``XREAD BLOCK`` of a follower waits before re-checking.
        max_connections: pool size for reads and writes.
        max_followers: pool size for followers without a live stream (one
            connection each while waiting; more followers queue for a turn).
        **options: ``lease_ttl_s``, ``read_only``, ``clock``, ``poll_interval_s``.
    """

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "rr:",
        owner: str | None = None,
        block_s: float = 1.0,
        max_connections: int = 32,
        max_followers: int = 64,
        **options: Any,
    ) -> None:
        super().__init__(owner=owner, **options)
        self.url = url
        self.prefix = prefix
        self._block_ms = max(1, int(block_s * 1000))
        self._max_connections = max_connections
        self._max_followers = max_followers
        self._client: aioredis.Redis | None = None
        self._followers: Any = None  # aioredis.Redis; replies typed loosely as in _redis

    # --- lifecycle ---------------------------------------------------------------------------

    async def open(self) -> list[str]:
        """Connect (checking the server answers), write this owner's lease, then recover.

        Recovers this owner's own ``running`` runs and those of owners whose
        lease expired; a read-only open writes and recovers nothing.
        """
        if self._is_open:
            return []
        # Two bounded pools that wait for a free connection rather than fail:
        # followers park in XREAD BLOCK, so they get their own pool and can
        # never starve the writers of connections.
        client = aioredis.Redis.from_pool(aioredis.BlockingConnectionPool.from_url(
            self.url, max_connections=self._max_connections, timeout=None))
        followers = aioredis.Redis.from_pool(aioredis.BlockingConnectionPool.from_url(
            self.url, max_connections=self._max_followers, timeout=None))
        try:
            with translated():
                await client.ping()
        except BaseException:
            await client.aclose()
            await followers.aclose()
            raise
        self._client, self._followers = client, followers
        self._create = client.register_script(_CREATE)
        self._append = client.register_script(_APPEND)
        self._finish = client.register_script(_FINISH)
        self._register_task_scripts(client)
        self._register_delete_scripts(client)
        self._register_cancel_scripts(client)
        self._interrupt = client.register_script(_INTERRUPT)
        self._reopen = client.register_script(_REOPEN)
        self._forget_owner = client.register_script(_FORGET_OWNER)
        self._create_session = client.register_script(_CREATE_SESSION)
        self._use_session = client.register_script(_USE_SESSION)
        self._delete_session = client.register_script(_DELETE_SESSION)
        self._sweep_session = client.register_script(_SWEEP_SESSION)
        self._is_open = True
        if self.read_only:
            return []
        await self.heartbeat()
        return [*await self.mark_interrupted(), *await self._recover_expired(scan=True)]

    async def close(self) -> None:
        """Delete this owner's lease (best effort), close the connection pools; idempotent."""
        if self._is_open and not self.read_only and self._client is not None:
            # Tidiness only (the lease expires anyway): never hold a shutdown up for it.
            with contextlib.suppress(StoreError, TimeoutError), translated():
                async with asyncio.timeout(2.0):
                    await self._client.delete(self._lease_key(self.owner))
        self._is_open = False
        client, self._client = self._client, None
        followers, self._followers = self._followers, None
        if client is not None:
            await client.aclose()
        if followers is not None:
            await followers.aclose()

    @property
    def _redis(self) -> Any:
        """The client, typed loosely: replies are bytes here (``decode_responses=False``)."""
        self._check_open()
        assert self._client is not None
        return self._client

    def _run_key(self, run_id: str) -> str:
        return f"{self.prefix}run:{run_id}"

    def _ev_key(self, run_id: str) -> str:
        return f"{self.prefix}ev:{run_id}"

    def _lease_key(self, owner: str) -> str:
        return f"{self.prefix}lease:{owner}"

    def _running_key(self, owner: str) -> str:
        return f"{self.prefix}running:{owner}"

    @property
    def _owners_key(self) -> str:
        return f"{self.prefix}owners"

    def _session_key(self, session_id: str) -> str:
        return f"{self.prefix}session:{session_id}"

    @property
    def _sessions_key(self) -> str:
        return f"{self.prefix}sessions"

    # --- runs --------------------------------------------------------------------------------

    async def create_run(self, meta: RunMeta) -> RunRecord:
        """Store a new ``running`` run (raises RunExists if the id is taken)."""
        self._writable()
        if not meta.run_id or not meta.tenant:
            raise ValueError("a run needs a non-empty run_id and tenant")
        now = self._now_us()
        cursor = make_cursor(now, meta.run_id)
        self._check_open()
        with translated():
            created = await self._create(
                keys=[
                    self._run_key(meta.run_id),
                    f"{self.prefix}tenant:{meta.tenant}",
                    f"{self.prefix}running:{self.owner}",
                    self._owners_key,
                ],
                args=[meta.tenant, meta.question, meta.mode, self.owner, now, cursor,
                      meta.run_id],
            )
        if not created:
            raise RunExists(f"run {meta.run_id!r} already exists")
        return RunRecord(
            run_id=meta.run_id, tenant=meta.tenant, question=meta.question, mode=meta.mode,
            status="running", outcome=None, created_at=now / 1e6, updated_at=now / 1e6,
            last_seq=0, cursor=cursor,
        )

    async def append(self, run_id: str, events: Sequence[Event]) -> int:
        """Store events atomically (one script); see :meth:`RunStore.append`."""
        self._writable()
        check_batch(run_id, events)
        tail = events[-1] if events else None
        if isinstance(tail, RunFinished):
            return await self._run_append(run_id, events, "finished", tail.outcome)
        return await self._run_append(run_id, events, "", "")

    async def _run_append(
        self, run_id: str, events: Sequence[Event], status: str, outcome: str
    ) -> int:
        self._check_open()
        if not events:
            return (await self.get_run(run_id)).last_seq
        args: list[Any] = [self.prefix, run_id, self._now_us(), status, outcome, self.owner]
        for event in events:
            args.extend((event.seq, encode_msgpack(event)))
        with translated():
            code, last = await self._append(
                keys=[self._run_key(run_id), self._ev_key(run_id)], args=args
            )
        if code == -1:
            raise RunNotFound(run_id)
        if code == -2:
            raise RunAlreadyFinished(f"run {run_id!r} is closed; cannot append")
        if code == -4:
            raise RunOwnedElsewhere(f"run {run_id!r} is written by another owner now "
                                    "(it was recovered and resumed); cannot append")
        if code == -3:
            raise SeqConflict(
                f"run {run_id!r} has events up to seq {last}; got seq {events[0].seq}.."
            )
        return int(last)

    async def finish(self, run_id: str, outcome: Outcome) -> bool:
        """Close a running run with ``outcome`` (no event); False if already closed."""
        self._writable()
        self._check_open()
        with translated():
            code = await self._finish(
                keys=[self._run_key(run_id)],
                args=[self.prefix, run_id, self._now_us(), outcome],
            )
        if code == -1:
            raise RunNotFound(run_id)
        return bool(code == 1)

    async def mark_interrupted(self) -> list[str]:
        """Close this owner's ``running`` runs with a stored ``run.finished(interrupted)``."""
        self._writable()
        return await self._interrupt_owner(self.owner, require_expired=False)

    async def _interrupt_owner(self, owner: str, *, require_expired: bool) -> list[str]:
        """Interrupt ``owner``'s running runs, one script per run (status checked inside)."""
        with translated():
            members = await self._redis.smembers(self._running_key(owner))
        marked = []
        for raw in sorted(members):
            run_id = raw.decode()
            for _attempt in range(10):
                with translated():
                    last = await self._redis.hget(self._run_key(run_id), "last_seq")
                terminal = RunFinished(
                    outcome="interrupted", reason=INTERRUPTED_REASON, run_id=run_id,
                    seq=int(last or 0) + 1, ts=self._clock(), actor="store",
                )
                with translated():
                    code = await self._interrupt(
                        keys=[self._run_key(run_id), self._ev_key(run_id),
                              self._lease_key(owner)],
                        args=[self.prefix, run_id, self._now_us(), owner, terminal.seq - 1,
                              encode_msgpack(terminal), "1" if require_expired else "0"],
                    )
                if code == -3:
                    continue  # a late write landed in between: try again on top of it
                if code == 1:
                    marked.append(run_id)
                if code == -5:  # the owner renewed its lease meanwhile: it is alive
                    return marked
                break
        return marked

    async def heartbeat(self) -> None:
        """Write or renew this owner's lease key, ``lease_ttl_s`` from now."""
        self._writable()
        expires = self._now_us() + int(self.lease_ttl_s * 1_000_000)
        with translated():
            await self._redis.set(self._lease_key(self.owner), expires,
                                  px=max(1, math.ceil(self.lease_ttl_s * 2000)))

    async def recover_expired(self) -> list[str]:
        """Interrupt the running runs of other owners whose lease expired (or who have none)."""
        if self.read_only:
            self._check_open()
            return []
        return await self._recover_expired(scan=False)

    async def _recover_expired(self, *, scan: bool) -> list[str]:
        """Sweep the ``owners`` set (and, with ``scan``, every ``running:*`` key too)."""
        with translated():
            owners = {raw.decode() for raw in await self._redis.smembers(self._owners_key)}
            if scan:  # runs written before the owners set existed
                pattern = _glob_escape(f"{self.prefix}running:") + "*"
                start = len(f"{self.prefix}running:".encode())
                async for key in self._redis.scan_iter(match=pattern, count=1000):
                    owners.add(bytes(key[start:]).decode())
        owners.discard(self.owner)
        recovered: list[str] = []
        for owner in sorted(owners):
            with translated():
                expires = await self._redis.get(self._lease_key(owner))
            if expires is not None and int(expires) > self._now_us():
                continue  # alive (checked again, atomically, per run)
            recovered += await self._interrupt_owner(owner, require_expired=True)
            with translated():
                await self._forget_owner(
                    keys=[self._owners_key, self._running_key(owner), self._lease_key(owner)],
                    args=[owner, self._now_us()],
                )
        return recovered

    async def reopen(self, run_id: str, tenant: str | None = None) -> RunRecord:
        """An ``interrupted`` run becomes ``running`` again under this owner (one script)."""
        self._writable()
        self._check_open()
        with translated():
            reply = await self._reopen(
                keys=[self._run_key(run_id), self._owners_key],
                args=[self.prefix, run_id, self._now_us(), self.owner, tenant or ""],
            )
        if reply[0] == -1:
            raise RunNotFound(run_id)
        if reply[0] == -2:
            raise RunNotResumable(run_id, bytes(reply[1]).decode())
        flat = reply[1:]
        return self._record(run_id, dict(zip(flat[::2], flat[1::2], strict=True)))

    def _record(self, run_id: str, fields: dict[bytes, bytes]) -> RunRecord:
        created_us = int(fields[b"created_us"])
        outcome = text_field(fields, "outcome") or None
        return RunRecord(
            run_id=run_id,
            tenant=text_field(fields, "tenant"),
            question=text_field(fields, "question"),
            mode=text_field(fields, "mode"),
            status=cast(RunStatus, text_field(fields, "status")),
            outcome=cast(Outcome | None, outcome),
            created_at=created_us / 1e6,
            updated_at=int(fields[b"updated_us"]) / 1e6,
            last_seq=int(fields[b"last_seq"]),
            cursor=make_cursor(created_us, run_id),
        )

    async def get_run(self, run_id: str, tenant: str | None = None) -> RunRecord:
        """One run, scoped to ``tenant`` (another tenant's id raises RunNotFound)."""
        with translated():
            fields = await self._redis.hgetall(self._run_key(run_id))
        if not fields or (tenant is not None and text_field(fields, "tenant") != tenant):
            raise RunNotFound(run_id)
        return self._record(run_id, fields)

    async def run_ids_with_prefix(
        self, prefix: str, *, tenant: str | None = None, limit: int = 10
    ) -> list[str]:
        """Run ids starting with ``prefix`` (a SCAN over the run keys), sorted."""
        if limit < 1:
            raise ValueError("limit must be >= 1")
        start = len(self._run_key("").encode())
        found: set[str] = set()
        with translated():
            pattern = _glob_escape(self._run_key(prefix)) + "*"
            async for key in self._redis.scan_iter(match=pattern, count=1000):
                found.add(bytes(key[start:]).decode())
            ids = sorted(found)
            if tenant is not None:
                async with self._redis.pipeline(transaction=False) as pipe:
                    for run_id in ids:
                        pipe.hget(self._run_key(run_id), "tenant")
                    owners = await pipe.execute()
                ids = [r for r, t in zip(ids, owners, strict=True)
                       if t is not None and bytes(t).decode() == tenant]
        return ids[:limit]

    async def list_runs(
        self, tenant: str, *, limit: int = 50, before: str | None = None
    ) -> RunPage:
        """A tenant's runs, newest first; ``before`` is a previous page's ``next_before``."""
        if limit < 1:
            raise ValueError("limit must be >= 1")
        if before is not None:
            parse_cursor(before)
        top = "+" if before is None else "(" + before
        with translated():
            members = await self._redis.execute_command(
                "ZRANGE", f"{self.prefix}tenant:{tenant}", top, "-", "BYLEX", "REV",
                "LIMIT", 0, limit + 1,
            )
            ids = [parse_cursor(m.decode())[1] for m in members[:limit]]
            async with self._redis.pipeline(transaction=False) as pipe:
                for run_id in ids:
                    pipe.hgetall(self._run_key(run_id))
                rows = await pipe.execute()
        runs = tuple(
            self._record(run_id, fields) for run_id, fields in zip(ids, rows, strict=True)
            if fields
        )
        more = len(members) > limit
        return RunPage(runs=runs, next_before=runs[-1].cursor if more and runs else None)

    def _decode(self, run_id: str, entries: list[Any]) -> list[Event]:
        events = []
        for entry_id, fields in entries:
            try:
                events.append(decode_msgpack(fields[b"d"]))
            except (DecodeError, KeyError) as exc:
                raise StoreCorrupt(
                    f"run {run_id!r} entry {entry_id!r} does not decode: {exc}"
                ) from exc
        return events

    async def _fetch(self, run_id: str, after_seq: int, limit: int) -> list[Event]:
        with translated():
            entries = await self._redis.xrange(
                self._ev_key(run_id), min=f"0-{after_seq + 1}", max="+", count=limit
            )
        return self._decode(run_id, entries)

    async def _follow(self, run_id: str, after_seq: int) -> list[Event]:
        self._check_open()
        assert self._followers is not None
        with translated():
            reply = await self._followers.xread(
                {self._ev_key(run_id): f"0-{after_seq}"}, count=PAGE, block=self._block_ms
            )
        if not reply:
            return []
        _key, entries = reply[0]
        return self._decode(run_id, entries)

    async def _status(self, run_id: str) -> RunStatus:
        with translated():
            status = await self._redis.hget(self._run_key(run_id), "status")
        if status is None:
            raise RunNotFound(run_id)
        return cast(RunStatus, status.decode())

    # --- conversation sessions -------------------------------------------------------------

    def _session(self, session_id: str, fields: dict[bytes, bytes]) -> SessionRecord:
        try:
            data = json.loads(fields[b"data"])
            return SessionRecord(
                session_id=session_id,
                tenant=text_field(fields, "tenant"),
                data=data,
                ttl_s=int(fields[b"ttl_us"]) / 1e6,
                created_at=int(fields[b"created_us"]) / 1e6,
                updated_at=int(fields[b"updated_us"]) / 1e6,
                expires_at=int(fields[b"expires_us"]) / 1e6,
            )
        except (KeyError, ValueError) as exc:
            raise StoreCorrupt(f"session {session_id!r} does not decode: {exc}") from exc

    async def create_session(self, session_id: str, tenant: str, data: dict[str, JsonValue],
                             *, ttl_s: float) -> SessionRecord:
        """Store a new session (an expired one with the same id is replaced; one script)."""
        self._writable()
        ttl_us, text = new_session_args(session_id, tenant, data, ttl_s)
        now = self._now_us()
        self._check_open()
        with translated():
            created = await self._create_session(
                keys=[self._session_key(session_id), self._sessions_key],
                args=[session_id, tenant, text, ttl_us, now, now + ttl_us,
                      max(1, math.ceil(ttl_us / 1000))],
            )
        if not created:
            raise SessionExists(f"session {session_id!r} already exists")
        return SessionRecord(session_id=session_id, tenant=tenant, data=json.loads(text),
                             ttl_s=ttl_us / 1e6, created_at=now / 1e6, updated_at=now / 1e6,
                             expires_at=(now + ttl_us) / 1e6)

    async def _use(self, session_id: str, tenant: str | None, text: str) -> SessionRecord:
        self._check_open()
        with translated():
            reply = await self._use_session(
                keys=[self._session_key(session_id), self._sessions_key],
                args=[session_id, tenant or "", self._now_us(), text],
            )
        if reply[0] == -1:
            raise SessionNotFound(session_id)
        flat = reply[1:]
        return self._session(session_id, dict(zip(flat[::2], flat[1::2], strict=True)))

    async def get_session(self, session_id: str, tenant: str | None = None, *,
                          touch: bool = True) -> SessionRecord:
        """One live session; ``touch`` (not on a read-only store) slides its expiry."""
        self._check_open()
        if not session_id_ok(session_id):
            raise SessionNotFound(session_id)
        if touch and not self.read_only:
            return await self._use(session_id, tenant, "")
        with translated():
            fields = await self._redis.hgetall(self._session_key(session_id))
        if not fields or (tenant is not None and text_field(fields, "tenant") != tenant):
            raise SessionNotFound(session_id)
        record = self._session(session_id, fields)
        if int(fields[b"expires_us"]) <= self._now_us():
            raise SessionNotFound(session_id)
        return record

    async def save_session(self, session_id: str, data: dict[str, JsonValue], *,
                           tenant: str | None = None) -> SessionRecord:
        """Replace a live session's data and slide its expiry (one script)."""
        self._writable()
        if not session_id_ok(session_id):
            raise SessionNotFound(session_id)
        text = session_data_text(data)
        return await self._use(session_id, tenant, text)

    async def delete_session(self, session_id: str, tenant: str | None = None) -> bool:
        """Delete a live session; False if none was visible."""
        self._writable()
        self._check_open()
        if not session_id_ok(session_id):
            return False
        with translated():
            code = await self._delete_session(
                keys=[self._session_key(session_id), self._sessions_key],
                args=[session_id, tenant or "", self._now_us()],
            )
        return bool(code == 1)

    async def sweep_sessions(self) -> list[str]:
        """Delete the expired sessions (one script each, checked inside); return their ids."""
        if self.read_only:
            self._check_open()
            return []
        now = self._now_us()
        with translated():
            due = await self._redis.zrangebyscore(self._sessions_key, "-inf", now)
        swept: list[str] = []
        for raw in sorted(due):
            session_id = raw.decode()
            with translated():
                code = await self._sweep_session(
                    keys=[self._session_key(session_id), self._sessions_key],
                    args=[session_id, now],
                )
            if code == 1:
                swept.append(session_id)
        return swept

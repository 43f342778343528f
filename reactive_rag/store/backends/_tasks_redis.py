"""The background tasks of the Redis store (:class:`~reactive_rag.store.TaskStore`).

:class:`RedisTaskTable` is a mixin of :class:`~reactive_rag.store.RedisRunStore`.
Keys (under the store's prefix)::

    task:<id>         hash: a background task
    tasks:unfinished  sorted set by creation time: pending/running task ids
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from .._exceptions import TaskAlreadyFinished, TaskExists, TaskNotFound
from .._protocol import BackgroundTask, TaskStatus, TaskUpdate
from ._redis_common import text_field, translated

__all__ = ["RedisTaskTable"]

# KEYS: task hash, unfinished zset. ARGV: task id, now_us, unfinished ('1'/'0'),
# then field/value pairs. Returns 1, or 0 when the id is taken.
_CREATE_TASK = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
for i = 4, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
if ARGV[3] == '1' then redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1]) end
return 1
"""

# KEYS: task hash, unfinished zset. ARGV: task id, now_us, new status ('' = keep),
# then field/value pairs. Returns 1, -1 (no task) or -2 (already final).
_UPDATE_TASK = """
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return -1 end
if status == 'done' or status == 'failed' or status == 'cancelled' then return -2 end
for i = 4, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('HSET', KEYS[1], 'updated_us', ARGV[2])
local new = ARGV[3]
if new ~= '' then
  redis.call('HSET', KEYS[1], 'status', new)
  if new == 'done' or new == 'failed' or new == 'cancelled' then
    redis.call('ZREM', KEYS[2], ARGV[1])
  end
end
return 1
"""


class RedisTaskTable:
    """Background tasks in Redis (mixed into ``RedisRunStore``, which opens the client)."""

    _create_task: Any
    _update_task: Any

    if TYPE_CHECKING:  # provided by RedisRunStore / StoreBase
        prefix: str

        @property
        def _redis(self) -> Any: ...

        def _writable(self) -> None: ...

        def _now_us(self) -> int: ...

        def _check_open(self) -> None: ...

    def _register_task_scripts(self, client: Any) -> None:
        """Load the task scripts on ``client`` (at every open)."""
        self._create_task = client.register_script(_CREATE_TASK)
        self._update_task = client.register_script(_UPDATE_TASK)

    def _task_key(self, task_id: str) -> str:
        return f"{self.prefix}task:{task_id}"

    def _task(self, task_id: str, fields: dict[bytes, bytes]) -> BackgroundTask:
        def opt(name: str) -> str | None:
            value = fields.get(name.encode(), b"")
            return value.decode() if value else None

        result = opt("result")
        return BackgroundTask(
            task_id=task_id,
            tenant=text_field(fields, "tenant"),
            kind=text_field(fields, "kind"),
            run_id=opt("run_id"),
            doc_id=opt("doc_id"),
            status=TaskStatus(text_field(fields, "status")),
            progress=float(fields[b"progress"]),
            params=json.loads(fields[b"params"]),
            result=None if result is None else json.loads(result),
            error=opt("error"),
            created_at=int(fields[b"created_us"]) / 1e6,
            updated_at=int(fields[b"updated_us"]) / 1e6,
        )

    async def create_task(self, task: BackgroundTask) -> BackgroundTask:
        """Persist a new task; ``created_at``/``updated_at`` are set here."""
        self._writable()
        if not task.task_id or not task.tenant or not task.kind:
            raise ValueError("a task needs a non-empty task_id, tenant and kind")
        now = self._now_us()
        fields: list[Any] = [
            "tenant", task.tenant, "kind", task.kind, "run_id", task.run_id or "",
            "doc_id", task.doc_id or "", "status", task.status.value,
            "progress", task.progress, "params", json.dumps(task.params),
            "result", "" if task.result is None else json.dumps(task.result),
            "error", task.error or "", "created_us", now, "updated_us", now,
        ]
        self._check_open()
        with translated():
            created = await self._create_task(
                keys=[self._task_key(task.task_id), f"{self.prefix}tasks:unfinished"],
                args=[task.task_id, now, "0" if task.status.final else "1", *fields],
            )
        if not created:
            raise TaskExists(f"task {task.task_id!r} already exists")
        return await self.get_task(task.task_id)

    async def update_task(self, task_id: str, update: TaskUpdate) -> BackgroundTask:
        """Apply ``update``; a task in a final status raises TaskAlreadyFinished."""
        self._writable()
        args: list[Any] = [
            task_id, self._now_us(), "" if update.status is None else update.status.value
        ]
        if update.progress is not None:
            args += ["progress", update.progress]
        if update.result is not None:
            args += ["result", json.dumps(update.result)]
        if update.error is not None:
            args += ["error", update.error]
        self._check_open()
        with translated():
            code = await self._update_task(
                keys=[self._task_key(task_id), f"{self.prefix}tasks:unfinished"], args=args
            )
        if code == -1:
            raise TaskNotFound(task_id)
        if code == -2:
            raise TaskAlreadyFinished(f"task {task_id!r} is already final")
        return await self.get_task(task_id)

    async def get_task(self, task_id: str, tenant: str | None = None) -> BackgroundTask:
        """One task, scoped to ``tenant``."""
        with translated():
            fields = await self._redis.hgetall(self._task_key(task_id))
        if not fields or (tenant is not None and text_field(fields, "tenant") != tenant):
            raise TaskNotFound(task_id)
        return self._task(task_id, fields)

    async def list_unfinished_tasks(self) -> list[BackgroundTask]:
        """Pending and running tasks, oldest first."""
        with translated():
            ids = await self._redis.zrange(f"{self.prefix}tasks:unfinished", 0, -1)
            async with self._redis.pipeline(transaction=False) as pipe:
                for raw in ids:
                    pipe.hgetall(self._task_key(raw.decode()))
                rows = await pipe.execute()
        return [
            self._task(raw.decode(), fields) for raw, fields in zip(ids, rows, strict=True)
            if fields
        ]

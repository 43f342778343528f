"""A separate process that writes runs through a Recorder, for crash and cross-process tests.

Usage: python -m tests.reactive_rag._store_child
    BACKEND TARGET KEY_PREFIX RUN_PREFIX RUNS EVENTS PAUSE_S

For every run it prints ``created <run_id>`` once the run exists, and
``finished <run_id> <last_seq>`` once the whole run (with its ``run.finished``)
is committed. The parent may kill it (``kill -9``) at any moment. The crash
test starts it through a forkserver that has imported it already (fast), via
:func:`run_child`.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from multiprocessing.connection import Connection

from reactive_rag.store import PostgresRunStore, Recorder, RedisRunStore, RunMeta, SqliteRunStore
from streams import RunFinished, RunStarted, RunStream, SearchRequested

from ._store_fixtures import pg_schema


def _print(line: str) -> None:
    print(line, flush=True)


def run_child(conn: Connection, backend: str, target: str, key_prefix: str, run_prefix: str,
              runs: int, events: int, pause_s: float) -> None:
    """Entry point for a multiprocessing child: lines go to ``conn`` instead of stdout."""
    asyncio.run(main(backend, target, key_prefix, run_prefix, runs, events, pause_s,
                     say=conn.send))


def _store(backend: str, target: str,
           prefix: str) -> SqliteRunStore | RedisRunStore | PostgresRunStore:
    if backend == "sqlite":
        return SqliteRunStore(target, owner="child")
    if backend == "postgres":  # KEY_PREFIX names the schema, as in _store_fixtures.make_store
        return PostgresRunStore(target, schema=pg_schema(prefix), owner="child")
    return RedisRunStore(target, prefix=prefix, owner="child")


async def main(backend: str, target: str, key_prefix: str, run_prefix: str, runs: int,
               events: int, pause_s: float, say: Callable[[str], None] = _print) -> None:
    store = _store(backend, target, key_prefix)
    await store.open()
    try:
        for index in range(runs):
            run_id = f"{run_prefix}run-{index}"
            stream = RunStream(run_id, keep_history=False)
            recorder = Recorder(store, stream, RunMeta(run_id, "acme", f"question {index}"),
                                batch_size=16, flush_interval_s=0.002)
            await recorder.start()
            say(f"created {run_id}")
            stream.publish(RunStarted(question=f"question {index}"))
            for i in range(events):
                stream.publish(SearchRequested(query=f"q{i}"))
                if pause_s:
                    await asyncio.sleep(pause_s)
            stream.publish(RunFinished(outcome="answered", answer="done"))
            await recorder.aclose()
            say(f"finished {run_id} {stream.last_seq}")
    finally:
        await store.close()


if __name__ == "__main__":
    b, t, kp, rp, r, e, s = sys.argv[1:8]
    asyncio.run(main(b, t, kp, rp, int(r), int(e), float(s)))
